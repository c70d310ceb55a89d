"""store.open behaves like the builtin open: the same operation sequences on a txvfs file and
on a real file in a temporary directory give the same results, the same exceptions and the
same final contents. Also: the io objects work with json, csv, zipfile, tarfile, shutil."""

from __future__ import annotations

import csv
import io
import json
import os
import pathlib
import shutil
import tarfile
import zipfile
from typing import Any, Callable, List, Optional, Tuple

import pytest
import txvfs
from conftest import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

Op = Tuple[str, Tuple[Any, ...]]


def outcome(fn: Callable[[], Any]) -> Any:
    """A comparable result: the value, or the exception's type and errno."""
    try:
        v = fn()
    except (OSError, ValueError, TypeError, LookupError, AttributeError) as e:
        return ("raise", type(e).__name__, getattr(e, "errno", None))
    if isinstance(v, (bytearray, memoryview)):
        v = bytes(v)
    return ("ok", v)


def apply(f: Any, op: Op) -> Any:
    name, args = op
    if name == "readinto":
        buf = bytearray(args[0])
        return outcome(lambda: (f.readinto(buf), bytes(buf)))
    if name == "mode":
        return outcome(lambda: f.mode)
    return outcome(lambda: getattr(f, name)(*args))


def run_both(
    store: txvfs.Store,
    tmp: pathlib.Path,
    mode: str,
    ops: List[Op],
    initial: Optional[bytes],
    buffering: int = -1,
    encoding: Optional[str] = None,
    newline: Optional[str] = None,
) -> None:
    real = tmp / "f"
    if real.exists():
        real.unlink()
    if store.exists("/f"):
        store.unlink("/f")
    if initial is not None:
        real.write_bytes(initial)
        store.write_bytes("/f", initial)
    kw = dict(buffering=buffering, encoding=encoding, newline=newline)
    if "b" in mode:
        kw = dict(buffering=buffering)
    want_open = outcome(lambda: open(real, mode, **kw))  # type: ignore[call-overload]
    got_open = outcome(lambda: store.open("/f", mode, **kw))
    if want_open[0] == "raise" or got_open[0] == "raise":
        assert got_open == want_open
        return
    ref, mine = want_open[1], got_open[1]
    if buffering == 0:
        assert isinstance(mine, txvfs.RawFile) and isinstance(ref, io.FileIO)
    else:
        assert type(mine) is type(ref)
    try:
        for i, op in enumerate(ops):
            want, got = apply(ref, op), apply(mine, op)
            assert got == want, "step %d %r in mode %r: txvfs %r, builtin %r" % (
                i,
                op,
                mode,
                got,
                want,
            )
    finally:
        ref.close()
        mine.close()
    assert store.read_bytes("/f") == real.read_bytes()
    # After close, every operation raises ValueError in both.
    assert apply(mine, ("read", ())) == apply(ref, ("read", ()))


BIN_MODES = ["rb", "wb", "ab", "xb", "r+b", "w+b", "a+b"]
TEXT_MODES = ["r", "w", "a", "x", "r+", "w+", "a+"]

bin_data = st.binary(max_size=300)
bin_ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.tuples(bin_data)),
        st.tuples(st.just("read"), st.tuples(st.integers(-1, 400))),
        st.tuples(st.just("read"), st.just(())),
        st.tuples(st.just("read1"), st.tuples(st.integers(-1, 100))),
        st.tuples(st.just("read1"), st.just(())),
        st.tuples(st.just("tell"), st.just(())),
        st.tuples(st.just("readline"), st.just(())),
        st.tuples(st.just("readlines"), st.just(())),
        st.tuples(st.just("readinto"), st.tuples(st.integers(0, 200))),
        st.tuples(st.just("seek"), st.tuples(st.integers(-50, 700), st.sampled_from([0, 1, 2]))),
        st.tuples(st.just("truncate"), st.tuples(st.integers(0, 600))),
        st.tuples(st.just("truncate"), st.just(())),
        st.tuples(st.just("flush"), st.just(())),
        st.tuples(st.just("readable"), st.just(())),
        st.tuples(st.just("writable"), st.just(())),
        st.tuples(st.just("seekable"), st.just(())),
        st.tuples(st.just("mode"), st.just(())),
    ),
    max_size=25,
)

text_data = st.text(alphabet="ab\u00e9\u20ac\n\r ", max_size=100)
text_ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.tuples(text_data)),
        st.tuples(st.just("read"), st.tuples(st.integers(-1, 200))),
        st.tuples(st.just("readline"), st.just(())),
        st.tuples(st.just("readlines"), st.just(())),
        st.tuples(st.just("seek"), st.sampled_from([(0,), (0, 2), (0, 0)])),
        st.tuples(st.just("tell"), st.just(())),
        st.tuples(st.just("truncate"), st.just(())),
        st.tuples(st.just("flush"), st.just(())),
        st.tuples(st.just("mode"), st.just(())),
    ),
    max_size=20,
)

