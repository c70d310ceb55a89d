"""The Python binding and SQLite (through Python's sqlite3) on a live FoundationDB cluster.

Run by tests/foundationdb/run as: python3 bindings.py CLUSTER-FILE SQLITE-EXTENSION, with the
txvfs package on PYTHONPATH. Each store gets a prefix of its own. The process must then exit
with status 0 (FoundationDB's network is stopped at exit; it used to die of SIGSEGV).
"""

import sqlite3
import sys
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


python_binding()
sqlite_on_fdb()
