"""Issue 20, item 13: fsspec's ``fs.transaction`` with several threads on one instance, nested
``with fs.transaction`` blocks, and the instance cache keyed by the store.

Threads are real threads; where a test needs one thread to act while another is inside a
transaction, they meet at a barrier (no sleeps, no timing; their timeout only turns a hang into a failure).
"""

from __future__ import annotations

import os
import pathlib
import threading
from typing import Any, Callable, Iterator, List

import fsspec
import pytest
import txvfs
from txvfs.fsspec import TxvfsFileSystem

# A barrier that is never passed fails the test instead of hanging it (not a timing check).
HANG = 120


@pytest.fixture
def fs() -> Iterator[TxvfsFileSystem]:
    store = txvfs.open("memory:")
    yield TxvfsFileSystem(store=store, skip_instance_cache=True)
    store.close()


def in_thread(fn: Callable[[], Any]) -> threading.Thread:
    """Starts ``fn`` in a thread; its exception (if any) is re-raised by ``join_all``."""

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    errors: List[BaseException] = []
    t = threading.Thread(target=run)
    t.errors = errors  # type: ignore[attr-defined]
    t.start()
    return t


def join_all(*threads: threading.Thread) -> None:
    for t in threads:
        t.join()
    for t in threads:
        for e in t.errors:  # type: ignore[attr-defined]
            raise e


def test_another_threads_writes_do_not_join_a_transaction(fs: TxvfsFileSystem) -> None:
    store = fs.store
    inside, written = threading.Barrier(2, timeout=HANG), threading.Barrier(2, timeout=HANG)

    def transaction_that_fails() -> None:
        with pytest.raises(ZeroDivisionError):
            with fs.transaction:
                fs.pipe_file("/mine", b"rolled back")
                inside.wait()
                written.wait()
                assert not fs.exists("/theirs")  # the other thread's write is not in here
                1 / 0

    def writer() -> None:
        inside.wait()
        assert not fs._intrans  # the other thread's transaction is not this thread's
        fs.pipe_file("/theirs", b"auto-commit")
        assert store.read_bytes("/theirs") == b"auto-commit"  # committed at once
        written.wait()

    join_all(in_thread(transaction_that_fails), in_thread(writer))
    assert store.read_bytes("/theirs") == b"auto-commit"
    assert not store.exists("/mine")


def test_two_threads_run_two_transactions_on_one_instance(fs: TxvfsFileSystem) -> None:
    both_inside = threading.Barrier(2, timeout=HANG)
    fs.mkdir("/a")
    fs.mkdir("/b")  # two directories: the two transactions touch disjoint data (no conflict)

    def work(name: str) -> None:
        with fs.transaction:
            fs.pipe_file("/%s/1" % name, b"1")
            both_inside.wait()
            fs.pipe_file("/%s/2" % name, b"2")
            assert fs.find("/" + name) == ["/%s/1" % name, "/%s/2" % name]
            assert not fs.store.exists("/%s/1" % name)  # not committed yet
        assert not fs._intrans

    join_all(in_thread(lambda: work("a")), in_thread(lambda: work("b")))
    assert fs.find("/") == ["/a/1", "/a/2", "/b/1", "/b/2"]


