"""fork() with a store open (issue 20, item 2): the child cannot use the inherited store
(every call fails clearly), cannot open it while the parent holds it, and the parent's store
is never damaged. Before the fix the child wrote through the parent's RocksDB instance and the
next open failed with "Corruption: Sequence number is being set backwards"."""

import errno
import multiprocessing
import os

import txvfs


def _child_checks(store, path: str) -> int:
    """Runs in the child; returns a bit mask of the checks that failed (0: all held)."""
    failed = 0
    try:
        store.write_bytes("/from-child", b"child")
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
        txvfs.open(path).close()
        failed |= 8
    except OSError as e:
        if e.errno != errno.EBUSY or f"process {os.getppid()}" not in str(e):
            failed |= 16
    return failed


def test_fork_child_cannot_use_or_reopen_the_parent_store(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/before", b"parent")
    pid = os.fork()
    if pid == 0:
        os._exit(_child_checks(store, path))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.write_bytes("/after", b"parent")
    store.close()
    with txvfs.open(path) as again:
        assert again.read_bytes("/before") == b"parent"
        assert again.read_bytes("/after") == b"parent"
        assert not again.exists("/from-child")


def _pool_worker(args):
    path, i = args
    try:
        with txvfs.open(path) as s:
            s.write_bytes(f"/w{i}", b"x")
        return "opened"
    except OSError as e:
        return "refused" if e.errno == errno.EBUSY else f"error {e}"


def test_multiprocessing_fork_pool_is_refused_cleanly_while_the_parent_owns_the_store(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/parent", b"1")
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map(_pool_worker, [(path, i) for i in range(4)])
    assert results == ["refused"] * 4
    store.write_bytes("/parent2", b"2")
    store.close()
    with txvfs.open(path) as again:
        assert again.read_bytes("/parent") == b"1" and again.read_bytes("/parent2") == b"2"


def test_a_second_process_is_refused_with_the_owner_pid(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "store")
    with txvfs.open(path):
        out = subprocess.run(
            [sys.executable, "-c", "import sys, txvfs\ntry:\n txvfs.open(sys.argv[1])\nexcept OSError as e:\n print(e.errno, e)", path],
            capture_output=True, text=True, check=True,
        ).stdout
    assert out.startswith(f"{errno.EBUSY} ") and f"process {os.getpid()}" in out, out
