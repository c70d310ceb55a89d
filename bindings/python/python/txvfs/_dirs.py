"""Directory listings: :class:`DirEntry` (like ``os.DirEntry``) and the iterator of
``scandir``, which reads a directory in pages."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Optional, Tuple

from ._txvfs import StatResult

if TYPE_CHECKING:  # pragma: no cover
    from . import _PathOps


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
