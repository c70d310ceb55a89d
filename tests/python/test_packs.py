"""Pack images (``pack:/path/image``) through the Python binding and fsspec: a store packed
with ``txvfs pack`` reads back the same, and every write fails with EROFS."""

from __future__ import annotations

import errno
import os
import pathlib
import subprocess

import fsspec
import pytest
import txvfs
from txvfs.fsspec import TxvfsFileSystem

CLI = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "release" / "txvfs"


@pytest.fixture
def image(tmp_path: pathlib.Path) -> str:
    """A pack built by the CLI from a RocksDB store with a few files."""
    src = os.fspath(tmp_path / "src")
    with txvfs.open(src, sync=False) as s:
        s.makedirs("/data/sub")
        s.write_bytes("/data/a.bin", bytes(range(256)) * 40)
        s.write_text("/data/sub/b.txt", "packed")
        s.symlink("sub/b.txt", "/data/link")
        s.setxattr("/data/a.bin", "user.tag", b"v1")
    img = os.fspath(tmp_path / "img.pack")
    subprocess.run([os.fspath(CLI), "pack", src, img], check=True, capture_output=True)
    return img


def test_store_api_reads_a_pack(image: str) -> None:
    with txvfs.open("pack:" + image) as p:
        assert p.read_bytes("/data/a.bin") == bytes(range(256)) * 40
        assert p.read_text("/data/link") == "packed"
        assert sorted(p.listdir("/data")) == ["a.bin", "link", "sub"]
        assert p.getxattr("/data/a.bin", "user.tag") == b"v1"
        assert p.stat("/data/a.bin").st_size == 10240
        with pytest.raises(OSError) as e:
            p.write_text("/data/new.txt", "x")
        assert e.value.errno == errno.EROFS
        with pytest.raises(OSError) as e:
            p.remove("/data/a.bin")
        assert e.value.errno == errno.EROFS
        assert p.exists("/data/a.bin") and not p.exists("/data/new.txt")


def test_fsspec_reads_a_pack(image: str) -> None:
    fs = fsspec.filesystem("txvfs", store="pack:" + image)
    assert isinstance(fs, TxvfsFileSystem)
    assert fs.cat("/data/sub/b.txt") == b"packed"
    assert sorted(fs.ls("/data", detail=False)) == ["/data/a.bin", "/data/link", "/data/sub"]
    with pytest.raises(OSError) as e:
        fs.pipe("/data/x", b"1")
    assert e.value.errno == errno.EROFS


def test_damaged_pack_is_refused(image: str) -> None:
    with open(image, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(OSError) as e:
        with txvfs.open("pack:" + image) as p:
            p.read_bytes("/data/a.bin")
            p.read_bytes("/data/sub/b.txt")
    assert "corrupt pack image" in str(e.value)
