"""Fixtures of the txvfs Python suite.

tests/python/run puts the package (bindings/python/python/txvfs plus the extension built by
`cargo build --release --workspace`) on PYTHONPATH; this suite never builds anything itself.
"""

from __future__ import annotations

import os
import pathlib
import random
from typing import Any, Iterator

import pytest
import txvfs

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def store() -> Iterator[txvfs.Store]:
    """A fresh in-memory store."""
    with txvfs.open("memory:") as s:
        yield s


@pytest.fixture
def disk_store(tmp_path: pathlib.Path) -> Iterator[txvfs.Store]:
    """A fresh RocksDB store in a temporary directory (commits not fsynced: faster)."""
    with txvfs.open(os.fspath(tmp_path / "store"), sync=False) as s:
        yield s


@pytest.fixture(params=["memory", "rocksdb"])
def any_store(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[txvfs.Store]:
    """A fresh store on each backend."""
    uri = "memory:" if request.param == "memory" else os.fspath(tmp_path / "store")
    with txvfs.open(uri, sync=False) as s:
        yield s


# Random tests (hypothesis) are reproducible: by default (CI) every run uses one fixed seed,
# printed at the end of the run, so the suite cannot fail at random. A longer randomised run
# is a separate command: `TXVFS_HYPOTHESIS_PROFILE=long tests/python/run` runs ten times the
# examples from a new random seed, printed too; `TXVFS_HYPOTHESIS_SEED=N` replays seed N.
# No example database in the clone, and no deadlines (a benchmark is not a test).
from hypothesis import settings  # noqa: E402

HYPOTHESIS_PROFILE = os.environ.get("TXVFS_HYPOTHESIS_PROFILE", "ci")
if HYPOTHESIS_PROFILE not in ("ci", "long"):
    raise pytest.UsageError(
        "TXVFS_HYPOTHESIS_PROFILE must be 'ci' or 'long', not %r" % HYPOTHESIS_PROFILE
    )
_seed = os.environ.get("TXVFS_HYPOTHESIS_SEED")
HYPOTHESIS_SEED = (
    int(_seed)
    if _seed
    else 20
    if HYPOTHESIS_PROFILE == "ci"
    else random.SystemRandom().randrange(2**32)
)
settings.register_profile("ci", database=None, deadline=None, print_blob=True)
settings.register_profile("long", settings.get_profile("ci"))
settings.load_profile(HYPOTHESIS_PROFILE)


def examples(n: int) -> int:
    """The number of examples a random test runs: ``n``, or ten times it in the long run."""
    return n * 10 if HYPOTHESIS_PROFILE == "long" else n


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Gives hypothesis the run's seed (unless --hypothesis-seed was given)."""
    if config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(HYPOTHESIS_SEED)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Prints the seed of the random tests, to replay a failure."""
    terminalreporter.write_line(
        "hypothesis: profile %s, seed %s (replay: TXVFS_HYPOTHESIS_PROFILE=%s TXVFS_HYPOTHESIS_SEED=%s tests/python/run)"
        % (
            HYPOTHESIS_PROFILE,
            config.option.hypothesis_seed,
            HYPOTHESIS_PROFILE,
            config.option.hypothesis_seed,
        )
    )
