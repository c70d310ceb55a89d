"""fsspec implementation for txvfs: ``TxvfsFileSystem``, protocol ``"txvfs"``.

::

    import fsspec
    fs = fsspec.filesystem("txvfs", store="/path/to/store")      # or store="memory:"
    with fs.transaction:                    # one real txvfs transaction: all or nothing
        fs.pipe_file("/data/a.csv", b"x,y\\n1,2\\n")
        fs.mv("/data/old.csv", "/data/older.csv")
    with fsspec.open("txvfs:///data/a.csv", "rt", store="/path/to/store") as f:
        print(f.read())

The package registers the protocol through the ``fsspec.specs`` entry point; importing this
module registers it too (for uses where the package is not installed).

Threads and nesting: ``fs.transaction`` belongs to the thread (and ``contextvars`` context,
so an asyncio task) that entered it; other threads using the same instance are not in it
and their calls commit by themselves. A nested ``with fs.transaction`` joins the outer one:
nothing commits until the outermost block ends, and if an inner block ends with an
exception, the whole transaction rolls back (at the outer exit, which then raises
``RuntimeError`` if it would otherwise have committed). Instances are cached per store: the
same :class:`txvfs.Store` object, or one store path however spelled (``/p``, ``rocksdb:/p``,
``/p/``), with the same options, is one instance, from any thread.
"""

from __future__ import annotations

import contextvars
import datetime
import os
import stat as _stat
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple, Union

import fsspec
from fsspec.config import apply_config
from fsspec.spec import AbstractFileSystem, _Cached, make_instance
from fsspec.transaction import Transaction as _FsspecTransaction
from fsspec.utils import tokenize

from . import Store, Transaction
from . import open as _open_store

__all__ = ["TxvfsFileSystem"]


class TxvfsTransaction(_FsspecTransaction):  # type: ignore[misc]
    """``fs.transaction`` of :class:`TxvfsFileSystem`: one txvfs transaction. Every call on
    the file system inside the ``with`` block, in the thread (context) that entered it,
    belongs to it; it commits when the block ends normally (raising
    ``txvfs.TransactionConflict`` if another writer got in the way) and rolls back on an
    exception. A nested ``with fs.transaction`` joins it (see the module's documentation).
    Nothing is deferred to temporary files."""

    def __init__(self, fs: "TxvfsFileSystem", **kwargs: Any) -> None:
        """A transaction of ``fs``, begun by :meth:`start` (or ``with``)."""
        super().__init__(fs, **kwargs)
        self.tx: Optional[Transaction] = None
        self._depth = 0  # open ``with`` blocks (or start() calls) on it
        self._inner_failed = False
        self._token: Optional["contextvars.Token[Optional[TxvfsTransaction]]"] = None

    def __enter__(self) -> "TxvfsTransaction":
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.complete(commit=exc_type is None)

    def start(self) -> None:
        """Begins the txvfs transaction and makes it this context's; a second start (a
        nested block) joins it."""
        if self._depth:
            self._depth += 1
            return
        fs: TxvfsFileSystem = self.fs
        if fs._current.get() is not None:
            raise RuntimeError("a transaction of this file system is already open in this thread")
        self.files: Deque[Any] = deque()
        self._inner_failed = False
        self.tx = fs.store.transaction()
        self._token = fs._current.set(self)
        self._depth = 1

    def complete(self, commit: bool = True) -> None:
        """Ends one block: an inner one only records whether it failed; the outermost
        closes the files opened in the transaction, then commits or rolls back."""
        if self._depth > 1:
            self._depth -= 1
            if not commit:
                self._inner_failed = True
            return
        if self._depth == 0:
            return
        self._depth = 0
        fs: TxvfsFileSystem = self.fs
        tx, self.tx = self.tx, None
        try:
            assert self._token is not None
            fs._current.reset(self._token)
        except ValueError:  # ended in another context than it began in
            fs._current.set(None)
        self._token = None
        try:
            while self.files:
                f = self.files.popleft()
                if commit:
                    f.close()
            if tx is not None:
                if commit and self._inner_failed:
                    tx.rollback()
                    raise RuntimeError(
                        "a nested fs.transaction block raised: the whole transaction was rolled back"
                    )
                if commit:
                    tx.commit()
                else:
                    tx.rollback()
        finally:
            if tx is not None and tx.active:
                tx.rollback()
            self.files.clear()


