"""Transactions from Python: commit on success, rollback on exception, isolation, conflicts
between threads, and store.transact's retries."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any, List

import pytest
import txvfs


def test_commit_on_success_makes_everything_visible_at_once(any_store: txvfs.Store) -> None:
    s = any_store
    with s.transaction() as tx:
        assert isinstance(tx, txvfs.Transaction) and tx.active
        tx.mkdir("/docs")
        with tx.open("/docs/a.txt", "w") as f:
            f.write("part one")
        tx.write_bytes("/docs/b.txt", b"part two")
        tx.rename("/docs/b.txt", "/docs/c.txt")
        assert tx.read_text("/docs/a.txt") == "part one"  # reads see own writes
        assert tx.listdir("/docs") == ["a.txt", "c.txt"]
        assert not s.exists("/docs")  # others see nothing yet
    assert not tx.active
    assert s.listdir("/docs") == ["a.txt", "c.txt"]
    assert s.read_bytes("/docs/c.txt") == b"part two"


def test_rollback_on_exception(any_store: txvfs.Store) -> None:
    s = any_store
    s.write_bytes("/keep", b"old")
    with pytest.raises(RuntimeError):
        with s.transaction() as tx:
            tx.write_bytes("/keep", b"new")
            tx.write_bytes("/other", b"x")
            raise RuntimeError("boom")
    assert not tx.active
    assert s.read_bytes("/keep") == b"old" and not s.exists("/other")


def test_explicit_commit_rollback_and_finished_transaction(store: txvfs.Store) -> None:
    tx = store.begin()
    tx.write_bytes("/a", b"1")
    tx.rollback()
    tx.rollback()  # idempotent
    assert not store.exists("/a")
    with pytest.raises(ValueError):  # like a closed io object
        tx.write_bytes("/a", b"1")
    with pytest.raises(ValueError):
        tx.commit()
    tx2 = store.transaction()
    tx2.write_bytes("/b", b"2")
    tx2.commit()
    assert store.read_bytes("/b") == b"2"
    with tx2:  # already committed: leaving the block does nothing
        pass
    assert "finished" in repr(tx2) and "Store" in repr(store)


def test_files_opened_in_a_transaction_belong_to_it(store: txvfs.Store) -> None:
    with store.transaction() as tx:
        f = tx.open("/f", "wb")
        f.write(b"data")
        f.flush()
        assert store.exists("/f") is False
    assert store.read_bytes("/f") == b"data"
    # The transaction has ended: its file handle fails (EBADF), like the core says.
    with pytest.raises(OSError) as e:
        f.write(b"more")
        f.flush()
    assert e.value.errno == errno.EBADF
    try:
        f.close()
    except OSError:
        pass


def test_conflict_between_two_threads_raises_transaction_conflict(any_store: txvfs.Store) -> None:
    s = any_store
    s.write_bytes("/counter", b"0")
    t1, t2 = s.transaction(), s.transaction()
    both_read = threading.Barrier(2)
    errors: List[BaseException] = []

    def bump(tx: txvfs.Transaction) -> None:
        try:
            n = int(tx.read_bytes("/counter"))
            both_read.wait()
            tx.write_bytes("/counter", str(n + 1).encode())
            both_read.wait()
            tx.commit()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=bump, args=(t,)) for t in (t1, t2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 1
    e = errors[0]
    assert isinstance(e, txvfs.TransactionConflict) and isinstance(e, txvfs.TxvfsError)
    assert isinstance(e, OSError) and e.errno == txvfs._txvfs.CONFLICT
    assert s.read_bytes("/counter") == b"1"


def test_transact_retries_conflicts_from_many_threads(any_store: txvfs.Store) -> None:
    s = any_store
    s.write_bytes("/counter", b"0")
    calls = [0]

    def bump(tx: txvfs.Transaction) -> int:
        calls[0] += 1
        n = int(tx.read_bytes("/counter")) + 1
        tx.write_bytes("/counter", str(n).encode())
        return n

    def worker() -> None:
        for _ in range(25):
            s.transact(bump)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.read_bytes("/counter") == b"100"  # no update lost
    assert calls[0] >= 100


def test_transact_gives_up_after_retries_and_propagates_other_errors(store: txvfs.Store) -> None:
    store.write_bytes("/x", b"0")

    def always_conflicts(tx: txvfs.Transaction) -> None:
        tx.read_bytes("/x")
        store.write_bytes("/x", b"changed")  # a concurrent writer, every time
        tx.write_bytes("/x", b"mine")

    with pytest.raises(txvfs.TransactionConflict):
        store.transact(always_conflicts, retries=3)

    def fails(tx: txvfs.Transaction) -> None:
        tx.write_bytes("/y", b"1")
        tx.stat("/missing")

    with pytest.raises(FileNotFoundError):
        store.transact(fails)
    assert not store.exists("/y")
    assert store.transact(lambda tx: tx.listdir("/")) == ["x"]


def test_transact_retries_as_often_as_the_store_s_max_retries(tmp_path: Path) -> None:
    """`transact` without `retries` follows the store's `max_retries` option, as the core's
    and C's `transact` do (one retry policy)."""
    for max_retries in (0, 2):
        store = txvfs.Store(str(tmp_path / ("s%d" % max_retries)), max_retries=max_retries)
        store.write_bytes("/x", b"0")
        calls = 0

        def always_conflicts(tx: txvfs.Transaction) -> None:
            nonlocal calls
            calls += 1
            tx.read_bytes("/x")
            store.write_bytes("/x", b"changed %d" % calls)  # a concurrent writer, every time
            tx.write_bytes("/x", b"mine")

        with pytest.raises(txvfs.TransactionConflict):
            store.transact(always_conflicts)
        assert calls == max_retries + 1
        assert store.max_retries == max_retries
        store.close()


