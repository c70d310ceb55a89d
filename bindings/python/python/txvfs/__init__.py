"""txvfs: an embeddable, transactional virtual file system.

A POSIX-like file tree kept in a key-value store (RocksDB on local disk, or memory), where
every change is a transaction and several files can change together, all or nothing::

    import txvfs

    with txvfs.open("/tmp/my-store") as store:          # or "memory:"
        with store.transaction() as tx:                  # commit on success, rollback on error
            tx.makedirs("/docs", exist_ok=True)
            with tx.open("/docs/a.txt", "w") as f:
                f.write("part one")
            tx.write_bytes("/docs/b.txt", b"part two")
        print(store.read_text("/docs/a.txt"))

Files opened with :meth:`Store.open` are real :mod:`io` objects (``io.BufferedReader``,
``io.TextIOWrapper``, ...) over a native raw file, so everything that takes a file object
works with them. Errors are the builtin :class:`OSError` subclasses with ``errno`` set, plus
:class:`TransactionConflict` (retry) and :class:`TransactionTooLarge`. The GIL is released
around every call into the store; a store can be shared between threads.
"""

from __future__ import annotations

import errno as _errno
import io
import itertools
import os
import warnings
import weakref
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
)

from . import _txvfs
from ._txvfs import (
    FsckReport,
    Handle,
    Quota,
    StatResult,
    StatVfsResult,
    TransactionConflict,
    TransactionTooLarge,
    TxvfsError,
    fsck,
)

__all__ = [
    "open",
    "Store",
    "Transaction",
    "RawFile",
    "DirEntry",
    "StatResult",
    "StatVfsResult",
    "Quota",
    "TxvfsError",
    "TransactionConflict",
    "TransactionTooLarge",
    "fsck",
    "Watcher",
    "Change",
    "FsckReport",
    "clone",
    "flock",
    "lockf",
    "LOCK_SH",
    "LOCK_EX",
    "LOCK_NB",
    "LOCK_UN",
    "XATTR_CREATE",
    "XATTR_REPLACE",
]

from . import _watch
from ._dirs import DirEntry, _ScandirIterator
from ._files import RawFile, _parse_mode, flock, lockf
from ._watch import Change, Watcher

# The public classes keep the name users see (txvfs.RawFile, txvfs.DirEntry).
RawFile.__module__ = DirEntry.__module__ = __name__

__version__: str = _txvfs.__version__

#: Shared lock (``fcntl.LOCK_SH``).
LOCK_SH = 1
#: Exclusive lock (``fcntl.LOCK_EX``).
LOCK_EX = 2
#: Do not wait for a held lock: raise BlockingIOError (``fcntl.LOCK_NB``).
LOCK_NB = 4
#: Release a lock (``fcntl.LOCK_UN``).
LOCK_UN = 8
#: ``setxattr`` flag: fail with FileExistsError if the attribute exists.
XATTR_CREATE = 1
#: ``setxattr`` flag: fail with OSError(ENODATA) if the attribute does not exist.
XATTR_REPLACE = 2

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
T = TypeVar("T")


