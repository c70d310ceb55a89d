"""txvfs through fsspec: TxvfsFileSystem's behaviour, fs.transaction as one real txvfs
transaction, fsspec's own abstract test classes, and a pandas round trip."""

from __future__ import annotations

import datetime
import os
import pathlib
from typing import Any, Iterator

import fsspec
import pytest
import txvfs
from fsspec.tests.abstract import AbstractFixtures
from fsspec.tests.abstract.copy import AbstractCopyTests
from fsspec.tests.abstract.get import AbstractGetTests
from fsspec.tests.abstract.open import AbstractOpenTests
from fsspec.tests.abstract.pipe import AbstractPipeTests
from fsspec.tests.abstract.put import AbstractPutTests
from txvfs.fsspec import TxvfsFileSystem


@pytest.fixture
def fs() -> Iterator[TxvfsFileSystem]:
    store = txvfs.open("memory:")
    yield TxvfsFileSystem(store=store, skip_instance_cache=True)
    store.close()


def test_protocol_registered_and_url_open(tmp_path: pathlib.Path) -> None:
    assert fsspec.get_filesystem_class("txvfs") is TxvfsFileSystem
    uri = os.fspath(tmp_path / "store")
    with fsspec.open("txvfs:///data/x.csv", "wt", store=uri) as f:
        f.write("a,b\n1,2\n")
    with fsspec.open("txvfs:///data/x.csv", "rt", store=uri) as f:
        assert f.read() == "a,b\n1,2\n"
    fs = fsspec.filesystem("txvfs", store=uri)
    assert fs.cat("txvfs:///data/x.csv") == b"a,b\n1,2\n"
    assert fs.unstrip_protocol("/data/x.csv") == "txvfs:///data/x.csv"
    assert fs.fsid.startswith("txvfs:")
    with txvfs.open(uri) as s:  # the same store, seen directly
        assert s.read_text("/data/x.csv") == "a,b\n1,2\n"


def test_strip_protocol() -> None:
    strip = TxvfsFileSystem._strip_protocol
    assert strip("txvfs:///a/b/") == "/a/b"
    assert strip("txvfs://a/b") == "/a/b"
    assert strip("/") == "/" and strip("") == "/" and strip("a") == "/a"
    assert strip(["txvfs:///x", "/y/"]) == ["/x", "/y"]


def test_ls_info_find_glob_du(fs: TxvfsFileSystem) -> None:
    fs.pipe({"/d/a.txt": b"1", "/d/b.csv": b"22", "/d/sub/c.txt": b"333"})
    fs.store.symlink("/d/a.txt", "/d/link")
    names = fs.ls("/d", detail=False)
    assert names == ["/d/a.txt", "/d/b.csv", "/d/link", "/d/sub"]
    detail = {e["name"]: e for e in fs.ls("/d", detail=True)}
    assert detail["/d/sub"]["type"] == "directory"
    assert detail["/d/b.csv"]["type"] == "file" and detail["/d/b.csv"]["size"] == 2
    assert detail["/d/link"]["islink"] and detail["/d/link"]["destination"] == "/d/a.txt"
    info = fs.info("txvfs:///d/sub/c.txt")
    assert info["name"] == "/d/sub/c.txt" and info["size"] == 3 and info["type"] == "file"
    assert fs.ls("/d/a.txt", detail=False) == ["/d/a.txt"]
    with pytest.raises(FileNotFoundError):
        fs.info("/nope")
    assert fs.find("/d") == ["/d/a.txt", "/d/b.csv", "/d/link", "/d/sub/c.txt"]
    assert sorted(fs.glob("/d/**/*.txt")) == ["/d/a.txt", "/d/sub/c.txt"]
    assert fs.glob("/d/*.csv") == ["/d/b.csv"]
    assert fs.du("/d/sub") == 3
    assert fs.isdir("/d") and fs.isfile("/d/a.txt") and fs.exists("/d/link") and not fs.exists("/e")
    assert fs.size("/d/b.csv") == 2
    assert len(fs.ukey("/d/a.txt")) > 0


def test_cat_ranges_pipe_many(fs: TxvfsFileSystem) -> None:
    fs.pipe_file("/f", b"0123456789")
    assert fs.cat_file("/f") == b"0123456789"
    assert fs.cat_file("/f", start=2, end=5) == b"234"
    assert fs.cat_file("/f", start=-3) == b"789"
    assert fs.cat_file("/f", start=2, end=-2) == b"234567"
    assert fs.cat_file("/f", start=8, end=100) == b"89"
    assert fs.cat_file("/f", start=5, end=2) == b""
    assert fs.read_block("/f", 3, 4) == b"3456"
    fs.pipe({"/m/1": b"a", "/m/2": b"b"})
    assert fs.cat(["/m/1", "/m/2"]) == {"/m/1": b"a", "/m/2": b"b"}
    assert fs.cat("/m/*") == {"/m/1": b"a", "/m/2": b"b"}
    assert fs.cat_ranges(["/f", "/m/1"], [0, 0], [2, 1]) == [b"01", b"a"]
    with pytest.raises(FileExistsError):
        fs.pipe_file("/f", b"x", mode="create")
    assert fs.head("/f", 3) == b"012" and fs.tail("/f", 2) == b"89"


