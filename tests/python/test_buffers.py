"""Issue 16, item 4: reads and writes through any buffer, filled or read in place.

``readinto`` fills the caller's buffer itself (``bytearray``, ``memoryview`` and slices of one,
``array.array``, ``mmap``, NumPy arrays, a memoryview cast to wider items), partially at the end of the file;
a read-only or non-contiguous buffer raises ``TypeError`` like the builtin ``open`` and reads
nothing; ``write`` takes the same buffers. Each case runs on the builtin ``open`` over a real
file too and must give the same results.
"""

from __future__ import annotations

import array
import mmap
import os
import pathlib
import threading
from typing import Any, Callable, Iterator, List, Tuple

import numpy  # installed with pandas (tests/python/requirements.txt)
import pytest
import txvfs

SIZE = 3 * (1 << 20) + 12345  # more than the binding's 1 MiB core reads, not a block multiple
DATA = bytes(range(256)) * (SIZE // 256) + bytes(range(SIZE % 256))


@pytest.fixture
def both(tmp_path: pathlib.Path, any_store: txvfs.Store) -> Tuple[str, txvfs.Store]:
    """The same SIZE-byte file on disk (for the builtin ``open``) and in a store."""
    real = tmp_path / "data"
    real.write_bytes(DATA)
    any_store.write_bytes("/data", DATA)
    return os.fspath(real), any_store


def openers(both: Tuple[str, txvfs.Store]) -> List[Callable[..., Any]]:
    real, store = both
    return [
        lambda mode="rb", **kw: open(real, mode, **kw),
        lambda mode="rb", **kw: store.open("/data", mode, **kw),
    ]


def outcome(fn: Callable[[], Any]) -> Any:
    """The result of ``fn()``, or the type of the exception it raised."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the type is the outcome
        return type(e)


BUFFERS: List[Tuple[str, Callable[[int], Any]]] = [
    ("bytearray", lambda n: bytearray(n)),
    ("memoryview", lambda n: memoryview(bytearray(n))),
    ("memoryview slice", lambda n: memoryview(bytearray(n + 20))[7 : n + 7]),
    ("array of bytes", lambda n: array.array("B", bytes(n))),
    ("array of ints", lambda n: array.array("i", bytes(n - n % 4))),
    ("memoryview cast to ints", lambda n: memoryview(bytearray(n - n % 4)).cast("I")),
    ("numpy array of ints", lambda n: numpy.zeros(n // 4, dtype=numpy.int32)),
]


def frozen_numpy() -> Any:
    a = numpy.zeros(64, dtype=numpy.uint8)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("buffering", [0, -1])
@pytest.mark.parametrize("size", [100, 1 << 20, SIZE + 1000])
@pytest.mark.parametrize("kind,make", BUFFERS, ids=[b[0] for b in BUFFERS])
def test_readinto_fills_any_writable_buffer_like_builtin_open(
    both: Tuple[str, txvfs.Store], kind: str, make: Callable[[int], Any], size: int, buffering: int
) -> None:
    results = []
    for opener in openers(both):
        buf = make(size)
        n = len(memoryview(buf).cast("B"))
        got = []
        with opener(buffering=buffering) as f:
            start = max(0, SIZE - n - n // 2)  # the second read is cut short by the end
            f.seek(start)
            for _ in range(3):
                k = f.readinto(buf)
                got.append((k, bytes(memoryview(buf).cast("B"))))
            results.append((start, got, f.tell()))
    assert results[1] == results[0]
    start, got, _ = results[1]
    k = got[0][0]
    assert got[0][1][:k] == DATA[start : start + k]


def test_readinto_fills_an_mmap_and_leaves_the_rest_alone(both: Tuple[str, txvfs.Store]) -> None:
    _, store = both
    m = mmap.mmap(-1, SIZE + 4096)
    m[:] = b"\xee" * len(m)
    with store.open("/data", "rb", buffering=0) as f:
        assert f.readinto(m) == SIZE
        assert f.readinto(m) == 0
    assert m[:SIZE] == DATA and m[SIZE:] == b"\xee" * 4096
    m.close()


READ_ONLY: List[Tuple[str, Callable[[], Any]]] = [
    ("bytes", lambda: b"\0" * 64),
    ("memoryview of bytes", lambda: memoryview(b"\0" * 64)),
    ("read-only memoryview", lambda: memoryview(bytearray(64)).toreadonly()),
    ("str", lambda: "x" * 64),
    ("non-contiguous memoryview", lambda: memoryview(bytearray(128))[::2]),
    ("read-only numpy array", frozen_numpy),
    ("non-contiguous numpy array", lambda: numpy.zeros(128, dtype=numpy.uint8)[::2]),
    ("int", lambda: 64),
]


@pytest.mark.parametrize("buffering", [0, -1])
@pytest.mark.parametrize("kind,make", READ_ONLY, ids=[b[0] for b in READ_ONLY])
def test_readinto_a_buffer_it_cannot_write_is_a_type_error_and_reads_nothing(
    both: Tuple[str, txvfs.Store], kind: str, make: Callable[[], Any], buffering: int
) -> None:
    results = []
    for opener in openers(both):
        with opener(buffering=buffering) as f:
            results.append((outcome(lambda: f.readinto(make())), f.tell()))
    assert results[1] == results[0]
    assert results[1] == (TypeError, 0)


def test_the_native_handle_says_what_it_needs(both: Tuple[str, txvfs.Store]) -> None:
    _, store = both
    h = store.open_raw("/data", os.O_RDONLY)
    with pytest.raises(TypeError, match="read-write bytes-like object.*bytes"):
        h.readinto(b"\0" * 10)
    with pytest.raises(TypeError, match="bytes-like object.*str"):
        h.write("text")
    assert h.tell() == 0
    h.close()
    buf = bytearray(b"\xee" * 10)
    with pytest.raises(ValueError, match="closed file"):
        h.readinto(buf)
    assert buf == b"\xee" * 10


def test_readinto_on_a_closed_file_raises_value_error(both: Tuple[str, txvfs.Store]) -> None:
    for opener in openers(both):
        for buffering in (0, -1):
            f = opener(buffering=buffering)
            f.close()
            with pytest.raises(ValueError):
                f.readinto(bytearray(10))


def test_a_buffer_being_filled_cannot_be_resized(store: txvfs.Store) -> None:
    """The buffer stays exported while the core fills it without the GIL: another thread
    that tries to resize it gets BufferError, as with the builtin open."""
    store.write_bytes("/d", DATA)
    buf = bytearray(len(DATA))
    errors: List[BaseException] = []
    stop = threading.Event()

    def resize() -> None:
        while not stop.is_set():
            try:
                buf.extend(b"x")
                del buf[-1]
            except BufferError as e:
                errors.append(e)

    t = threading.Thread(target=resize)
    t.start()
    try:
        h = store.open_raw("/d", os.O_RDONLY)
        for _ in range(1000):  # until the other thread has run during a read (at once, usually)
            h.seek(0)
            assert h.readinto(buf) == len(DATA)
            if errors:
                break
        h.close()
    finally:
        stop.set()
        t.join()
    assert bytes(buf[: len(DATA)]) == DATA
    assert errors, "the resizing thread never ran while the core filled the buffer (GIL held?)"


@pytest.mark.parametrize("buffering", [0, -1])
def test_threads_sharing_a_file_each_read_whole_distinct_pieces(
    any_store: txvfs.Store, buffering: int
) -> None:
    piece, pieces = 64 << 10, 64
    data = b"".join(i.to_bytes(4, "big") * (piece // 4) for i in range(pieces))
    any_store.write_bytes("/p", data)
    seen: List[int] = []
    lock = threading.Lock()
    with any_store.open("/p", "rb", buffering=buffering) as f:

        def reader() -> None:
            buf = bytearray(piece)
            while True:
                k = f.readinto(buf)
                if not k:
                    return
                assert k == piece
                first = bytes(buf[:4])
                assert bytes(buf) == first * (piece // 4)
                with lock:
                    seen.append(int.from_bytes(first, "big"))

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(seen) == list(range(pieces))


WRITABLE: List[Tuple[str, Callable[[bytes], Any]]] = [
    ("bytes", lambda b: b),
    ("bytearray", lambda b: bytearray(b)),
    ("memoryview slice", lambda b: memoryview(b"--" + b + b"--")[2:-2]),
    ("array of ints", lambda b: array.array("i", b)),
    ("memoryview cast to ints", lambda b: memoryview(b).cast("I")),
    ("numpy array", lambda b: numpy.frombuffer(b, dtype=numpy.uint16)),
    ("non-contiguous memoryview", lambda b: memoryview(b + b)[::2]),
    ("str", lambda b: b.decode("latin-1")),
]


@pytest.mark.parametrize("buffering", [0, -1])
@pytest.mark.parametrize("kind,make", WRITABLE, ids=[w[0] for w in WRITABLE])
def test_write_takes_any_contiguous_buffer_like_builtin_open(
    both: Tuple[str, txvfs.Store], kind: str, make: Callable[[bytes], Any], buffering: int
) -> None:
    real, store = both
    payload = DATA[: 1 << 20]
    results = []
    for opener, read in [
        (lambda **kw: open(real, "wb", **kw), lambda: pathlib.Path(real).read_bytes()),
        (lambda **kw: store.open("/data", "wb", **kw), lambda: store.read_bytes("/data")),
    ]:
        with opener(buffering=buffering) as f:
            r = outcome(lambda: f.write(make(payload)))
        results.append((r, read()))
    assert results[1] == results[0]


def test_pwrite_takes_a_buffer_and_pread_reads_it_back(store: txvfs.Store) -> None:
    h = store.open_raw("/w", os.O_CREAT | os.O_RDWR)
    assert h.pwrite(memoryview(bytearray(b"hello world"))[6:], 3) == 5
    assert h.pwrite(array.array("B", b"abc"), 0) == 3
    assert h.pread(100, 0) == b"abcworld"
    assert h.tell() == 0
    h.close()


@pytest.fixture
def big_store(any_store: txvfs.Store) -> Iterator[txvfs.Store]:
    any_store.write_bytes("/data", DATA)
    yield any_store


def test_large_reads_of_every_kind(big_store: txvfs.Store) -> None:
    h = big_store.open_raw("/data", os.O_RDONLY)
    assert h.read(-1) == DATA
    h.seek(5)
    assert h.readall() == DATA[5:]
    h.seek(1)
    assert h.read(SIZE) == DATA[1:]
    h.seek(0)
    assert h.read((2 << 20) + 1) == DATA[: (2 << 20) + 1]
    assert h.pread(SIZE * 2, 7) == DATA[7:]
    assert h.pread(2 << 20, 7) == DATA[7 : 7 + (2 << 20)]
    h.close()


def test_read_bytes_and_read_range_of_large_and_small_ranges(big_store: txvfs.Store) -> None:
    store = big_store
    store.write_bytes("/small", DATA[:1000])
    for fs in (store, store.begin()):
        assert fs.read_bytes("/data") == DATA
        assert fs.read_range("/data", 5, SIZE) == DATA[5:]
        assert fs.read_range("/data", 5, 2 << 20) == DATA[5 : 5 + (2 << 20)]
        assert fs.read_range("/data", SIZE - 10, 1 << 30) == DATA[-10:]
        assert fs.read_range("/data", SIZE + 10, 1 << 30) == b""
        assert fs.read_bytes("/small") == DATA[:1000]
        assert fs.read_range("/small", 10, 1 << 30) == DATA[10:1000]
        with pytest.raises(IsADirectoryError):
            fs.read_bytes("/")
        with pytest.raises(FileNotFoundError):
            fs.read_bytes("/missing")
        if isinstance(fs, txvfs.Transaction):
            fs.rollback()
