"""Snapshots from a process that does not own the store (issue 25): a user cannot predict which
process is the owner, so `Store.snapshot()` and named snapshots work in a client too (the
owner pins the snapshot for the client, and creates named snapshots at its request)."""

import errno
import subprocess
import sys

import pytest
import txvfs

OWNER = """
import sys, time, txvfs
s = txvfs.open(sys.argv[1])
s.write_bytes("/f", b"v1")
print("ready", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def owner(tmp_path):
    p = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "store")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline().strip() == "ready"
        yield p
    finally:
        p.kill()
        p.wait()


def test_a_client_takes_a_snapshot_and_a_named_snapshot(owner, tmp_path):
    with txvfs.open(f"{tmp_path / 'store'}?owner_timeout=5") as store:
        with store.snapshot() as snap:
            store.write_bytes("/f", b"v2")
            store.write_bytes("/g", b"added")
            assert snap.read_bytes("/f") == b"v1"
            assert not snap.exists("/g")
            with pytest.raises(OSError) as e:
                snap.write_bytes("/f", b"x")
            assert e.value.errno == errno.EROFS
        uri = store.create_snapshot("n1")
        assert store.snapshots() == ["n1"]
        store.write_bytes("/f", b"v3")
        with pytest.raises(FileExistsError):
            store.create_snapshot("n1")
    with txvfs.open(uri) as named:
        assert named.read_bytes("/f") == b"v2"
        assert named.read_bytes("/g") == b"added"


def test_a_client_snapshot_gone_with_its_owner_raises_eio(owner, tmp_path):
    """Issue 37: the owner's death takes a client's snapshot with it; its reads raise the
    builtin OSError with errno EIO (as a lost lock does, and as NFS reports lost locks), not a
    txvfs code, and the store goes on."""
    with txvfs.open(f"{tmp_path / 'store'}?owner_timeout=5") as store:
        with store.snapshot() as snap:
            assert snap.read_bytes("/f") == b"v1"
            owner.kill()
            owner.wait()
            with pytest.raises(OSError) as e:
                snap.read_bytes("/f")
            assert e.value.errno == errno.EIO, repr(e.value)
            assert not isinstance(e.value, txvfs.TxvfsError), repr(e.value)
            assert "snapshot" in str(e.value)
        store.write_bytes("/g", b"after")
        assert store.read_bytes("/f") == b"v1"
