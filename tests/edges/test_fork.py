"""fork() with a store open (issues 20 and 15): the child cannot use the inherited store (every
call fails clearly; before issue 20 the child wrote through the parent's RocksDB instance and
the next open failed with "Corruption: Sequence number is being set backwards"), the parent's
store is never damaged, and the child may open the store again: it becomes a client of the
parent, which owns and serves it (kv/shared). Other processes share it the same way."""

import errno
import multiprocessing
import os
import subprocess
import sys

import txvfs


def _child_checks(store, path: str) -> int:
    """Runs in the child; returns a bit mask of the checks that failed (0: all held)."""
    failed = 0
    try:
        store.write_bytes("/inherited-write", b"child")
        failed |= 1
    except OSError as e:
        if e.errno != errno.EBUSY or "fork" not in str(e):
            failed |= 2
    try:
        store.read_bytes("/before")
        failed |= 4
    except OSError:
        pass
    try:
        with txvfs.open(path) as mine:
            if mine.read_bytes("/before") != b"parent":
                failed |= 8
            mine.write_bytes("/from-child", b"child")
    except OSError:
        failed |= 16
    return failed


def test_fork_child_cannot_use_the_inherited_store_but_may_open_its_own(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/before", b"parent")
    pid = os.fork()
    if pid == 0:
        os._exit(_child_checks(store, path))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.write_bytes("/after", b"parent")
    assert store.read_bytes("/from-child") == b"child"
    store.close()
    with txvfs.open(path) as again:
        assert again.read_bytes("/before") == b"parent"
        assert again.read_bytes("/after") == b"parent"
        assert not again.exists("/inherited-write")


def _pool_worker(args):
    path, i = args
    try:
        with txvfs.open(path) as s:
            s.write_bytes(f"/w{i}", b"x")
        return "opened"
    except OSError as e:
        return f"error {e}"


def test_multiprocessing_fork_pool_shares_the_store_the_parent_owns(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/parent", b"1")
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map(_pool_worker, [(path, i) for i in range(4)])
    assert results == ["opened"] * 4
    assert [store.read_bytes(f"/w{i}") for i in range(4)] == [b"x"] * 4
    store.write_bytes("/parent2", b"2")
    store.close()
    with txvfs.open(path) as again:
        assert again.read_bytes("/parent") == b"1" and again.read_bytes("/parent2") == b"2"


_OPEN_AND_WRITE = """
import sys, txvfs
try:
    with txvfs.open(sys.argv[1]) as s:
        s.write_bytes("/second", b"process")
        print("ok", s.read_bytes("/first").decode())
except OSError as e:
    print(e.errno, e)
"""


def test_a_second_process_shares_the_store(tmp_path):
    path = str(tmp_path / "store")
    with txvfs.open(path) as store:
        store.write_bytes("/first", b"owner")
        out = subprocess.run(
            [sys.executable, "-c", _OPEN_AND_WRITE, path],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.strip() == "ok owner", out
        assert store.read_bytes("/second") == b"process"


def test_an_exclusive_store_refuses_a_second_process_with_the_owner_pid(tmp_path):
    path = str(tmp_path / "store")
    with txvfs.open(f"rocksdb:{path}?mode=exclusive"):
        out = subprocess.run(
            [sys.executable, "-c", _OPEN_AND_WRITE, path],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert out.startswith(f"{errno.EBUSY} ") and f"exclusive use by process {os.getpid()}" in out, (
        out
    )