def test_transaction_is_serializable_no_write_skew(store: txvfs.Store) -> None:
    # Two doctors on call: each checks that the other is on call, then leaves.
    store.write_bytes("/alice", b"on")
    store.write_bytes("/bob", b"on")
    a, b = store.transaction(), store.transaction()
    if a.read_bytes("/bob") == b"on":
        a.write_bytes("/alice", b"off")
    if b.read_bytes("/alice") == b"on":
        b.write_bytes("/bob", b"off")
    a.commit()
    with pytest.raises(txvfs.TransactionConflict):
        b.commit()
    assert (store.read_bytes("/alice"), store.read_bytes("/bob")) == (b"off", b"on")


def test_transaction_too_large_is_reported() -> None:
    with txvfs.open("memory:?limits=foundationdb") as s:
        # File data beyond the 10 MB limit is written ahead as chunks: this commits.
        with s.transaction() as tx:
            for i in range(20):
                tx.write_bytes("/f%d" % i, b"x" * (1 << 20))
        assert s.stat("/f19").st_size == 1 << 20
        # Metadata is not written ahead: 12 MB of extended attributes is too large.
        s.write_bytes("/meta", b"")
        with pytest.raises(txvfs.TransactionTooLarge) as e:
            with s.transaction() as tx:
                for i in range(200):
                    tx.setxattr("/meta", "user.k%d" % i, b"v" * 60_000)
        assert e.value.errno == txvfs._txvfs.TOO_LARGE
        assert s.listxattr("/meta") == []
    assert issubclass(txvfs.TransactionTooLarge, txvfs.TxvfsError)


