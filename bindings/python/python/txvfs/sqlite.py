"""SQLite databases in a txvfs store, with rows and files committed together.

:func:`connect` opens a SQLite database kept in a store (through txvfs's SQLite VFS, which
this package registers with the SQLite library of Python's ``sqlite3`` module, so that the
VFS and the store's API are one copy of txvfs). Each SQLite
write transaction commits as one txvfs transaction; :meth:`Connection.transaction` and
:meth:`Connection.transact` add the store's files to it: what the block does to rows (through
the connection) and to files (through the :class:`txvfs.Transaction` it is given) commits in
one commit, or not at all, whatever process is killed or whatever power is cut::

    import txvfs, txvfs.sqlite

    store = txvfs.open("/tmp/photos")
    db = txvfs.sqlite.connect(store, "/index.db")
    db.execute("CREATE TABLE IF NOT EXISTS photos(name TEXT PRIMARY KEY)")

    def add(files):
        db.execute("INSERT INTO photos VALUES (?)", ("a.jpg",))
        files.write_bytes("/photos/a.jpg", b"...")

    db.transact(add)  # run again from the start if another transaction conflicts

No reader, in this process or another, through SQLite, the store's API, the CLI or a FUSE
mount, sees the row without the file or the file without the row.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, TypeVar

from . import Store, Transaction, TransactionConflict, _txvfs

__all__ = ["connect", "Connection"]

T = TypeVar("T")


def _register_vfs() -> None:
    """Registers the VFS ``txvfs`` (this package's copy of txvfs, whose transactions the
    store's API can join) with the SQLite library of Python's ``sqlite3`` module. Done at every
    :func:`connect`: SQLite then finds this copy's VFS first even if another copy (the SQLite
    extension ``libtxvfs_sqlite``, loaded by the program) registered its own since."""
    import _sqlite3

    _txvfs.register_sqlite(_sqlite3.__file__)


class Connection(sqlite3.Connection):
    """A :class:`sqlite3.Connection` to a database in a txvfs store (made by :func:`connect`),
    with :meth:`transaction` and :meth:`transact` for rows and files in one commit."""

    store: Store

    def files(self) -> Transaction:
        """The file transaction of the write transaction this connection is in (begun with
        ``BEGIN IMMEDIATE``): calls on it commit with the rows at ``COMMIT`` and are discarded
        by ``ROLLBACK``. It cannot commit or roll back itself. Close (or flush) the files you
        open through it before ``COMMIT``: bytes still in a file object's buffer are not part
        of the commit (:meth:`transaction` flushes them for you). Raises
        :class:`sqlite3.OperationalError` outside a write transaction."""
        token = self.execute("PRAGMA txvfs_files").fetchone()[0]
        return Transaction(self.store, joined=token)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """``with db.transaction() as files:``: begins a write transaction (``BEGIN
        IMMEDIATE``, which waits for other writers up to the connection's timeout) and yields
        its file transaction; commits rows and files together when the block ends normally,
        rolls both back when it raises. A conflict at the commit raises
        :class:`txvfs.TransactionConflict` (run the block again; :meth:`transact` does)."""
        if self.in_transaction:
            raise sqlite3.ProgrammingError(
                "a transaction is already open on this connection: commit or roll it back first"
            )
        self.execute("BEGIN IMMEDIATE")
        try:
            token = self.execute("PRAGMA txvfs_files").fetchone()[0]
            files = Transaction(self.store, joined=token)
            yield files
            # Bytes still buffered in files opened for writing belong to the unit.
            files._flush_writers()
        except BaseException:
            if self.in_transaction:
                self.rollback()
            raise
        try:
            self.commit()
        except sqlite3.Error as e:
            if self.in_transaction:
                self.rollback()
            failure = _txvfs.joined_commit_error(token)
            if failure is not None and failure[2]:
                raise TransactionConflict(failure[1]) from e
            raise

    def transact(self, fn: Callable[[Transaction], T], retries: Optional[int] = None) -> T:
        """Runs ``fn(files)`` in :meth:`transaction` and commits rows and files together,
        running it again from the start (with txvfs's backoff) when it conflicts with another
        transaction, up to ``retries`` times (default: the store's ``max_retries``). ``fn``
        may run several times: it must have no effects outside the connection and ``files``.
        Every other exception rolls both back and propagates."""
        limit = self.store.max_retries if retries is None else retries
        attempt = 0
        while True:
            try:
                with self.transaction() as files:
                    return fn(files)
            except TransactionConflict:
                if attempt >= limit:
                    raise
                _txvfs.backoff(attempt)
                attempt += 1


def connect(store: Store, path: str, **kwargs: Any) -> Connection:
    """Opens (creating it if needed) the SQLite database ``path`` (absolute, in the store) of
    ``store`` through txvfs's VFS; ``kwargs`` go to :func:`sqlite3.connect` (``timeout``,
    ``isolation_level``, ...). The store must be one other handles can reach (a RocksDB
    directory or an ``fdb:`` URI, not ``memory:``)."""
    if store.uri.startswith("memory:"):
        raise ValueError(
            "a memory: store cannot hold a SQLite database for txvfs.sqlite: the VFS opens the "
            "store by its URI (use a directory)"
        )
    if not path.startswith("/"):
        raise ValueError("the database path must be absolute in the store: %r" % path)
    _register_vfs()
    query = urllib.parse.urlencode({"vfs": "txvfs", "store": store.uri})
    uri = "file:%s?%s" % (urllib.parse.quote(path), query)
    conn = sqlite3.connect(uri, uri=True, factory=Connection, **kwargs)
    conn.store = store
    return conn
