"""Snapshots and clones from Python: a snapshot of an open store, named snapshots opened by
URI, and a writable clone of one (issue 17)."""

import errno

import pytest
import txvfs


def test_snapshot_is_a_read_only_view_of_one_instant(tmp_path):
    with txvfs.open(str(tmp_path / "s")) as store:
        store.write_bytes("/a", b"old")
        with store.snapshot() as snap:
            store.write_bytes("/a", b"new")
            store.write_bytes("/b", b"added")
            assert snap.read_bytes("/a") == b"old"
            assert not snap.exists("/b")
            with pytest.raises(OSError) as e:
                snap.write_bytes("/a", b"x")
            assert e.value.errno == errno.EROFS
        assert store.read_bytes("/a") == b"new"


def test_named_snapshot_by_uri_and_a_clone_of_it(tmp_path):
    path = str(tmp_path / "s")
    with txvfs.open(path) as store:
        store.makedirs("/d")
        store.write_bytes("/d/f", b"v1")
        uri = store.create_snapshot("v1")
        store.write_bytes("/d/f", b"v2")
        assert store.snapshots() == ["v1"]
        assert store.snapshot_uri("v1") == uri
    with txvfs.open(uri) as snap:
        assert snap.read_bytes("/d/f") == b"v1"
        with pytest.raises(OSError) as e:
            snap.remove("/d/f")
        assert e.value.errno == errno.EROFS
    upper = str(tmp_path / "clone")
    with txvfs.clone(uri, upper) as c:
        assert c.read_bytes("/d/f") == b"v1"
        c.rename("/d", "/e")
        c.write_bytes("/e/g", b"new")
        c.remove("/e/f")
    with txvfs.open(upper) as c:
        assert c.listdir("/") == ["e"]
        assert c.listdir("/e") == ["g"]
    assert txvfs.fsck(upper).clean
    with txvfs.open(uri) as snap:
        assert snap.read_bytes("/d/f") == b"v1"
    with txvfs.open(path) as store:
        store.delete_snapshot("v1")
        assert store.snapshots() == []
        with pytest.raises(FileNotFoundError):
            store.delete_snapshot("v1")


def test_clone_of_a_live_store_is_refused(tmp_path):
    path = str(tmp_path / "s")
    txvfs.open(path).close()
    with pytest.raises(OSError) as e:
        txvfs.clone(path, str(tmp_path / "c"))
    assert e.value.errno == errno.EINVAL