SETTINGS = settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@SETTINGS
@example(
    mode="r+b",
    buffering=7,
    initial=b"0123456789",
    ops=[("read1", (3,)), ("read1", (-1,)), ("write", (b"ab",)), ("read1", (100,)), ("read1", ())],
)
@example(
    mode="rb",
    buffering=-1,
    initial=b"abc",
    ops=[("read1", ()), ("read1", (0,)), ("seek", (1, 0)), ("read1", (1,))],
)
@example(mode="rb", buffering=0, initial=b"abc", ops=[("read1", (1,))])  # raw files have no read1
@given(
    mode=st.sampled_from(BIN_MODES),
    buffering=st.sampled_from([-1, 0, 7, 4096]),
    initial=st.one_of(st.none(), bin_data),
    ops=bin_ops,
)
def test_binary_sequences_match_builtin_open(
    store: txvfs.Store,
    tmp_path: pathlib.Path,
    mode: str,
    buffering: int,
    initial: Optional[bytes],
    ops: List[Op],
) -> None:
    run_both(store, tmp_path, mode, ops, initial, buffering)


@SETTINGS
@given(
    mode=st.sampled_from(TEXT_MODES),
    buffering=st.sampled_from([-1, 1, 16]),
    newline=st.sampled_from([None, "", "\n", "\r\n"]),
    initial=st.one_of(st.none(), text_data.map(lambda s: s.encode("utf-8"))),
    ops=text_ops,
)
def test_text_sequences_match_builtin_open(
    store: txvfs.Store,
    tmp_path: pathlib.Path,
    mode: str,
    buffering: int,
    newline: Optional[str],
    initial: Optional[bytes],
    ops: List[Op],
) -> None:
    run_both(store, tmp_path, mode, ops, initial, buffering, encoding="utf-8", newline=newline)


@pytest.mark.parametrize(
    "mode,buffering,kw",
    [
        ("rw", -1, {}),
        ("rr", -1, {}),
        ("q", -1, {}),
        ("rbt", -1, {}),
        ("", -1, {}),
        ("r", 0, {}),
        ("rb", -1, {"encoding": "utf-8"}),
        ("rb", -1, {"errors": "strict"}),
        ("rb", -1, {"newline": "\n"}),
        ("r", -1, {"newline": "x"}),
        ("r", -1, {"encoding": "no-such-codec"}),
        ("r", "big", {}),
    ],
)
def test_invalid_arguments_match_builtin_open(
    store: txvfs.Store, tmp_path: pathlib.Path, mode: str, buffering: Any, kw: Any
) -> None:
    (tmp_path / "f").write_bytes(b"x")
    store.write_bytes("/f", b"x")
    want = outcome(lambda: open(tmp_path / "f", mode, buffering, **kw))
    got = outcome(lambda: store.open("/f", mode, buffering, **kw))
    assert want[0] == "raise" and got == want


def test_open_missing_and_directories_match_builtin(
    store: txvfs.Store, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "d").mkdir()
    store.mkdir("/d")
    for mode in ("r", "rb", "w", "a", "r+", "x"):
        for path in ("missing", "d", "missing/x"):
            want = outcome(lambda: open(tmp_path / path, mode))
            got = outcome(lambda: store.open("/" + path, mode))
            if want[0] == "ok":
                want[1].close()
                got[1].close()
                continue
            assert got == want, (mode, path)


def test_types_attributes_and_closed_state(store: txvfs.Store) -> None:
    store.write_bytes("/f", b"line1\nline2\n")
    cases = [
        ("rb", io.BufferedReader, "rb"),
        ("wb", io.BufferedWriter, "wb"),
        ("r+b", io.BufferedRandom, "rb+"),
        ("r", io.TextIOWrapper, "r"),
    ]
    for mode, cls, shown in cases:
        f = store.open("/f", mode)
        assert type(f) is cls and isinstance(f, io.IOBase)
        assert f.name == "/f" and f.mode == shown  # as the builtin open shows it
        f.close()
        assert f.closed
        with pytest.raises(ValueError):
            f.read()
    store.write_bytes("/f", b"line1\nline2\n")
    raw = store.open("/f", "rb", buffering=0)
    assert isinstance(raw, txvfs.RawFile) and isinstance(raw, io.RawIOBase) and raw.mode == "rb"
    raw.close()
    with store.open("/f", "rb") as f:
        assert list(f) == [b"line1\n", b"line2\n"]


def test_append_mode_position_and_writes(store: txvfs.Store) -> None:
    store.write_bytes("/log", b"abc")
    with store.open("/log", "a+b") as f:
        assert f.tell() == 3
        f.seek(0)
        assert f.read() == b"abc"
        f.seek(0)
        f.write(b"def")
        assert f.tell() == 3  # like the builtin: the buffer does not know about O_APPEND
        f.flush()
        assert f.tell() == 6
    assert store.read_bytes("/log") == b"abcdef"