class _PathOps:
    """The Python half of the API shared by :class:`Store` and :class:`Transaction`; the
    native half (stat, mkdir, rename, ...) comes from ``txvfs._txvfs.FileSystem``."""

    __slots__ = ()

    # Provided by the native base class; declared for type checkers.
    if TYPE_CHECKING:  # pragma: no cover

        def open_raw(
            self,
            path: Any,
            flags: int = 0,
            mode: int = 0o644,
            *,
            write_back: bool = False,
            block_size: Optional[int] = None,
        ) -> Handle: ...
        def readdir(
            self, path: Any, after: Any = None, limit: int = 0
        ) -> List[Tuple[Any, int, str]]: ...
        def stat(self, path: Any, *, follow_symlinks: bool = True) -> StatResult: ...
        def lstat(self, path: Any) -> StatResult: ...
        def isdir(self, path: Any) -> bool: ...
        def isfile(self, path: Any) -> bool: ...
        def read_bytes(self, path: Any) -> bytes: ...
        def write_bytes(self, path: Any, data: bytes) -> int: ...
        def islink(self, path: Any) -> bool: ...

    def _buffer_size(self) -> int:
        return 65536

    def open(
        self,
        file: PathArg,
        mode: str = "r",
        buffering: int = -1,
        encoding: Optional[str] = None,
        errors: Optional[str] = None,
        newline: Optional[str] = None,
        *,
        file_mode: int = 0o644,
        write_back: bool = False,
        block_size: Optional[int] = None,
    ) -> Any:
        """Opens a file of the store with the meaning of the builtin ``open``: returns
        ``io.TextIOWrapper`` in text mode and ``io.BufferedReader``/``BufferedWriter``/
        ``BufferedRandom`` in binary mode (the raw :class:`RawFile` with ``buffering=0``).

        ``file_mode`` gives the permission bits of a new file (no umask). Opened on a
        :class:`Transaction`, the file's reads and writes belong to the transaction (and
        what its buffers still hold is flushed into it when it commits); opened
        on a :class:`Store`, each write of the raw file commits by itself, or, with
        ``write_back=True``, sequential writes are buffered until flush/close.
        ``block_size`` gives a file opened for writing that has no blocks yet its own block
        size (a power of two from 512 to 65536), for small random writes.
        """
        flags, raw_mode, text = _parse_mode(mode)
        if not isinstance(buffering, int):
            raise TypeError("an integer is required")
        if not text:
            if encoding is not None:
                raise ValueError("binary mode doesn't take an encoding argument")
            if errors is not None:
                raise ValueError("binary mode doesn't take an errors argument")
            if newline is not None:
                raise ValueError("binary mode doesn't take a newline argument")
            if buffering == 1:
                warnings.warn(
                    "line buffering (buffering=1) isn't supported in binary mode, "
                    "the default buffer size will be used",
                    RuntimeWarning,
                    2,
                )
        elif buffering == 0:
            raise ValueError("can't have unbuffered text I/O")
        handle = self.open_raw(file, flags, file_mode, write_back=write_back, block_size=block_size)
        raw = RawFile(handle, file, raw_mode)
        try:
            f = self._wrap(raw, raw_mode, text, buffering, encoding, errors, newline, mode)
        except BaseException:
            raw.close()
            raise
        if handle.writable():
            self._opened_for_writing(f)
        return f

    def _wrap(
        self,
        raw: RawFile,
        raw_mode: str,
        text: bool,
        buffering: int,
        encoding: Optional[str],
        errors: Optional[str],
        newline: Optional[str],
        mode: str,
    ) -> Any:
        """The ``io`` object of :meth:`open` over ``raw``."""
        handle = raw.handle
        if handle.isdir():
            raise IsADirectoryError(_errno.EISDIR, os.strerror(_errno.EISDIR), raw.name)
        if "a" in raw_mode:
            handle.seek(0, io.SEEK_END)
        line_buffering = buffering == 1
        if buffering < 0 or buffering == 1:
            buffering = self._buffer_size()
        if buffering == 0:
            return raw
        buffer: Any
        if "+" in raw_mode:
            buffer = io.BufferedRandom(raw, buffering)
        elif raw_mode == "rb":
            buffer = io.BufferedReader(raw, buffering)
        else:
            buffer = io.BufferedWriter(raw, buffering)
        if not text:
            return buffer
        wrapper = io.TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
        wrapper.mode = mode  # type: ignore[misc]
        return wrapper

    def _opened_for_writing(self, f: Any) -> None:
        """Called with each file :meth:`open` returns for writing (a transaction tracks them)."""

    def read_text(
        self, path: PathArg, encoding: Optional[str] = None, errors: Optional[str] = None
    ) -> str:
        """The contents of a text file, decoded like ``pathlib.Path.read_text``."""
        with self.open(path, "r", encoding=encoding, errors=errors) as f:
            return f.read()  # type: ignore[no-any-return]

    def write_text(
        self,
        path: PathArg,
        data: str,
        encoding: Optional[str] = None,
        errors: Optional[str] = None,
        newline: Optional[str] = None,
    ) -> int:
        """Creates or replaces a text file in one atomic write; returns the number of
        characters, like ``pathlib.Path.write_text``."""
        if not isinstance(data, str):
            raise TypeError("data must be str, not %s" % type(data).__name__)
        buf = io.BytesIO()
        with io.TextIOWrapper(buf, encoding, errors, newline, write_through=True) as w:
            w.write(data)
            w.flush()
            self.write_bytes(path, buf.getvalue())
        return len(data)

    def scandir(self, path: PathArg = "/") -> _ScandirIterator:
        """Iterates over a directory's entries as :class:`DirEntry` objects (like
        ``os.scandir``; also a context manager). The listing is read in pages."""
        p = os.fspath(path)
        return _ScandirIterator(self, p)

    def walk(
        self,
        top: PathArg = "/",
        topdown: bool = True,
        onerror: Optional[Callable[[OSError], Any]] = None,
        followlinks: bool = False,
    ) -> Iterator[Tuple[Any, List[Any], List[Any]]]:
        """Walks the tree like ``os.walk``: yields ``(dirpath, dirnames, filenames)``; with
        ``topdown`` the caller may prune ``dirnames`` in place."""
        top = os.fspath(top)
        try:
            it = self.scandir(top)
        except OSError as e:
            if onerror is not None:
                onerror(e)
            return
        dirs: List[Any] = []
        files: List[Any] = []
        walk_into: List[Any] = []
        with it:
            for entry in it:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                (dirs if is_dir else files).append(entry.name)
                if is_dir and not topdown and (followlinks or not entry.is_symlink()):
                    walk_into.append(entry.path)
        if topdown:
            yield top, dirs, files
            sep: Any = b"/" if isinstance(top, bytes) else "/"
            for d in dirs:
                path = top + d if top.endswith(sep) else top + sep + d
                if followlinks or not self.islink(path):
                    yield from self.walk(path, topdown, onerror, followlinks)
        else:
            for path in walk_into:
                yield from self.walk(path, topdown, onerror, followlinks)
            yield top, dirs, files


