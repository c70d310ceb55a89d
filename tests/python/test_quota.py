"""Quotas on directory trees: set, read, remove; EDQUOT naming the tree and changing nothing;
EXDEV across trees; nested trees; bad input raises clear errors; a transaction."""

from __future__ import annotations

import errno

import pytest
import txvfs


def test_set_read_remove(store: txvfs.Store) -> None:
    store.mkdir("/q")
    assert store.quota("/q") is None
    store.set_quota("/q", bytes=1000, inodes=5)
    q = store.quota("/q")
    assert isinstance(q, txvfs.Quota)
    assert (q.path, q.bytes_limit, q.inodes_limit) == ("/q", 1000, 5)
    assert (q.bytes_used, q.inodes_used, q.parent) == (0, 1, None)
    assert repr(q).startswith("Quota(path='/q'")
    store.write_bytes("/q/a", b"x" * 600)
    q = store.quota("/q/a")
    assert q is not None and (q.bytes_used, q.inodes_used) == (600, 2)
    store.set_quota("/q", bytes=2000)  # new limits keep the usage
    q = store.quota("/q")
    assert q is not None and (q.bytes_limit, q.inodes_limit, q.bytes_used) == (2000, None, 600)
    store.remove_quota("/q")
    assert store.quota("/q") is None
    with pytest.raises(FileNotFoundError):
        store.remove_quota("/q")


def test_edquot_names_the_tree_and_changes_nothing(store: txvfs.Store) -> None:
    store.makedirs("/a/b")
    store.set_quota("/a", bytes=100)
    store.set_quota("/a/b", inodes=3)
    store.write_bytes("/a/b/f", b"1" * 100)
    before = store.statvfs()
    with pytest.raises(OSError) as e:
        store.write_bytes("/a/b/g", b"2")
    assert e.value.errno == errno.EDQUOT
    assert str(e.value.strerror).startswith("/a:")
    store.write_bytes("/a/b/g", b"")  # the third inode of /a/b
    with pytest.raises(OSError) as e:
        store.mkdir("/a/b/h")
    assert e.value.errno == errno.EDQUOT and "/a/b:" in str(e.value)
    assert not store.exists("/a/b/h")
    assert store.statvfs().f_ffree == before.f_ffree - 1
    q = store.quota("/a")
    assert q is not None and (q.bytes_used, q.inodes_used) == (100, 4)


def test_exdev_across_trees(store: txvfs.Store) -> None:
    store.mkdir("/q")
    store.mkdir("/o")
    store.write_bytes("/o/f", b"f")
    store.set_quota("/q", bytes=10)
    for call in (lambda: store.rename("/o/f", "/q/f"), lambda: store.link("/o/f", "/q/f")):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EXDEV
    assert store.exists("/o/f") and not store.exists("/q/f")


def test_bad_input(store: txvfs.Store) -> None:
    store.mkdir("/d")
    store.write_bytes("/f", b"f")
    with pytest.raises(OSError) as e:
        store.set_quota("/d")  # no limit
    assert e.value.errno == errno.EINVAL and "/d:" in str(e.value)
    with pytest.raises(OSError) as e:
        store.set_quota("/d", bytes=0)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        store.set_quota("/d", bytes=2**63)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OverflowError):
        store.set_quota("/d", bytes=-1)
    with pytest.raises(TypeError):
        store.set_quota("/d", bytes="10")  # type: ignore[arg-type]
    with pytest.raises(NotADirectoryError):
        store.set_quota("/f", bytes=10)
    with pytest.raises(FileNotFoundError):
        store.quota("/nope")
    assert store.quota("/d") is None


def test_quota_in_a_transaction(store: txvfs.Store) -> None:
    store.mkdir("/jobs")
    with store.transaction() as tx:
        tx.set_quota("/jobs", bytes=10)
        tx.write_bytes("/jobs/a", b"0123456789")
        q = tx.quota("/jobs")
        assert q is not None and q.bytes_used == 10
    with pytest.raises(OSError) as e:
        store.write_bytes("/jobs/b", b"!")
    assert e.value.errno == errno.EDQUOT
    assert not store.exists("/jobs/b")
