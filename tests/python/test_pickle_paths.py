"""Using txvfs the way Python programs expect (issue 18): every path argument takes an
``os.PathLike``; ``txvfs.Store`` and the fsspec file system pickle by URI, so
``multiprocessing`` / ``concurrent.futures`` workers can use them; ``universal_pathlib``'s
``UPath("txvfs:///...")`` works through the fsspec registration."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pathlib
import pickle
import warnings
from typing import Any, Iterator

import pytest
import txvfs
import txvfs.fsspec
from txvfs.fsspec import TxvfsFileSystem


class FsPath(os.PathLike):  # type: ignore[type-arg]
    """A path object that is only an os.PathLike (no str subclass, no pathlib)."""

    def __init__(self, p: str) -> None:
        self.p = p

    def __fspath__(self) -> str:
        return self.p

    def __repr__(self) -> str:
        return "FsPath(%r)" % self.p


@pytest.fixture
def store_dir(tmp_path: pathlib.Path) -> str:
    return os.fspath(tmp_path / "store")


# ---------------------------------------------------------------------------- os.PathLike


@pytest.mark.parametrize("wrap", [pathlib.PurePosixPath, FsPath], ids=["PurePosixPath", "PathLike"])
def test_pathlike_everywhere(wrap: Any, tmp_path: pathlib.Path) -> None:
    P = wrap
    store_path = tmp_path / "store"
    with txvfs.open(FsPath(os.fspath(store_path)), sync=False) as s:  # the store itself
        s.mkdir(P("/d"))
        s.makedirs(P("/d/e/f"), exist_ok=True)
        s.write_bytes(P("/d/a"), b"abc")
        s.write_text(P("/d/t"), "text")
        assert s.read_bytes(P("/d/a")) == b"abc"
        assert s.read_text(P("/d/t")) == "text"
        assert s.read_range(P("/d/a"), 1, 1) == b"b"
        with s.open(P("/d/b"), "wb") as f:
            f.write(b"xyz")
        assert s.stat(P("/d/b")).st_size == 3 and s.lstat(P("/d/b")).st_size == 3
        assert s.exists(P("/d")) and s.lexists(P("/d")) and s.isdir(P("/d")) and s.isfile(P("/d/a"))
        s.symlink(P("/d/a"), P("/d/l"))
        assert s.islink(P("/d/l")) and s.readlink(P("/d/l")) == "/d/a"
        s.link(P("/d/a"), P("/d/h"))
        s.rename(P("/d/h"), P("/d/h2"))
        s.replace(P("/d/h2"), P("/d/h3"))
        s.chmod(P("/d/a"), 0o600)
        s.chown(P("/d/a"), os.getuid(), os.getgid())
        s.utime(P("/d/a"), ns=(1, 2))
        s.truncate(P("/d/a"), 1)
        s.setxattr(P("/d/a"), "user.k", b"v")
        assert s.getxattr(P("/d/a"), "user.k") == b"v" and s.listxattr(P("/d/a")) == ["user.k"]
        s.removexattr(P("/d/a"), "user.k")
        assert (
            "a" in s.listdir(P("/d"))
            and [n for n, _, _ in s.readdir(P("/d"), after=P("a"))][0] > "a"
        )
        assert "a" in [e.name for e in s.scandir(P("/d"))]
        assert [w[0] for w in s.walk(P("/d/e"))] == ["/d/e", "/d/e/f"]
        with s.transaction() as tx:
            tx.write_bytes(P("/d/tx"), b"1")
            assert tx.read_bytes(P("/d/tx")) == b"1"
            with tx.open(P("/d/tx2"), "w") as f:
                f.write("2")
        s.remove(P("/d/tx"))
        s.unlink(P("/d/tx2"))
        s.rmdir(P("/d/e/f"))
    assert txvfs.fsck(P(os.fspath(store_path))).clean
    fs = TxvfsFileSystem(store=P(os.fspath(store_path)))
    try:
        fs.pipe_file(P("/g/x"), b"data")
        assert fs.cat_file(P("/g/x")) == b"data"
        assert fs.ls(P("/g"), detail=False) == ["/g/x"]
        assert fs.info(P("/g/x"))["size"] == 4 and fs.exists(P("/g/x")) and fs.isdir(P("/g"))
        with fs.open(P("/g/y"), "wb") as f:
            f.write(b"y")
        assert fs.isfile(P("/g/y"))
    finally:
        fs.store.close()
        TxvfsFileSystem.clear_instance_cache()


# ---------------------------------------------------------------------------- pickling a Store


def test_store_pickles_by_uri_with_its_options(store_dir: str) -> None:
    with txvfs.open(store_dir, sync=False) as s:
        s.write_bytes("/a", b"1")
        s2 = pickle.loads(pickle.dumps(s))
        try:
            assert type(s2) is txvfs.Store and s2 is not s
            assert s2.uri == os.path.abspath(store_dir)
            assert s2.read_bytes("/a") == b"1"  # the same store, open twice in one process
            s2.write_bytes("/b", b"2")
            assert s.read_bytes("/b") == b"2"
        finally:
            s2.close()
    with txvfs.open("rocksdb:" + store_dir, read_only=True) as ro:
        ro2 = pickle.loads(pickle.dumps(ro))
        with ro2:
            assert ro2.uri == "rocksdb:" + os.path.abspath(store_dir)
            with pytest.raises(OSError):  # read_only travelled with it
                ro2.write_bytes("/c", b"3")


def test_relative_store_path_pickles_as_absolute(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with txvfs.open("rel-store", sync=False) as s:
        s.write_bytes("/a", b"1")
        data = pickle.dumps(s)
    monkeypatch.chdir("/")  # a worker may run elsewhere
    with pickle.loads(data) as s2:
        assert s2.uri == os.fspath(tmp_path / "rel-store") and s2.read_bytes("/a") == b"1"


def test_memory_store_refuses_to_pickle() -> None:
    with txvfs.open("memory:") as s:
        with pytest.raises(TypeError, match="memory"):
            pickle.dumps(s)
    fs = TxvfsFileSystem()  # the default store is a new memory store
    with pytest.raises(TypeError, match="memory"):
        pickle.dumps(fs)
    with pytest.raises(TypeError, match="memory"):
        pickle.dumps(TxvfsFileSystem(store="memory:", skip_instance_cache=True))


def test_transaction_does_not_pickle(store_dir: str) -> None:
    with txvfs.open(store_dir, sync=False) as s, s.transaction() as tx:
        with pytest.raises(TypeError):
            pickle.dumps(tx)


# ---------------------------------------------------------------------------- fsspec pickling


def test_fsspec_filesystem_pickles(store_dir: str) -> None:
    fs = TxvfsFileSystem(store=store_dir, store_options={"sync": False})
    try:
        fs.pipe_file("/f", b"fsspec")
        again = pickle.loads(pickle.dumps(fs))
        assert again is fs  # one store, one cached instance in a process
        with txvfs.open(store_dir, sync=False) as s:
            fs_obj = TxvfsFileSystem(store=s)
            other = pickle.loads(pickle.dumps(fs_obj))  # the Store inside goes by URI
            try:
                assert other.cat_file("/f") == b"fsspec" and other.store.uri == os.path.abspath(
                    store_dir
                )
            finally:
                other.store.close()
    finally:
        fs.store.close()
        TxvfsFileSystem.clear_instance_cache()


# ---------------------------------------------------------------------------- worker processes


def _worker_read_and_write(store: txvfs.Store, n: int) -> bytes:
    with store:
        data = store.read_bytes("/input")
        store.write_bytes("/out/%d" % n, data + b"!")
        return data


def _fs_worker(fs: TxvfsFileSystem) -> bytes:
    data: bytes = fs.cat_file("/input")
    fs.pipe_file("/fs-out", data.upper())
    fs.store.close()
    return data


def _spawn_pool() -> concurrent.futures.ProcessPoolExecutor:
    # One worker is enough: it opens, in another process, the store the parent pickled.
    return concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn")
    )


def test_worker_process_uses_a_store_the_parent_closed(store_dir: str) -> None:
    with txvfs.open(store_dir) as s:
        s.write_bytes("/input", b"from parent")
        s.mkdir("/out")
    with _spawn_pool() as pool:  # the pickled store opens in the worker
        assert pool.submit(_worker_read_and_write, s, 1).result(timeout=120) == b"from parent"
    with _spawn_pool() as pool:
        fs = TxvfsFileSystem(store=store_dir, skip_instance_cache=True)
        fs.store.close()
        assert pool.submit(_fs_worker, fs).result(timeout=120) == b"from parent"
    with txvfs.open(store_dir) as s:
        assert s.read_bytes("/out/1") == b"from parent!"
        assert s.read_bytes("/fs-out") == b"FROM PARENT"


def test_worker_process_uses_a_store_the_parent_holds_open(store_dir: str) -> None:
    with txvfs.open(store_dir) as s:
        s.write_bytes("/input", b"shared")
        s.mkdir("/out")
        with _spawn_pool() as pool:
            assert pool.submit(_worker_read_and_write, s, 2).result(timeout=120) == b"shared"
        assert s.read_bytes("/out/2") == b"shared!"


# ---------------------------------------------------------------------------- universal_pathlib


@pytest.fixture
def no_fs_cache() -> Iterator[None]:
    yield
    TxvfsFileSystem.clear_instance_cache()


def test_upath(store_dir: str, no_fs_cache: None) -> None:
    upath = pytest.importorskip("upath")  # in tests/python/requirements.txt: present in CI
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "filesystem not explicitly implemented" fallback
        root = upath.UPath("txvfs:///data", store=store_dir, store_options={"sync": False})
    assert isinstance(root.fs, TxvfsFileSystem)
    root.mkdir(parents=True, exist_ok=True)
    f = root / "notes" / "a.txt"
    f.parent.mkdir()
    f.write_text("hello")
    assert f.read_text() == "hello" and f.exists() and f.is_file() and f.parent.is_dir()
    assert [p.name for p in (root / "notes").iterdir()] == ["a.txt"]
    assert f.stat().st_size == 5
    assert str(f) == "txvfs:///data/notes/a.txt"
    assert sorted(p.path for p in root.glob("**/*.txt")) == ["/data/notes/a.txt"]
    f.rename(root / "notes" / "b.txt")
    assert not f.exists()
    again = pickle.loads(pickle.dumps(root / "notes" / "b.txt"))
    assert again.read_text() == "hello"
    root.fs.store.close()
    with txvfs.open(store_dir) as s:
        assert s.read_text("/data/notes/b.txt") == "hello"