class Store(_PathOps, _txvfs.Store):
    """An open store (a context manager; ``close()`` when done). Every call is a
    transaction by itself, like a POSIX call: atomic and visible at once. Use
    :meth:`transaction` or :meth:`transact` to change several files together.

    Open one with :func:`txvfs.open`. The native base class provides the os-like calls
    (``stat``, ``listdir``, ``mkdir``, ``rename``, ``getxattr``, ...); see ``_txvfs.pyi``.
    """

    def __init__(self, uri: PathArg, **options: Any) -> None:
        """Opens (or creates) the store at ``uri`` with ``options`` (see :func:`txvfs.open`;
        the native constructor does the opening). Remembers both, so the store pickles."""
        self._pickle_uri = _portable_uri(uri)
        self._options = dict(options)

    def __reduce__(self) -> Tuple[Any, ...]:
        """Pickles by URI and options (a RocksDB path made absolute), so a worker process
        opens the same store: ``multiprocessing``, ``concurrent.futures``, Dask. A RocksDB
        store has one owner process at a time, so the worker can open it once this process
        has closed it. A ``memory:`` store lives in this process only and refuses to pickle."""
        return (_unpickle_store, self._reopen_args())

    def _reopen_args(self) -> Tuple[str, Dict[str, Any]]:
        """``(uri, options)`` that open this store from any process (see ``__reduce__``)."""
        state = self.__dict__
        uri = state["_pickle_uri"] if "_pickle_uri" in state else _portable_uri(self.uri)
        if uri is None:
            raise TypeError(
                "cannot pickle a %r store: it lives in this process's memory only "
                "(use a RocksDB path or an fdb: URI to share a store with other processes)"
                % self.uri
            )
        return uri, dict(state.get("_options", {}))

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _buffer_size(self) -> int:
        return max(io.DEFAULT_BUFFER_SIZE, self.block_size)

    def transaction(self) -> "Transaction":
        """Begins an explicit transaction. Use it as a context manager: it commits when
        the block ends normally and rolls back when it raises."""
        return Transaction(self)

    def begin(self) -> "Transaction":
        """Begins an explicit transaction; call ``commit()`` or ``rollback()`` on it."""
        return Transaction(self)

    def transact(self, fn: Callable[["Transaction"], T], retries: Optional[int] = None) -> T:
        """Runs ``fn(tx)`` in a transaction and commits it, running it again (with the
        core's backoff, as ``Store::transact`` does) when it conflicts with another
        transaction, up to ``retries`` times (default: the store's ``max_retries`` option).
        ``fn`` may run several times, so it must not have effects outside ``tx``. Every
        other exception rolls back and propagates."""
        limit = self.max_retries if retries is None else retries
        attempt = 0
        while True:
            tx = Transaction(self)
            try:
                result = fn(tx)
                tx.commit()
                return result
            except TransactionConflict:
                tx.rollback()
                if attempt >= limit:
                    raise
                _txvfs.backoff(attempt)
                attempt += 1
            except BaseException:
                tx.rollback()
                raise

    def watch(
        self,
        prefix: Any = None,
        kinds: Optional[List[str]] = None,
        since: Optional[str] = None,
    ) -> Watcher:
        """Follows the store's change feed (turn it on first: ``set_change_feed(True)``):
        every change committed after ``since`` (a cursor string; default: from now), at or
        below ``prefix`` (a path or a list of them), of the ``kinds`` given (``"created"``,
        ``"written"``, ``"removed"``, ``"renamed"``, ``"attrs"``, ``"xattrs"``,
        ``"linked"``). Returns a :class:`Watcher` (iterator, async iterator, ``wait``)."""
        return _watch.watch(self, prefix, kinds, since)

    def snapshot(self) -> "Store":
        """A read-only view of the whole tree as it is now (later commits do not change it),
        as a :class:`Store` whose changes raise ``OSError(EROFS)``. Cheap: no data is
        copied. It lives until it is closed. For one that survives reopening, see
        :meth:`create_snapshot` (RocksDB)."""
        return type(self)(self.uri, snapshot_of=self)

    def __repr__(self) -> str:
        return "txvfs.Store(%r%s)" % (self.uri, ", closed" if self.closed else "")


