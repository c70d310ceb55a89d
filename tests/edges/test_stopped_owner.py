"""A stopped owner (SIGSTOP, as Ctrl-Z, a debugger or a paused container) must not freeze the
other processes of a shared store (issue 25): through Python, the CLI and the SQLite VFS, a call
fails with EBUSY once the store's owner_timeout (here 2 s) has passed, with a message naming the
owner's pid and saying it is stopped; after SIGCONT everything works again."""

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import txvfs
from conftest import sqlite_with_txvfs

TIMEOUT = 2  # seconds, the owner_timeout the clients ask for
LATE = 20  # a generous bound on how late the error may come

OWNER = """
import sys, time, txvfs
s = txvfs.open(sys.argv[1])
s.write_bytes("/f", b"hello")
print("ready", flush=True)
time.sleep(600)
"""


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 1 :].split()[0]


class Owner:
    """A Python process that owns the store at `path`."""

    def __init__(self, path: str):
        self.p = subprocess.Popen(
            [sys.executable, "-c", OWNER, path], stdout=subprocess.PIPE, text=True
        )
        assert self.p.stdout.readline().strip() == "ready"
        self.pid = self.p.pid

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)
        while _state(self.pid) != "T":
            time.sleep(0.005)

    def cont(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()


@pytest.fixture
def owner(tmp_path):
    o = Owner(str(tmp_path / "store"))
    try:
        yield o
    finally:
        o.kill()


def _check_message(msg: str, pid: int) -> None:
    assert str(pid) in msg, f"the error names the owner's pid: {msg}"
    assert "stopped" in msg, f"the error says the owner is stopped: {msg}"


def test_python_client_gets_ebusy_naming_the_stopped_owner(owner, tmp_path):
    s = txvfs.open(f"{tmp_path / 'store'}?owner_timeout={TIMEOUT}")
    assert s.read_bytes("/f") == b"hello"
    owner.stop()
    # What this client's cache holds it reads without the owner; a write needs the owner.
    assert s.read_bytes("/f") == b"hello"
    start = time.monotonic()
    with pytest.raises(OSError) as e:
        s.write_bytes("/f", b"changed")
    waited = time.monotonic() - start
    assert e.value.errno == errno.EBUSY, e.value
    assert TIMEOUT <= waited < LATE, waited
    _check_message(str(e.value), owner.pid)
    owner.cont()
    assert s.read_bytes("/f") == b"hello", "a write that timed out changed nothing"
    s.write_bytes("/g", b"after")
    assert s.read_bytes("/g") == b"after"


def test_cli_gets_ebusy_naming_the_stopped_owner(owner, tmp_path):
    cli = [
        os.environ["TXVFS_CLI"],
        "--store",
        f"{tmp_path / 'store'}?owner_timeout={TIMEOUT}",
        "cat",
        "/f",
    ]
    owner.stop()
    start = time.monotonic()
    r = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    waited = time.monotonic() - start
    assert r.returncode != 0, r
    assert TIMEOUT <= waited < LATE, waited
    _check_message(r.stderr, owner.pid)
    owner.cont()
    r = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "hello"), r


def test_sqlite_gets_an_error_within_the_deadline(owner, tmp_path):
    sqlite_with_txvfs()  # registers the txvfs VFS in this process
    store = f"{tmp_path / 'store'}%3Fowner_timeout%3D{TIMEOUT}"
    con = sqlite3.connect(f"file:/app.db?vfs=txvfs&store={store}", uri=True, isolation_level=None)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES ('before')")
    owner.stop()
    start = time.monotonic()
    with pytest.raises(sqlite3.OperationalError):
        con.execute("INSERT INTO t VALUES ('during')")
    waited = time.monotonic() - start
    assert TIMEOUT <= waited < LATE, waited
    owner.cont()
    con.execute("INSERT INTO t VALUES ('after')")
    assert [r[0] for r in con.execute("SELECT x FROM t")] == ["before", "after"]
