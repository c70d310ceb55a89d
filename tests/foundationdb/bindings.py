"""The Python binding and SQLite (through Python's sqlite3) on a live FoundationDB cluster.

Run by tests/foundationdb/run as: python3 bindings.py CLUSTER-FILE SQLITE-EXTENSION, with the
txvfs package on PYTHONPATH. Each store gets a prefix of its own. The process must then exit
with status 0 (FoundationDB's network is stopped at exit; it used to die of SIGSEGV).
"""

import asyncio
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse

import txvfs

CLUSTER, LIB = sys.argv[1], sys.argv[2]
RUN = time.time_ns()


def uri(name):
    return f"fdb:{CLUSTER}?prefix=py-{name}-{RUN}"


def python_binding():
    u = uri("posix")
    with txvfs.open(u) as s:
        s.mkdir("/d")
        s.write_bytes("/d/a", b"hello")
        s.rename("/d/a", "/d/b")
        assert s.read_bytes("/d/b") == b"hello"
        assert s.listdir("/d") == ["b"], s.listdir("/d")
        assert s.stat("/d/b").st_size == 5
        with s.transaction() as tx:
            tx.write_bytes("/d/c", b"in a transaction")
            tx.remove("/d/b")
        assert sorted(s.listdir("/d")) == ["c"]
    # Another open of the same URI (another client of the cluster) sees it all.
    with txvfs.open(u) as s:
        assert s.read_bytes("/d/c") == b"in a transaction"
    print("python binding on fdb: ok")


# Opens the store, says "ready", and on "go" writes a file and prints when its commit returned.
COMMIT_ON_GO = """
import sys, time, txvfs
with txvfs.open(sys.argv[1]) as s:
    print("ready", flush=True)
    sys.stdin.readline()
    s.write_bytes(sys.argv[2], b"x")
    print(time.monotonic(), flush=True)
"""