def test_mkdir_makedirs_rm_mv_cp(fs: TxvfsFileSystem) -> None:
    fs.mkdir("/a/b")
    with pytest.raises(FileExistsError):
        fs.mkdir("/a/b")
    fs.makedirs("/a/b", exist_ok=True)
    with pytest.raises(FileExistsError):
        fs.makedirs("/a/b")
    fs.pipe_file("/a/b/f", b"data")
    fs.cp_file("/a/b/f", "/a/copy")
    assert fs.cat("/a/copy") == b"data"
    fs.copy("/a/b", "/c", recursive=True)
    assert fs.cat("/c/f") == b"data"
    fs.mv("/a/copy", "/a/moved")
    assert not fs.exists("/a/copy") and fs.cat("/a/moved") == b"data"
    ino = fs.info("/a/b/f")["ino"]
    fs.mv("/a/b", "/z", recursive=True)  # one atomic rename: same inode
    assert fs.info("/z/f")["ino"] == ino and not fs.exists("/a/b")
    fs.mkdir("/into")
    fs.mv("/a/moved", "/into")
    assert fs.cat("/into/moved") == b"data"
    with pytest.raises(OSError):
        fs.rm("/z")  # a non-empty directory without recursive
    fs.rm("/z", recursive=True)
    assert not fs.exists("/z")
    fs.rm_file("/into/moved")
    fs.rmdir("/into")
    fs.touch("/t")
    assert fs.cat("/t") == b""
    before = fs.modified("/t")
    fs.touch("/t", truncate=False)
    assert fs.modified("/t") >= before
    assert isinstance(fs.created("/t"), datetime.datetime) and fs.created("/t").tzinfo is not None
    with pytest.raises(NotImplementedError):
        fs.sign("/t")


def test_large_file_copy_streams(fs: TxvfsFileSystem) -> None:
    data = os.urandom(17 << 20)
    fs.pipe_file("/big", data)
    fs.cp_file("/big", "/big2")
    assert fs.cat("/big2") == data


def test_transaction_is_one_txvfs_transaction(fs: TxvfsFileSystem) -> None:
    store = fs.store
    fs.pipe_file("/old.csv", b"old")
    with fs.transaction:
        fs.pipe_file("/data/a.csv", b"a")
        with fs.open("/data/b.csv", "wb") as f:
            f.write(b"b")
        fs.mv("/old.csv", "/older.csv")
        # Inside: fs sees its own writes; the store (others) sees nothing yet.
        assert fs.cat("/data/a.csv") == b"a" and fs.exists("/older.csv")
        assert not store.exists("/data") and store.exists("/old.csv")
    assert store.read_bytes("/data/b.csv") == b"b" and store.exists("/older.csv")
    assert not fs._intrans

    with pytest.raises(ZeroDivisionError):
        with fs.transaction:
            fs.pipe_file("/data/c.csv", b"c")
            fs.rm("/data", recursive=True)
            1 / 0
    assert not store.exists("/data/c.csv") and store.exists("/data/a.csv")  # all rolled back
    assert not fs._intrans


def test_transaction_conflict_surfaces(fs: TxvfsFileSystem) -> None:
    fs.pipe_file("/n", b"0")
    with pytest.raises(txvfs.TransactionConflict):
        with fs.transaction:
            n = int(fs.cat("/n"))
            fs.store.write_bytes("/n", b"99")  # someone else commits first
            fs.pipe_file("/n", str(n + 1).encode())
    assert fs.cat("/n") == b"99"


def test_open_text_and_modes(fs: TxvfsFileSystem) -> None:
    with fs.open("/t.txt", "w") as f:
        f.write("h\u00e9\n")
    with fs.open("/t.txt", "r", encoding="utf-8") as f:
        assert f.read() == "h\u00e9\n"
    with fs.open("/t.txt", "ab") as f:
        f.write(b"more")
    with fs.open("/t.txt", "rb", block_size=16) as f:
        assert f.read().endswith(b"more")


def test_pandas_round_trip(tmp_path: pathlib.Path) -> None:
    import pandas as pd  # a test requirement (requirements.txt): missing is a failure, not a skip

    uri = os.fspath(tmp_path / "store")
    df = pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    df.to_csv("txvfs:///frames/df.csv", index=False, storage_options={"store": uri})
    back = pd.read_csv("txvfs:///frames/df.csv", storage_options={"store": uri})
    pd.testing.assert_frame_equal(df, back)


# ---------------------------------------------------------------- fsspec's abstract suites


class TxvfsFixtures(AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls) -> Iterator[TxvfsFileSystem]:
        store = txvfs.open("memory:")
        yield TxvfsFileSystem(store=store, skip_instance_cache=True)
        store.close()

    @pytest.fixture
    def fs_path(self) -> str:
        return "/"

    @pytest.fixture
    def fs_join(self) -> Any:
        return (
            lambda *parts: "/".join(p.rstrip("/") for p in parts[:-1]) + "/" + parts[-1].lstrip("/")
        )


class TestTxvfsCopy(AbstractCopyTests, TxvfsFixtures):  # type: ignore[misc]
    pass


class TestTxvfsGet(AbstractGetTests, TxvfsFixtures):  # type: ignore[misc]
    pass


class TestTxvfsPut(AbstractPutTests, TxvfsFixtures):  # type: ignore[misc]
    pass


class TestTxvfsPipe(AbstractPipeTests, TxvfsFixtures):  # type: ignore[misc]
    pass


class TestTxvfsOpen(AbstractOpenTests, TxvfsFixtures):  # type: ignore[misc]
    pass