class RmMeetsAWriter(TxvfsFileSystem):
    """rm_file waits, in the middle of ``rm``'s own transaction, until another thread has
    written; then the rm fails, so that its transaction rolls back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_rm = threading.Barrier(2, timeout=HANG)
        self.written = threading.Barrier(2, timeout=HANG)

    def rm_file(self, path: str) -> None:
        super().rm_file(path)
        self.in_rm.wait()
        self.written.wait()
        raise PermissionError("rm fails after the other thread wrote")


def test_rms_transaction_does_not_take_another_threads_write() -> None:
    with txvfs.open("memory:") as store:
        fs = RmMeetsAWriter(store=store, skip_instance_cache=True)
        fs.pipe_file("/victim", b"stays")

        def remove() -> None:
            with pytest.raises(PermissionError):
                fs.rm("/victim")

        def writer() -> None:
            fs.in_rm.wait()
            fs.pipe_file("/other", b"must survive the rm's rollback")
            fs.written.wait()

        join_all(in_thread(remove), in_thread(writer))
        assert store.read_bytes("/other") == b"must survive the rm's rollback"
        assert store.read_bytes("/victim") == b"stays"


def test_nested_transaction_joins_the_outer_one(fs: TxvfsFileSystem) -> None:
    store = fs.store
    with fs.transaction as outer:
        fs.pipe_file("/outer", b"o")
        with fs.transaction as inner:
            assert inner is outer
            fs.pipe_file("/inner", b"i")
        # Leaving the inner block commits nothing: the outer one is still open.
        assert fs._intrans
        assert not store.exists("/inner") and not store.exists("/outer")
        assert fs.cat("/inner") == b"i"
    assert not fs._intrans
    assert store.read_bytes("/outer") == b"o" and store.read_bytes("/inner") == b"i"


def test_a_failed_nested_block_rolls_back_the_outer_transaction(fs: TxvfsFileSystem) -> None:
    store = fs.store
    with pytest.raises(RuntimeError, match="rolled back"):
        with fs.transaction:
            fs.pipe_file("/outer", b"o")
            try:
                with fs.transaction:
                    fs.pipe_file("/inner", b"i")
                    raise KeyError("inner fails")
            except KeyError:
                pass  # caught inside the outer block: the outer must not commit half
            fs.pipe_file("/after", b"a")
    assert store.listdir("/") == []
    assert not fs._intrans
    with fs.transaction:  # the instance is usable again
        fs.pipe_file("/next", b"n")
    assert store.read_bytes("/next") == b"n"


def test_start_and_end_transaction_without_with(fs: TxvfsFileSystem) -> None:
    fs.start_transaction()
    fs.pipe_file("/a", b"1")
    assert fs._intrans and not fs.store.exists("/a")
    fs.end_transaction()
    assert not fs._intrans and fs.store.read_bytes("/a") == b"1"


def test_files_left_open_in_a_transaction_are_committed(fs: TxvfsFileSystem) -> None:
    with fs.transaction:
        t = fs.open("/t.txt", "w")
        t.write("text, never flushed")
        b = fs.open("/b.bin", "wb")
        b.write(b"bytes, never flushed")
    assert fs.store.read_text("/t.txt") == "text, never flushed"
    assert fs.store.read_bytes("/b.bin") == b"bytes, never flushed"
    t.close()
    b.close()


def test_instance_cache_is_keyed_by_the_store(tmp_path: pathlib.Path) -> None:
    with txvfs.open("memory:") as s1, txvfs.open("memory:") as s2:
        fs1, fs2 = TxvfsFileSystem(store=s1), TxvfsFileSystem(store=s2)
        assert fs1 is not fs2 and fs1.store is s1 and fs2.store is s2
        assert TxvfsFileSystem(store=s1) is fs1
        fs1.pipe_file("/only-in-1", b"1")
        assert not s2.exists("/only-in-1")
    # One RocksDB store spelled four ways is one instance.
    p = tmp_path / "store"
    spellings = [
        os.fspath(p),
        "rocksdb:" + os.fspath(p),
        os.fspath(p) + "/",
        os.fspath(tmp_path / "x" / ".." / "store"),
    ]
    (tmp_path / "x").mkdir()
    instances = [fsspec.filesystem("txvfs", store=u) for u in spellings]
    assert all(i is instances[0] for i in instances), instances
    # ... from any thread (the instance is safe to share: transactions are per thread).
    other: List[Any] = []
    join_all(in_thread(lambda: other.append(fsspec.filesystem("txvfs", store=spellings[1]))))
    assert other[0] is instances[0]
    # Different options are a different instance.
    assert fsspec.filesystem("txvfs", store=spellings[0], auto_mkdir=False) is not instances[0]
    TxvfsFileSystem.clear_instance_cache()
    assert fsspec.filesystem("txvfs", store=spellings[0]) is not instances[0]
    TxvfsFileSystem.clear_instance_cache()