def test_same_api_on_transaction(store: txvfs.Store) -> None:
    with store.transaction() as tx:
        tx.makedirs("/a/b")
        tx.write_text("/a/b/t", "text")
        tx.symlink("/a/b/t", "/l")
        tx.setxattr("/a/b/t", "user.k", b"v")
        tx.chmod("/a/b/t", 0o600)
        assert [p for p, _, _ in tx.walk("/")] == ["/", "/a", "/a/b"]
        assert [e.name for e in tx.scandir("/a/b")] == ["t"]
        assert tx.readlink("/l") == "/a/b/t" and tx.getxattr("/l", "user.k") == b"v"
        assert tx.statvfs().f_namemax == 255
    assert store.stat("/a/b/t").st_mode & 0o777 == 0o600


# Issue 20, item 12: files opened on a transaction and still holding buffered data when the
# transaction commits. The commit flushes them first; it never commits without their data.
UNFLUSHED_MODES = [
    ("w", "x" * 10, "xxxxxxxxxx"),  # io.TextIOWrapper over io.BufferedWriter
    ("wb", b"y" * 10, b"yyyyyyyyyy"),  # io.BufferedWriter
    ("r+b", b"z" * 3, b"zzzld"),  # io.BufferedRandom over an existing file
    ("a", "!", "world!"),  # text, appending
]


@pytest.mark.parametrize("mode,data,expected", UNFLUSHED_MODES)
@pytest.mark.parametrize("ending", ["with", "commit", "transact"])
def test_unflushed_files_are_flushed_before_commit(
    any_store: txvfs.Store, mode: str, data: Any, expected: Any, ending: str
) -> None:
    s = any_store
    s.write_bytes("/r", b"world")
    files = []

    def body(tx: txvfs.Transaction) -> None:
        f = tx.open("/r", mode)
        f.write(data)  # stays in the io buffer: no flush, no close
        files.append(f)

    if ending == "with":
        with s.transaction() as tx:
            body(tx)
    elif ending == "commit":
        tx = s.begin()
        body(tx)
        tx.commit()
    else:
        s.transact(body)
    read = s.read_text if isinstance(expected, str) else s.read_bytes
    assert read("/r") == expected
    # The commit flushed the buffer: closing the file later writes nothing and raises nothing.
    files[0].close()
    assert read("/r") == expected


def test_several_unflushed_files_and_a_closed_one_commit_together(store: txvfs.Store) -> None:
    with store.transaction() as tx:
        a = tx.open("/a", "w")
        b = tx.open("/b", "wb", buffering=1 << 20)
        c = tx.open("/c", "w")
        a.write("alpha")
        b.write(b"beta" * 1000)
        c.write("gamma")
        c.close()
        r = tx.open("/c", "r")  # a reader is not flushed, and does not get in the way
        assert r.read() == "gamma"
    assert store.read_text("/a") == "alpha"
    assert store.read_bytes("/b") == b"beta" * 1000
    assert store.read_text("/c") == "gamma"
    a.close()
    b.close()
    r.close()


@pytest.mark.parametrize("ending", ["with", "commit"])
def test_a_failed_flush_fails_the_commit_and_commits_nothing(
    store: txvfs.Store, ending: str
) -> None:
    store.write_bytes("/before", b"old")
    tx = store.begin()
    tx.write_bytes("/before", b"new")
    f = tx.open("/big", "wb")
    f.seek(2**52 - 2)  # two bytes below txvfs's maximum file size
    f.write(b"too long")  # buffered; writing it at commit fails with EFBIG
    with pytest.raises(OSError) as e:
        if ending == "with":
            with tx:
                pass
        else:
            tx.commit()
    assert e.value.errno == errno.EFBIG
    assert not tx.active
    assert store.read_bytes("/before") == b"old"
    assert not store.exists("/big")
    with pytest.raises(OSError):
        f.close()  # the buffered bytes still cannot be written


def test_rollback_discards_unflushed_files(store: txvfs.Store) -> None:
    tx = store.begin()
    f = tx.open("/r", "wb")
    f.write(b"never")
    tx.rollback()
    assert not store.exists("/r")
    with pytest.raises(OSError) as e:
        f.close()  # its transaction is gone: the buffered bytes cannot be written
    assert e.value.errno == errno.EBADF
