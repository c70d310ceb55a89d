"""Processes killed (SIGKILL) while holding something on a shared store: a flock, an SQLite
write lock (RESERVED), a pinned snapshot (an open transaction). Whether the killed process
owned the store or was a client, the others go on: the kernel drops the killed process's lock
on the store's txvfs.alive, so a dead client's lock stops counting at once (the waiter's first
try gets it) and a dead owner's within the failover (a client takes the store over: well
under a second here), and what the killed process had not committed is not there."""

import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import txvfs
from conftest import sqlite_with_txvfs

RELEASE_BOUND = 1.0  # seconds; a dead holder's lock is free at once, or after a failover

HOLD_FLOCK = """
import sys, time, fcntl, txvfs
s = txvfs.open(sys.argv[1])
f = s.open_raw("/lockfile", 0o102)  # O_RDWR | O_CREAT
f.flock(fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""

HOLD_RESERVED = """
import sys, time, sqlite3
boot = sqlite3.connect(":memory:"); boot.enable_load_extension(True); boot.load_extension(sys.argv[2])
con = sqlite3.connect(f"file:/app.db?vfs=txvfs&store={sys.argv[1]}", uri=True, isolation_level=None)
con.execute("BEGIN IMMEDIATE")
con.execute("INSERT INTO t VALUES ('from the killed process')")
print("held", flush=True)
time.sleep(600)
"""

HOLD_SNAPSHOT = """
import sys, time, txvfs
s = txvfs.open(sys.argv[1])
tx = txvfs.Transaction(s)
tx.read_bytes("/data")
tx.write_bytes("/from-killed", b"never committed")
print("held", flush=True)
time.sleep(600)
"""


def _start(code: str, *args: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    assert line == "held", f"holder said {line!r}"
    return p


def _kill(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait()


@pytest.mark.parametrize("killed", ["owner", "client"])
def test_a_killed_flock_holder_loses_the_lock_within_the_lease(tmp_path, killed):
    path = str(tmp_path / "store")
    store = None
    if killed == "client":
        store = txvfs.open(path)  # this process owns the store; the holder is a client
        store.write_bytes("/lockfile", b"")
    holder = _start(HOLD_FLOCK, path)
    if store is None:
        store = txvfs.open(path)  # the holder owns the store; this process is its client
    f = store.open_raw("/lockfile", os.O_RDWR)
    with pytest.raises(BlockingIOError):
        f.flock(fcntl.LOCK_EX | fcntl.LOCK_NB)
    _kill(holder)
    start = time.monotonic()
    tries = 0
    while True:
        tries += 1
        try:
            f.flock(fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except (BlockingIOError, OSError) as e:
            waited = time.monotonic() - start
            assert waited < RELEASE_BOUND, (
                f"the killed holder's flock still held after {waited:.2f} s: {e}"
            )
            time.sleep(0.02)
    waited = time.monotonic() - start
    print(f"flock granted {waited:.3f} s ({tries} tries) after the holder ({killed}) was killed")
    if killed == "client":
        assert tries == 1, f"a dead client's flock still counted ({tries} tries, {waited:.3f} s)"
    f.close()
    store.close()


@pytest.mark.parametrize("killed", ["owner", "client"])
def test_a_killed_sqlite_writer_releases_reserved_within_the_lease(tmp_path, killed):
    path = str(tmp_path / "store")
    lib = os.environ["TXVFS_SQLITE_LIB"]
    sqlite_with_txvfs().close()
    uri = f"file:/app.db?vfs=txvfs&store={path}"
    keep = None
    if killed == "client":
        keep = txvfs.open(path)  # this process owns the store
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=0)
    con.execute("CREATE TABLE IF NOT EXISTS t(v TEXT)")
    con.close()
    if killed == "owner":
        # Let the holder own the store: nothing of this process may hold it now.
        del con
    holder = _start(HOLD_RESERVED, path, lib.removesuffix(".so"))
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=0)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        con.execute("BEGIN IMMEDIATE")
    con.close()
    _kill(holder)
    start = time.monotonic()
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=RELEASE_BOUND)
    con.execute("BEGIN IMMEDIATE")
    waited = time.monotonic() - start
    con.execute("INSERT INTO t VALUES ('after')")
    con.execute("COMMIT")
    print(f"RESERVED granted {waited:.3f} s after the holder ({killed}) was killed")
    assert waited < RELEASE_BOUND, waited
    assert con.execute("SELECT v FROM t").fetchall() == [("after",)]
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    if keep is not None:
        keep.close()


def test_a_client_killed_with_a_snapshot_pinned_stalls_nobody(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/data", b"v0")
    holder = _start(HOLD_SNAPSHOT, path)
    for i in range(200):
        store.write_bytes("/data", f"v{i}".encode())
    _kill(holder)
    for i in range(200):
        store.write_bytes("/data", f"w{i}".encode())
    assert not store.exists("/from-killed")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, txvfs\nwith txvfs.open(sys.argv[1]) as s:\n"
            " s.write_bytes('/next', s.read_bytes('/data'))",
            path,
        ],
        check=True,
    )
    assert out.returncode == 0 and store.read_bytes("/next") == b"w199"
    store.close()