def change_feed():
    u = uri("feed")
    with txvfs.open(u) as s:
        s.set_change_feed(True)  # before the writer opens the store: it reads the setting then
    # Two opens of one URI are two clients of the cluster: the watcher is woken by a
    # FoundationDB watch, not by its own process's commits.
    with txvfs.open(u) as s, txvfs.open(u) as writer:
        w = s.watch(prefix="/docs")
        writer.makedirs("/docs")
        writer.write_bytes("/docs/a.txt", b"hi")
        writer.write_bytes("/elsewhere", b"filtered out")
        writer.rename("/docs/a.txt", "/docs/b.txt")
        got = []
        while len(got) < 3:
            batch = w.wait(10)
            assert batch, f"no change within 10 s after {got}"
            got += [(c.kind, c.path, c.to) for c in batch]
        assert got == [
            ("created", "/docs", None),
            ("created", "/docs/a.txt", None),
            ("renamed", "/docs/a.txt", "/docs/b.txt"),
        ], got
        saved = w.cursor
        assert w.wait(0.2) == []
        # A commit of another process wakes a waiting wait() through FoundationDB's watch,
        # well before the watcher's 5 s safety net would (PUSHED_RECHECK).
        other = subprocess.Popen(
            [sys.executable, "-c", COMMIT_ON_GO, u, "/docs/late"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert other.stdout.readline().strip() == "ready"
        go = threading.Timer(0.2, lambda: (other.stdin.write("go\n"), other.stdin.flush()))
        go.start()
        late = w.wait(30)
        woken = time.monotonic()
        go.join()
        committed = float(other.stdout.readline())  # CLOCK_MONOTONIC: one clock for all processes
        assert other.wait(60) == 0
        assert [(c.kind, c.path) for c in late] == [("created", "/docs/late")], late
        assert woken - committed < 1.0, f"woken {woken - committed:.3f} s after the commit"
        print(
            f"python change feed on fdb: woken {woken - committed:.3f} s after another process's commit"
        )

        # asyncio, resuming from the saved cursor.
        async def first_change():
            async for change in s.watch(since=saved):
                return change.path

        assert asyncio.run(asyncio.wait_for(first_change(), 30)) == "/docs/late"
        try:
            s.watch(since=saved[:-4] + "zzzz")
            raise AssertionError("a garbage cursor was accepted")
        except OSError as e:
            assert "not a change feed cursor" in str(e), e
    print("python change feed on fdb: ok")


def sqlite_on_fdb():
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(LIB)
    boot.close()
    store = urllib.parse.quote(uri("sqlite"), safe="/:=")
    name = f"file:app.db?vfs=txvfs&store={store}"
    try:
        con = sqlite3.connect(name, uri=True, isolation_level=None)
    except sqlite3.OperationalError as e:
        # SQLite says no more than "unable to open": say which store, and what txvfs says.
        try:
            txvfs.open(uri("sqlite")).close()
        except Exception as why:
            raise SystemExit(f"sqlite on fdb: {e}: {why}") from why
        raise
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
    con.execute("BEGIN")
    for i in range(2000):
        con.execute("INSERT INTO t(v) VALUES (?)", ("x" * 500 + str(i),))
    con.execute("COMMIT")
    other = sqlite3.connect(name, uri=True, isolation_level=None)
    assert other.execute("SELECT count(*) FROM t").fetchone()[0] == 2000
    assert other.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    other.close()
    con.close()
    print("sqlite on fdb: ok")


def sqlite_commit_group_on_fdb():
    # Two databases of one fdb: store attached in one commit group: one transaction over
    # both is one txvfs commit, seen whole by another connection.
    store = urllib.parse.quote(uri("group"), safe="/:=")

    def name(db):
        return f"file:{db}?vfs=txvfs&store={store}&group=g"

    con = sqlite3.connect(name("main.db"), uri=True, isolation_level=None)
    con.execute(f"ATTACH '{name('other.db')}' AS other")
    con.execute("CREATE TABLE main.a(x)")
    con.execute("CREATE TABLE other.b(x)")

    def stats():
        row = con.execute("PRAGMA txvfs_stats").fetchone()[0]
        return {k: int(v) for k, v in (kv.split("=") for kv in row.split())}

    before = stats()
    con.execute("BEGIN")
    for i in range(100):
        con.execute("INSERT INTO main.a VALUES (?)", (i,))
        con.execute("INSERT INTO other.b VALUES (?)", (i,))
    con.execute("COMMIT")
    after = stats()
    assert after["grouped"] == before["grouped"] + 1, (before, after)
    assert after["commits"] == before["commits"] + 1, (before, after)
    reader = sqlite3.connect(name("other.db"), uri=True, isolation_level=None)
    assert reader.execute("SELECT count(*) FROM b").fetchone()[0] == 100
    for c, schema in ((con, "main"), (con, "other"), (reader, "main")):
        assert c.execute(f"PRAGMA {schema}.integrity_check").fetchone()[0] == "ok"
    reader.close()
    con.close()
    print("sqlite commit group on fdb: ok")


def sqlite_wal_readers_on_fdb():
    # journal_mode=WAL on a live cluster: a reader keeps its snapshot while a writer in
    # another process commits without waiting; the reader's write then gets
    # SQLITE_BUSY_SNAPSHOT (517), and its next read transaction sees the new row.
    store = urllib.parse.quote(uri("wal"), safe="/:=")
    name = f"file:wal.db?vfs=txvfs&store={store}"
    con = sqlite3.connect(name, uri=True, isolation_level=None)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.execute("CREATE TABLE t(v)")
    con.execute("INSERT INTO t VALUES (1)")
    con.execute("BEGIN")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    writer = (
        "import sqlite3, sys\n"
        "boot = sqlite3.connect(':memory:'); boot.enable_load_extension(True)\n"
        "boot.load_extension(sys.argv[1]); boot.close()\n"
        "c = sqlite3.connect(sys.argv[2], uri=True, isolation_level=None, timeout=0)\n"
        "assert c.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'\n"
        "c.execute('INSERT INTO t VALUES (2)')\n"
        "print(c.execute('SELECT count(*) FROM t').fetchone()[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", writer, LIB, name], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip() == "2", (out.stdout, out.stderr)
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1, "the snapshot moved"
    try:
        con.execute("INSERT INTO t VALUES (3)")
        raise SystemExit("sqlite wal on fdb: a stale reader's write was accepted")
    except sqlite3.OperationalError as e:
        assert e.sqlite_errorcode == 517, (e.sqlite_errorcode, e)
    con.execute("ROLLBACK")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    print("sqlite wal readers and writer on fdb: ok")


python_binding()
change_feed()
sqlite_on_fdb()
sqlite_commit_group_on_fdb()
sqlite_wal_readers_on_fdb()