class Transaction(_PathOps, _txvfs.Transaction):
    """An explicit transaction: every call on it (and on files opened through it) belongs
    to it; its reads see its own writes; others see nothing until :meth:`commit`, then
    everything at once. As a context manager it commits on success and rolls back on an
    exception. Files opened in it for writing and still open are flushed before it commits;
    once it has ended they fail (EBADF), except ``close()`` after everything was flushed."""

    def __init__(self, store: Store, joined: Optional[str] = None) -> None:
        """Begins a transaction on ``store`` (same as ``store.transaction()``); with
        ``joined``, joins the file transaction of a SQLite transaction instead (see
        :mod:`txvfs.sqlite`, which does this)."""
        self.store = store
        # The writable files opened on this transaction, in opening order, by weak reference
        # (a file dropped by its caller closes, and flushes, by itself).
        self._writers: Dict[int, "weakref.ref[Any]"] = {}
        self._writer_ids = itertools.count()

    def _opened_for_writing(self, f: Any) -> None:
        n = next(self._writer_ids)  # atomic: files may be opened from several threads
        writers = self._writers
        writers[n] = weakref.ref(f, lambda _ref: writers.pop(n, None))

    def commit(self) -> None:
        """Flushes the files opened on the transaction for writing that are still open (their
        buffered bytes belong to it), then commits: all changes become visible at once (and
        durable with ``sync``), or none do. If a flush fails, nothing is committed: the
        transaction is rolled back and the flush's error raised. Raises
        ``TransactionConflict`` when another transaction changed what this one read."""
        if self.active:
            try:
                self._flush_writers()
            except BaseException:
                self.rollback()
                raise
        super().commit()

    def _flush_writers(self) -> None:
        """Flushes the files opened on the transaction for writing that are still open (their
        buffered bytes belong to it); :mod:`txvfs.sqlite` calls it before ``COMMIT``."""
        for ref in list(self._writers.values()):
            f = ref()
            if f is not None and not f.closed:
                f.flush()
        self._writers.clear()

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            if self.active:
                self.commit()
        else:
            self.rollback()

    def _buffer_size(self) -> int:
        return max(io.DEFAULT_BUFFER_SIZE, self.store.block_size)

    def __repr__(self) -> str:
        return "txvfs.Transaction(%r%s)" % (self.store.uri, "" if self.active else ", finished")


def _portable_uri(uri: PathArg) -> Optional[str]:
    """The URI that names the same store from any process and working directory (a RocksDB
    path made absolute), or None for a ``memory:`` store, which no other process can see."""
    u = os.fspath(uri)
    s = os.fsdecode(u) if isinstance(u, bytes) else u
    if s.startswith("memory:"):
        return None
    scheme = s.split(":", 1)[0] if ":" in s else ""
    if scheme.isalpha() and scheme != "rocksdb":  # fdb:, pack:, ... name the same store anywhere
        return s
    if s.startswith("rocksdb:"):
        return "rocksdb:" + os.path.abspath(s[len("rocksdb:") :])
    return os.path.abspath(s)


def _unpickle_store(uri: str, options: Dict[str, Any]) -> Store:
    """Reopens a pickled :class:`Store` (see ``Store.__reduce__``)."""
    return Store(uri, **options)


def clone(lower: str, upper: str, **options: Any) -> Store:
    """Makes ``upper`` (a new, empty store) a writable clone of the read-only store ``lower``
    (a named snapshot's URI, as :meth:`Store.create_snapshot` returns) and opens it with
    ``options`` (as :func:`open`). Reads fall through to ``lower``; changes stay in the
    clone; ``lower`` is never modified. Later, ``txvfs.open(upper)`` opens the clone."""
    _txvfs.create_clone(lower, upper)
    return Store(upper, **options)


def open(uri: PathArg, **options: Any) -> Store:
    """Opens (or creates) a store and returns a :class:`Store`.

    ``uri``: ``"memory:"``, ``"rocksdb:/path"`` or a plain path (RocksDB). Options:
    ``sync`` (make each commit durable before it returns; default True), ``block_size``
    and ``inline_limit`` (layout of a new store), ``read_only``, ``max_retries``, and
    ``uid``/``gid``/``groups`` to check POSIX permissions as that user.
    """
    return Store(uri, **options)