def test_json_csv_zip_tar_copyfileobj(store: txvfs.Store, tmp_path: pathlib.Path) -> None:
    with store.open("/data.json", "w") as f:
        json.dump({"a": [1, 2, 3], "b": "\u00e9"}, f)
    with store.open("/data.json") as f:
        assert json.load(f) == {"a": [1, 2, 3], "b": "\u00e9"}

    rows = [["x", "y"], ["1", "a,b"], ["2", 'q"uote']]
    with store.open("/t.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with store.open("/t.csv", newline="") as f:
        assert list(csv.reader(f)) == rows

    with store.open("/a.zip", "wb") as f:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("one.txt", "1" * 10000)
            z.writestr("dir/two.bin", bytes(range(256)))
    with store.open("/a.zip", "rb") as f:
        with zipfile.ZipFile(f) as z:
            assert sorted(z.namelist()) == ["dir/two.bin", "one.txt"]
            assert z.read("dir/two.bin") == bytes(range(256))
    # Appending to an existing zip needs seek + read + write on one file.
    with store.open("/a.zip", "r+b") as f:
        with zipfile.ZipFile(f, "a") as z:
            z.writestr("three.txt", "3")
    with store.open("/a.zip", "rb") as f, zipfile.ZipFile(f) as z:
        assert z.read("three.txt") == b"3" and z.testzip() is None

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hello.txt").write_text("hello")
    with store.open("/a.tar.gz", "wb") as f:
        with tarfile.open(fileobj=f, mode="w:gz") as t:
            t.add(tmp_path / "src", arcname="src")
    with store.open("/a.tar.gz", "rb") as f:
        with tarfile.open(fileobj=f, mode="r:gz") as t:
            member = t.extractfile("src/hello.txt")
            assert member is not None and member.read() == b"hello"

    big = os.urandom(3 << 20)
    (tmp_path / "big").write_bytes(big)
    with open(tmp_path / "big", "rb") as src, store.open("/big", "wb") as dst:
        shutil.copyfileobj(src, dst)
    with store.open("/big", "rb") as src, open(tmp_path / "copy", "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert (tmp_path / "copy").read_bytes() == big == store.read_bytes("/big")


def test_large_reads_and_readall(store: txvfs.Store) -> None:
    data = os.urandom(5 << 20)
    with store.open("/big", "wb") as f:
        f.write(data)
    with store.open("/big", "rb") as f:
        f.seek(1000)
        assert f.read() == data[1000:]
    with store.open("/big", "rb", buffering=0) as raw:
        assert raw.readall() == data
        raw.seek(10)
        buf = bytearray(100)
        assert raw.readinto(buf) == 100 and bytes(buf) == data[10:110]
        mv = memoryview(bytearray(50))
        assert raw.readinto(mv) == 50 and bytes(mv) == data[110:160]


def test_locks_flock_and_lockf(store: txvfs.Store) -> None:
    store.write_bytes("/lock", b"")
    a = store.open("/lock", "r+b")
    b = store.open("/lock", "r+")
    txvfs.flock(a, txvfs.LOCK_EX)
    with pytest.raises(BlockingIOError):
        txvfs.flock(b, txvfs.LOCK_SH | txvfs.LOCK_NB)
    txvfs.flock(a, txvfs.LOCK_UN)
    txvfs.flock(b, txvfs.LOCK_SH | txvfs.LOCK_NB)
    txvfs.flock(a, txvfs.LOCK_SH | txvfs.LOCK_NB)  # shared locks coexist
    txvfs.flock(b, txvfs.LOCK_UN)
    txvfs.flock(a, txvfs.LOCK_UN)
    # Byte ranges: disjoint write locks coexist, overlapping ones do not.
    txvfs.lockf(a, txvfs.LOCK_EX, 10, 0)
    txvfs.lockf(b, txvfs.LOCK_EX | txvfs.LOCK_NB, 10, 10)
    with pytest.raises(BlockingIOError):
        txvfs.lockf(b, txvfs.LOCK_EX | txvfs.LOCK_NB, 5, 5)
    a.close()  # closing releases a's locks
    txvfs.lockf(b, txvfs.LOCK_EX | txvfs.LOCK_NB, 5, 5)
    txvfs.lockf(b, txvfs.LOCK_UN, 0, 0, io.SEEK_SET)
    with pytest.raises(TypeError):
        txvfs.flock(io.BytesIO(), txvfs.LOCK_EX)
    with pytest.raises(ValueError):
        txvfs.lockf(b, txvfs.LOCK_EX, 1, 0, 9)
    with pytest.raises(OSError):
        txvfs.flock(b, 99)
    b.close()


def test_blocking_lock_waits_for_release(store: txvfs.Store) -> None:
    import threading

    store.write_bytes("/lock", b"")
    a = store.open("/lock", "rb")
    b = store.open("/lock", "rb")
    txvfs.flock(a, txvfs.LOCK_EX)
    got = threading.Event()

    def waiter() -> None:
        txvfs.flock(b, txvfs.LOCK_EX)  # blocks with the GIL released
        got.set()

    t = threading.Thread(target=waiter)
    t.start()
    assert not got.wait(0.2)
    txvfs.flock(a, txvfs.LOCK_UN)
    t.join(10)
    assert got.is_set()
    a.close()
    b.close()


def test_fsync_and_stat_on_raw(store: txvfs.Store) -> None:
    with store.open("/f", "wb") as f:
        f.write(b"12345")
        f.flush()
        raw = f.raw
        raw.fsync()
        assert raw.stat().st_size == 5
