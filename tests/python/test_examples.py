"""The examples in examples/python run and print what they say."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

EXAMPLES = ROOT / "examples" / "python"


def run(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, path], capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )


def test_quickstart() -> None:
    r = run(os.fspath(EXAMPLES / "quickstart.py"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "['a.txt', 'b.txt'] part one\n"
    assert r.stderr == "done\n"


def test_fsspec_pandas() -> None:
    r = run(os.fspath(EXAMPLES / "fsspec_pandas.py"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "['/data/new.csv']"
    assert lines[1] == "['x,y', '1,2', '3,4']"
    assert lines[2] == "pandas sum: 6"  # pandas is a test requirement (requirements.txt)
    assert len(lines) == 3
