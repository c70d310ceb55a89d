"""Fixtures of the txvfs Python suite.

tests/python/run puts the package (bindings/python/python/txvfs plus the extension built by
`cargo build --release --workspace`) on PYTHONPATH; this suite never builds anything itself.
"""

from __future__ import annotations

import os
import pathlib
from typing import Iterator

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


# Random tests are reproducible from the printed seed, need no example database in the clone,
# and must not fail on slow machines (no deadlines: a benchmark is not a test).
from hypothesis import settings  # noqa: E402

settings.register_profile("txvfs", database=None, deadline=None, print_blob=True)
settings.load_profile("txvfs")
