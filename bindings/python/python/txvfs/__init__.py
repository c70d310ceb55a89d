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
import random
import time
import warnings
import weakref
from collections import deque
from typing import (
    TYPE_CHECKING,
    Deque,
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
    Handle,
    StatResult,
    StatVfsResult,
    TransactionConflict,
    TransactionTooLarge,
    TxvfsError,
)

__all__ = [
    "open",
    "Store",
    "Transaction",
    "RawFile",
    "DirEntry",
    "StatResult",
    "StatVfsResult",
    "TxvfsError",
    "TransactionConflict",
    "TransactionTooLarge",
    "flock",
    "lockf",
    "LOCK_SH",
    "LOCK_EX",
    "LOCK_NB",
    "LOCK_UN",
    "XATTR_CREATE",
    "XATTR_REPLACE",
]

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


def _closed() -> ValueError:
    return ValueError("I/O operation on closed file")


class RawFile(io.RawIOBase):
    """An unbuffered file of a store: ``io.RawIOBase`` over a native :class:`Handle`.

    :meth:`Store.open` wraps it in ``io.BufferedReader``/``BufferedWriter``/
    ``BufferedRandom`` (and ``io.TextIOWrapper`` in text mode), like the builtin ``open``
    wraps ``io.FileIO``. ``fileno()`` raises ``io.UnsupportedOperation``: the file lives in
    the store, not in the operating system.
    """

    def __init__(self, handle: Handle, name: Any, mode: str) -> None:
        """Wraps an open native handle; ``name`` and ``mode`` are reported as attributes."""
        super().__init__()
        self._handle = handle
        self.name = name
        self._mode = mode

    @property
    def mode(self) -> str:
        """The mode the file was opened with, as ``io.FileIO`` reports it (``"rb"``, ...)."""
        return self._mode

    @property
    def handle(self) -> Handle:
        """The native handle (for ``pread``/``pwrite``, locks, ``stat``)."""
        return self._handle

    def _check(self) -> Handle:
        if self.closed:
            raise _closed()
        return self._handle

    def readable(self) -> bool:
        """True if the file was opened for reading."""
        return self._check().readable()

    def writable(self) -> bool:
        """True if the file was opened for writing."""
        return self._check().writable()

    def seekable(self) -> bool:
        """Always True (after checking that the file is open)."""
        self._check()
        return True

    def _check_readable(self) -> Handle:
        h = self._check()
        if not h.readable():
            raise io.UnsupportedOperation("File not open for reading")
        return h

    def _check_writable(self) -> Handle:
        h = self._check()
        if not h.writable():
            raise io.UnsupportedOperation("File not open for writing")
        return h

    def readinto(self, buffer: Any) -> int:
        """Reads into a writable buffer; returns the number of bytes read (0 at the end)."""
        return self._check_readable().readinto(buffer)

    def read(self, size: Optional[int] = -1) -> bytes:
        """Reads up to ``size`` bytes, or everything to the end with ``-1``/``None``."""
        h = self._check_readable()
        return h.readall() if size is None or size < 0 else h.read(size)

    def readall(self) -> bytes:
        """Reads everything from the current position to the end of the file."""
        return self._check_readable().readall()

    def write(self, b: Any) -> int:
        """Writes all of ``b`` (any bytes-like object); returns its length."""
        h = self._check_writable()
        return h.write(b if type(b) is bytes else bytes(b))

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Moves the position (``whence``: SEEK_SET, SEEK_CUR, SEEK_END); returns it."""
        return self._check().seek(offset, whence)

    def tell(self) -> int:
        """The current position."""
        return self._check().tell()

    def truncate(self, size: Optional[int] = None) -> int:
        """Sets the file's size (default: the current position); returns the new size."""
        h = self._check_writable()
        if size is None:
            size = h.tell()
        h.truncate(size)
        return size

    def close(self) -> None:
        """Closes the file and releases its locks. Idempotent."""
        if not self.closed:
            try:
                self._handle.close()
            finally:
                super().close()

    def fsync(self) -> None:
        """Makes the file's committed writes durable (``os.fsync``)."""
        self._check().fsync()

    def stat(self) -> StatResult:
        """Attributes of the open file (``os.fstat``)."""
        return self._check().stat()


def _raw_of(f: Any) -> RawFile:
    """The RawFile under a text, buffered or raw file object."""
    obj = getattr(f, "buffer", f)
    obj = getattr(obj, "raw", obj)
    if not isinstance(obj, RawFile):
        raise TypeError("not a txvfs file: %r" % (f,))
    return obj


