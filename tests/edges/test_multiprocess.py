"""Python multiprocessing on one store (issue 15): a pool of workers, started with fork and with
spawn, each opening the store itself and writing files into it while the parent holds the store
open and writes too; every file is there afterwards, seen by the parent at once. A worker that
uses a Store inherited across fork gets the clear error instead."""

import errno
import multiprocessing

import pytest
import txvfs

FILES_PER_TASK = 20


def _write_files(args):
    path, task = args
    with txvfs.open(path) as s:
        s.makedirs(f"/w/{task}", exist_ok=True)
        for i in range(FILES_PER_TASK):
            s.write_bytes(f"/w/{task}/{i}", f"{task}:{i}".encode() * 100)
    return task


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pool_of_workers_writes_into_one_store_the_parent_holds(tmp_path, method):
    path = str(tmp_path / "store")
    with txvfs.open(path) as store:
        store.write_bytes("/parent-before", b"1")
        ctx = multiprocessing.get_context(method)
        with ctx.Pool(3) as pool:
            done = pool.map(_write_files, [(path, t) for t in range(8)])
            store.write_bytes("/parent-during", b"2")
        assert sorted(done) == list(range(8))
        for t in range(8):
            for i in range(FILES_PER_TASK):
                assert store.read_bytes(f"/w/{t}/{i}") == f"{t}:{i}".encode() * 100
    with txvfs.open(path) as again:
        assert sum(len(again.listdir(f"/w/{t}")) for t in range(8)) == 8 * FILES_PER_TASK
        assert (
            again.read_bytes("/parent-before") == b"1"
            and again.read_bytes("/parent-during") == b"2"
        )


_inherited = None


def _use_inherited(_):
    try:
        _inherited.write_bytes("/from-worker", b"x")
        return "written"
    except OSError as e:
        return "fork error" if e.errno == errno.EBUSY and "fork" in str(e) else f"other error: {e}"


def test_a_store_inherited_across_fork_gives_the_clear_error(tmp_path):
    global _inherited
    path = str(tmp_path / "store")
    _inherited = txvfs.open(path)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            assert pool.map(_use_inherited, range(4)) == ["fork error"] * 4
        _inherited.write_bytes("/parent", b"ok")
        assert not _inherited.exists("/from-worker")
    finally:
        _inherited.close()
        _inherited = None
