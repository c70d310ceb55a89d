"""Files of a store as ``io`` objects: :class:`RawFile` (the raw layer under the buffered and
text objects that ``open`` returns), ``flock``/``lockf``, and the parsing of ``open`` modes."""

from __future__ import annotations

import errno as _errno
import io
import os
from typing import Any, Optional, Tuple

from ._txvfs import Handle, StatResult


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
        """Writes all of ``b`` (any C-contiguous bytes-like object, written from its memory);
        returns its length in bytes."""
        return self._check_writable().write(b)

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