def flock(f: Any, operation: int) -> None:
    """``fcntl.flock`` for a txvfs file object: ``LOCK_SH``/``LOCK_EX``/``LOCK_UN``,
    optionally ``| LOCK_NB`` (a held lock then raises ``BlockingIOError``)."""
    _raw_of(f)._check().flock(operation)


def lockf(f: Any, cmd: int, len: int = 0, start: int = 0, whence: int = 0) -> None:
    """``fcntl.lockf`` for a txvfs file object: a byte-range lock on ``len`` bytes (0: to
    the end and beyond) from ``start``, relative to ``whence`` (SEEK_SET, SEEK_CUR, SEEK_END)."""
    h = _raw_of(f)._check()
    if whence == io.SEEK_CUR:
        start += h.tell()
    elif whence == io.SEEK_END:
        start += h.stat().st_size
    elif whence != io.SEEK_SET:
        raise ValueError("invalid whence")
    if start < 0:
        raise OSError(_errno.EINVAL, os.strerror(_errno.EINVAL))
    h.lockf(cmd, len, start)


def _parse_mode(mode: str) -> Tuple[int, str, bool]:
    """POSIX open flags, the raw mode string and text-ness of a builtin ``open`` mode."""
    if not isinstance(mode, str):
        raise TypeError("invalid mode: %r" % (mode,))
    modes = set(mode)
    if modes - set("axrwb+t") or len(mode) > len(modes):
        raise ValueError("invalid mode: %r" % mode)
    creating, reading, writing, appending = ("x" in modes, "r" in modes, "w" in modes, "a" in modes)
    updating, text, binary = "+" in modes, "t" in modes, "b" in modes
    if text and binary:
        raise ValueError("can't have text and binary mode at once")
    if creating + reading + writing + appending != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    if creating:
        flags, raw = os.O_CREAT | os.O_EXCL, "xb"
    elif reading:
        flags, raw = 0, "rb"
    elif writing:
        flags, raw = os.O_CREAT | os.O_TRUNC, "wb"
    else:
        flags, raw = os.O_CREAT | os.O_APPEND, "ab"
    if updating:
        flags |= os.O_RDWR
        raw = "rb+" if reading or writing else raw + "+"
    elif not reading:
        flags |= os.O_WRONLY
    return flags, raw, not binary


class DirEntry:
    """An entry of :meth:`Store.scandir`, like ``os.DirEntry``: the type comes with the
    listing; ``stat()`` is fetched once and cached."""

    __slots__ = ("name", "path", "_fs", "_ino", "_kind", "_stat", "_lstat")

    def __init__(self, fs: "_PathOps", top: Any, name: Any, ino: int, kind: str) -> None:
        """Builds an entry named ``name`` in directory ``top`` (internal)."""
        self.name = name
        sep: Any = b"/" if isinstance(name, bytes) else "/"
        self.path = top + name if top.endswith(sep) else top + sep + name
        self._fs = fs
        self._ino = ino
        self._kind = kind
        self._stat: Optional[StatResult] = None
        self._lstat: Optional[StatResult] = None

    def inode(self) -> int:
        """The entry's inode number."""
        return self._ino

    def is_symlink(self) -> bool:
        """True for a symbolic link."""
        return self._kind == "symlink"

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        """True for a directory (or a symlink to one, when following symlinks)."""
        if self._kind == "symlink" and follow_symlinks:
            return self._fs.isdir(self.path)
        return self._kind == "dir"

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        """True for a regular file (or a symlink to one, when following symlinks)."""
        if self._kind == "symlink" and follow_symlinks:
            return self._fs.isfile(self.path)
        return self._kind == "file"

    def stat(self, *, follow_symlinks: bool = True) -> StatResult:
        """The entry's attributes, cached after the first call."""
        if follow_symlinks and self._kind == "symlink":
            if self._stat is None:
                self._stat = self._fs.stat(self.path)
            return self._stat
        if self._lstat is None:
            self._lstat = self._fs.lstat(self.path)
        return self._lstat

    def __fspath__(self) -> Any:
        return self.path

    def __repr__(self) -> str:
        return "<txvfs.DirEntry %r>" % (self.name,)