def _has_magic(path: str) -> bool:
    return any(c in path for c in "*?[")


def _epoch(ns: int) -> float:
    return ns / 1e9


def _store_identity(store: Any, store_options: Optional[Dict[str, Any]]) -> Tuple[Any, ...]:
    """What names one store for the instance cache: a :class:`txvfs.Store` object by
    identity; a RocksDB URI or path, or a pack image, by its real path; other URIs (``memory:...``) as given."""
    if isinstance(store, Store):
        return ("object", id(store))
    options = tuple(sorted((store_options or {}).items()))
    uri = "memory:" if store is None else os.fspath(store)
    if isinstance(uri, bytes):
        uri = os.fsdecode(uri)
    if uri.startswith(("memory:", "fdb:")):
        return ("uri", uri, options)
    if uri.startswith("pack:"):
        return ("pack", os.path.realpath(uri[len("pack:") :]), options)
    path = uri[len("rocksdb:") :] if uri.startswith("rocksdb:") else uri  # as the core reads it
    return ("rocksdb", os.path.realpath(path), options)


class _CachedByStore(_Cached):  # type: ignore[misc]
    """fsspec's instance cache, keyed by the store (:func:`_store_identity`) and the other
    arguments instead of their ``str()`` and the calling thread: two stores never share an
    instance, one store spelled two ways does, and so do threads (an instance's transactions
    are per thread). ``clear_instance_cache()`` and the reset after ``fork`` still apply."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        kwargs = apply_config(cls, kwargs)
        if not cls.cachable or kwargs.get("skip_instance_cache"):
            return super().__call__(*args, **kwargs)
        rest = dict(kwargs)
        store = args[0] if args else rest.pop("store", None)
        options = args[1] if len(args) > 1 else rest.pop("store_options", None)
        key = "txvfs-store-" + tokenize(
            cls, os.getpid(), _store_identity(store, options), args[2:], rest
        )
        with cls._instantiation_lock:
            if os.getpid() != getattr(cls, "_pid"):  # noqa: B009 (set by fsspec at run time; mypy cannot see it)
                cls._cache.clear()
                cls._pid = os.getpid()
            inst = cls._cache.get(key)
            if inst is None:
                inst = super().__call__(*args, skip_instance_cache=True, **kwargs)
                inst._fs_token_ = key
                cls._cache[key] = inst
            cls._latest = key
            return inst


class TxvfsFileSystem(AbstractFileSystem, metaclass=_CachedByStore):  # type: ignore[misc]
    """An fsspec file system over a txvfs store.

    ``store``: a :class:`txvfs.Store` or a store URI (``"memory:"``, ``"rocksdb:/path"`` or a
    path); ``store_options`` are passed to :func:`txvfs.open` with a URI. Paths are
    absolute within the store (``txvfs:///a/b`` and ``/a/b`` name the same file).
    ``fs.transaction`` is one atomic txvfs transaction (see :class:`TxvfsTransaction`).
    """

    protocol = "txvfs"
    root_marker = "/"
    transaction_type = TxvfsTransaction
    # Instances are cached per store and options (see _CachedByStore).
    cachable = True

    def __init__(
        self,
        store: Union[Store, str, None] = None,
        store_options: Optional[Dict[str, Any]] = None,
        auto_mkdir: bool = True,
        **kwargs: Any,
    ) -> None:
        """Opens (or adopts) ``store``; default: a new in-memory store. With ``auto_mkdir``
        (the default, as on object stores) writing a file creates its parent directories."""
        super().__init__(**kwargs)
        self.auto_mkdir = auto_mkdir
        if store is None:
            store = "memory:"
        self.store: Store = (
            store if isinstance(store, Store) else _open_store(store, **(store_options or {}))
        )
        # The transaction of the running thread (context); see TxvfsTransaction.
        self._current: "contextvars.ContextVar[Optional[TxvfsTransaction]]" = (
            contextvars.ContextVar("txvfs_fsspec_transaction", default=None)
        )

    def __reduce__(self) -> Any:
        """Pickles by the store's URI (a RocksDB path made absolute) and options, however
        the store was given (URI or :class:`txvfs.Store`), so workers can use it; unpickled
        in the same process, it is the same cached instance. A file system over a
        ``memory:`` store refuses: another process would get a new, empty store."""
        try:
            uri, options = self.store._reopen_args()
        except TypeError as e:
            raise TypeError("cannot pickle this txvfs file system: %s" % e) from None
        kwargs = {
            k: v for k, v in self.storage_options.items() if k not in ("store", "store_options")
        }
        args = (uri, options) + tuple(self.storage_args[2:])
        return make_instance, (type(self), args, kwargs)

    @property
    def fsid(self) -> str:
        """A name of the store, stable for its life."""
        return "txvfs:" + self.store.uri

    @property
    def _intrans(self) -> bool:
        """True while this thread (context) is in ``fs.transaction``."""
        return self._current.get() is not None

    @_intrans.setter
    def _intrans(self, value: bool) -> None:
        pass  # fsspec sets it; here it follows the context's transaction

    @property
    def transaction(self) -> TxvfsTransaction:
        """This thread's (context's) open transaction, or a new one to enter with ``with``."""
        current = self._current.get()
        return current if current is not None else TxvfsTransaction(self)

    def start_transaction(self) -> TxvfsTransaction:
        """Begins (or, when one is open in this context, joins) a transaction without
        ``with``; end it with :meth:`end_transaction`."""
        t = self.transaction
        t.start()
        return t

    def end_transaction(self) -> None:
        """Ends the block begun by :meth:`start_transaction`: commits at the outermost."""
        current = self._current.get()
        if current is not None:
            current.complete()

    @property
    def _fs(self) -> Union[Store, Transaction]:
        """Where calls run: this context's transaction, or the store (auto-commit)."""
        current = self._current.get()
        return current.tx if current is not None and current.tx is not None else self.store

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        if isinstance(path, os.PathLike):  # pathlib objects and any other os.PathLike
            path = os.fspath(path)
        path = os.fsdecode(path) if isinstance(path, bytes) else str(path)
        if path.startswith("txvfs://"):
            path = path[len("txvfs://") :]
        elif path.startswith("txvfs:"):
            path = path[len("txvfs:") :]
        path = "/" + path.lstrip("/")
        if len(path) > 1:
            path = path.rstrip("/")
        return path

    def unstrip_protocol(self, name: str) -> str:
        """``txvfs://`` plus the absolute path."""
        return "txvfs://" + str(self._strip_protocol(name))

    # ------------------------------------------------------------------ metadata

    def _info_from_stat(self, path: str, st: Any, islink: bool = False) -> Dict[str, Any]:
        mode = st.st_mode
        if _stat.S_ISDIR(mode):
            kind = "directory"
        elif _stat.S_ISREG(mode):
            kind = "file"
        else:
            kind = "other"
        return {
            "name": path,
            "size": st.st_size,
            "type": kind,
            "created": _epoch(st.st_ctime_ns),
            "mtime": _epoch(st.st_mtime_ns),
            "islink": islink,
            "mode": mode,
            "uid": st.st_uid,
            "gid": st.st_gid,
            "ino": st.st_ino,
            "nlink": st.st_nlink,
        }

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        """Attributes of ``path`` as fsspec's dict (name, size, type, created, mtime, ...);
        follows symlinks (``islink`` tells), a dangling link is reported as itself."""
        path = self._strip_protocol(path)
        fs = self._fs
        lst = fs.lstat(path)
        islink = _stat.S_ISLNK(lst.st_mode)
        st = lst
        if islink:
            try:
                st = fs.stat(path)
            except FileNotFoundError:
                st = lst
        out = self._info_from_stat(path, st, islink)
        if islink:
            out["destination"] = fs.readlink(path)
        return out

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> List[Any]:
        """Lists a directory (or a file itself), with info dicts when ``detail``."""
        path = self._strip_protocol(path)
        fs = self._fs
        if not fs.isdir(path):
            info = self.info(path)
            return [info] if detail else [path]
        prefix = path if path.endswith("/") else path + "/"
        names = [prefix + e.name for e in fs.scandir(path)]
        if not detail:
            return names
        return [self.info(n) for n in names]

    def exists(self, path: str, **kwargs: Any) -> bool:
        """True if ``path`` exists."""
        return bool(self._fs.exists(self._strip_protocol(path)))

    def isdir(self, path: str) -> bool:
        """True for a directory."""
        return bool(self._fs.isdir(self._strip_protocol(path)))

    def isfile(self, path: str) -> bool:
        """True for a regular file."""
        return bool(self._fs.isfile(self._strip_protocol(path)))

    def size(self, path: str) -> int:
        """The size of a file in bytes."""
        return int(self._fs.stat(self._strip_protocol(path)).st_size)

    def created(self, path: str) -> datetime.datetime:
        """Creation time (txvfs keeps the status change time), UTC."""
        st = self._fs.stat(self._strip_protocol(path))
        return datetime.datetime.fromtimestamp(_epoch(st.st_ctime_ns), tz=datetime.timezone.utc)

    def modified(self, path: str) -> datetime.datetime:
        """Modification time, UTC."""
        st = self._fs.stat(self._strip_protocol(path))
        return datetime.datetime.fromtimestamp(_epoch(st.st_mtime_ns), tz=datetime.timezone.utc)

    def ukey(self, path: str) -> str:
        """A key that changes when the file changes (inode, size, mtime)."""
        st = self._fs.stat(self._strip_protocol(path))
        return "%d-%d-%d" % (st.st_ino, st.st_size, st.st_mtime_ns)

    # ------------------------------------------------------------------ changes

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Creates a directory (and its parents with ``create_parents``); an existing one
        raises FileExistsError."""
        path = self._strip_protocol(path)
        if self._fs.exists(path):
            raise FileExistsError(path)
        self._fs.mkdir(path, parents=create_parents, exist_ok=False)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Creates a directory and its parents."""
        self._fs.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        """Removes an empty directory."""
        self._fs.rmdir(self._strip_protocol(path))

    def rm_file(self, path: str) -> None:
        """Removes a file, symlink or empty directory."""
        path = self._strip_protocol(path)
        fs = self._fs
        if fs.isdir(path) and not fs.islink(path):
            fs.rmdir(path)
        else:
            fs.unlink(path)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        """Removes files and, with ``recursive``, directory trees; atomically (one
        transaction) when no fsspec transaction is open."""
        if self._intrans:
            super().rm(path, recursive=recursive, maxdepth=maxdepth)
            return

        def go(tx: Transaction) -> None:
            scope = TxvfsTransaction(self)
            scope.tx, scope._depth = tx, 1
            token = self._current.set(scope)
            try:
                super(TxvfsFileSystem, self).rm(path, recursive=recursive, maxdepth=maxdepth)
            finally:
                self._current.reset(token)

        self.store.transact(go)

    def mv(
        self,
        path1: Any,
        path2: Any,
        recursive: bool = False,
        maxdepth: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        """Moves ``path1`` to ``path2``. One existing file (or directory, with
        ``recursive``) is one atomic rename, into ``path2`` when that is a directory or ends
        with ``/``; globs and lists are copied and removed like fsspec does."""
        if isinstance(path1, str) and isinstance(path2, str) and not _has_magic(path1):
            src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
            fs = self._fs
            if fs.exists(src) and (recursive or not fs.isdir(src)):
                if path2.endswith("/") or fs.isdir(dst):
                    fs.mkdir(dst, parents=True, exist_ok=True)
                    dst = dst.rstrip("/") + "/" + src.rsplit("/", 1)[-1]
                elif self.auto_mkdir:
                    self._make_parent(dst)
                fs.rename(src, dst)
                return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copies one file (or creates the directory, for a directory), streaming large
        files in 4 MiB pieces."""
        src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
        fs = self._fs
        if fs.isdir(src):
            fs.mkdir(dst, parents=True, exist_ok=True)
            return
        if self.auto_mkdir:
            self._make_parent(dst)
        st = fs.stat(src)
        if st.st_size <= (16 << 20):
            fs.write_bytes(dst, fs.read_bytes(src))
            return
        with fs.open(src, "rb") as fin, fs.open(dst, "wb") as fout:
            while True:
                chunk = fin.read(4 << 20)
                if not chunk:
                    break
                fout.write(chunk)

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        """The bytes of a file, or of ``[start, end)`` (negative values count from the
        end), read in one transaction."""
        path = self._strip_protocol(path)
        fs = self._fs
        if start is None and end is None:
            return bytes(fs.read_bytes(path))
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = fs.stat(path).st_size
            if start is not None and start < 0:
                start = max(0, size + start)
            if end is not None and end < 0:
                end = max(0, size + end)
        start = start or 0
        if end is None:
            length = 1 << 62
        else:
            length = max(0, end - start)
        return bytes(fs.read_range(path, start, length))

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """Writes ``value`` as the whole file, atomically. ``mode="create"`` fails with
        FileExistsError if the file exists."""
        path = self._strip_protocol(path)
        if self.auto_mkdir:
            self._make_parent(path)
        if mode == "create":
            with self._fs.open(path, "xb") as f:
                f.write(value)
        else:
            self._fs.write_bytes(path, value)

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        """Creates an empty file, or (without ``truncate``) updates an existing one's times."""
        path = self._strip_protocol(path)
        if truncate or not self._fs.exists(path):
            if self.auto_mkdir:
                self._make_parent(path)
            self._fs.write_bytes(path, b"")
        else:
            self._fs.utime(path)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> Any:
        """Opens a file as an ``io`` object (``io.BufferedReader``, ...); inside
        ``fs.transaction`` its writes belong to the transaction."""
        path = self._strip_protocol(path)
        if "r" not in mode and self.auto_mkdir:
            self._make_parent(path)
        buffering = -1 if not isinstance(block_size, int) or block_size <= 0 else block_size
        return self._fs.open(path, mode, buffering=buffering)

    def open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        cache_options: Optional[Dict[str, Any]] = None,
        compression: Optional[str] = None,
        **kwargs: Any,
    ) -> Any:
        """Opens a file like fsspec's ``open``. Text modes open the store's own
        ``io.TextIOWrapper`` (not one over a binary file), so that what it buffers belongs
        to the transaction: a file still open when ``fs.transaction`` commits is flushed."""
        if "b" in mode or compression is not None:
            return super().open(path, mode, block_size, cache_options, compression, **kwargs)
        path = self._strip_protocol(path)
        if "r" not in mode and self.auto_mkdir:
            self._make_parent(path)
        text = {k: kwargs.pop(k) for k in ("encoding", "errors", "newline") if k in kwargs}
        buffering = -1 if not isinstance(block_size, int) or block_size <= 0 else block_size
        return self._fs.open(path, mode, buffering=buffering, **text)

    def _make_parent(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0] or "/"
        if parent != "/":
            self._fs.makedirs(parent, exist_ok=True)

    def read_block(
        self, fn: str, offset: int, length: Optional[int], delimiter: Optional[bytes] = None
    ) -> bytes:
        """``length`` bytes from ``offset`` (to the end with ``None``), extended to
        ``delimiter`` boundaries when one is given (see ``fsspec.utils.read_block``)."""
        if delimiter is None and length is not None:
            return self.cat_file(fn, offset, offset + length)
        with self._fs.open(self._strip_protocol(fn), "rb") as f:
            if length is None:
                length = f.seek(0, 2) - offset
            return bytes(fsspec.utils.read_block(f, offset, length, delimiter))

    def sign(self, path: str, expiration: int = 100, **kwargs: Any) -> str:
        """Not supported: a store has no URLs."""
        raise NotImplementedError("txvfs has no signed URLs")


fsspec.register_implementation("txvfs", TxvfsFileSystem, clobber=True)