class _ScandirIterator:
    """The iterator of :meth:`Store.scandir`: reads the directory in pages."""

    def __init__(self, fs: "_PathOps", path: Any, page: int = 1000) -> None:
        self._fs, self._path, self._page = fs, path, page
        self._after: Any = None
        self._buf: Deque[Tuple[Any, int, str]] = deque(fs.readdir(path, None, page))
        self._done = len(self._buf) < page

    def __iter__(self) -> "_ScandirIterator":
        return self

    def __next__(self) -> DirEntry:
        if not self._buf:
            if self._done or self._after is None:
                raise StopIteration
            self._buf = deque(self._fs.readdir(self._path, self._after, self._page))
            self._done = len(self._buf) < self._page
            if not self._buf:
                raise StopIteration
        name, ino, kind = self._buf.popleft()
        self._after = name
        return DirEntry(self._fs, self._path, name, ino, kind)

    def close(self) -> None:
        """Stops the iteration."""
        self._buf, self._done = deque(), True

    def __enter__(self) -> "_ScandirIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _PathOps:
    """The Python half of the API shared by :class:`Store` and :class:`Transaction`; the
    native half (stat, mkdir, rename, ...) comes from ``txvfs._txvfs.FileSystem``."""

    __slots__ = ()

    # Provided by the native base class; declared for type checkers.
    if TYPE_CHECKING:  # pragma: no cover
        def open_raw(self, path: Any, flags: int = 0, mode: int = 0o644, *, write_back: bool = False) -> Handle: ...
        def readdir(self, path: Any, after: Any = None, limit: int = 0) -> List[Tuple[Any, int, str]]: ...
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
    ) -> Any:
        """Opens a file of the store with the meaning of the builtin ``open``: returns
        ``io.TextIOWrapper`` in text mode and ``io.BufferedReader``/``BufferedWriter``/
        ``BufferedRandom`` in binary mode (the raw :class:`RawFile` with ``buffering=0``).

        ``file_mode`` gives the permission bits of a new file (no umask). Opened on a
        :class:`Transaction`, the file's reads and writes belong to the transaction (and
        what its buffers still hold is flushed into it when it commits); opened
        on a :class:`Store`, each write of the raw file commits by itself, or, with
        ``write_back=True``, sequential writes are buffered until flush/close.
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
        handle = self.open_raw(file, flags, file_mode, write_back=write_back)
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

    def read_text(self, path: PathArg, encoding: Optional[str] = None, errors: Optional[str] = None) -> str:
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

    def transact(self, fn: Callable[["Transaction"], T], retries: int = 100) -> T:
        """Runs ``fn(tx)`` in a transaction and commits it, running it again (with
        backoff) when it conflicts with another transaction, up to ``retries`` times.
        ``fn`` may run several times, so it must not have effects outside ``tx``. Every
        other exception rolls back and propagates."""
        attempt = 0
        while True:
            tx = Transaction(self)
            try:
                result = fn(tx)
                tx.commit()
                return result
            except TransactionConflict:
                tx.rollback()
                if attempt >= retries:
                    raise
                time.sleep(min(0.0005 * (2 ** attempt), 0.05) * random.random())
                attempt += 1
            except BaseException:
                tx.rollback()
                raise

    def __repr__(self) -> str:
        return "txvfs.Store(%r%s)" % (self.uri, ", closed" if self.closed else "")


class Transaction(_PathOps, _txvfs.Transaction):
    """An explicit transaction: every call on it (and on files opened through it) belongs
    to it; its reads see its own writes; others see nothing until :meth:`commit`, then
    everything at once. As a context manager it commits on success and rolls back on an
    exception. Files opened in it for writing and still open are flushed before it commits;
    once it has ended they fail (EBADF), except ``close()`` after everything was flushed."""

    def __init__(self, store: Store) -> None:
        """Begins a transaction on ``store`` (same as ``store.transaction()``)."""
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
                for ref in list(self._writers.values()):
                    f = ref()
                    if f is not None and not f.closed:
                        f.flush()
            except BaseException:
                self.rollback()
                raise
            self._writers.clear()
        super().commit()

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


def open(uri: PathArg, **options: Any) -> Store:
    """Opens (or creates) a store and returns a :class:`Store`.

    ``uri``: ``"memory:"``, ``"rocksdb:/path"`` or a plain path (RocksDB). Options:
    ``sync`` (make each commit durable before it returns; default True), ``block_size``
    and ``inline_limit`` (layout of a new store), ``read_only``, ``max_retries``, and
    ``uid``/``gid``/``groups`` to check POSIX permissions as that user.
    """
    return Store(uri, **options)
