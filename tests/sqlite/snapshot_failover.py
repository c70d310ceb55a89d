"""A read transaction in a client process outlives the death of the store's owner process.

A client's read transaction reads its snapshot through the process that serves the store; when
that process dies, the snapshot goes with it. Real processes on one RocksDB store, ordered by
messages (no timing):

1. The owner process opens the store; a reader process (a client) begins a read transaction
   and reads; the owner is SIGKILLed; the reader reads pages it had not read yet: nobody
   committed meanwhile, so the read transaction goes on, at the same snapshot, and its write
   then succeeds.
2. The same, but a writer process commits after the owner's death and before the reader's next
   read: the reader's snapshot cannot be had again, and its next read fails with
   SQLITE_BUSY_SNAPSHOT ("database is locked": end the transaction and run it again, as after
   a refused write); after ROLLBACK it sees the writer's row.

    python3 snapshot_failover.py LIBPATH WORKDIR
"""

import os
import signal
import sqlite3
import subprocess
import sys
import urllib.parse

SQLITE_BUSY_SNAPSHOT = 517
BIG_ROWS = 2000


def load(lib):
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()


def connect(store):
    uri = f"file:/fo/shared.db?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}"
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    return con


def say(*words):
    print(*words, flush=True)


def expect(stream, want):
    line = stream.readline().strip()
    assert line == want, f"expected {want!r}, got {line!r}"


def count(con):
    return con.execute("SELECT count(*) FROM t").fetchone()[0]


def role_owner(store):
    """Opens the store first (so it serves the others) and waits to be killed."""
    con = connect(store)
    say("owner", count(con))
    sys.stdin.readline()


def role_reader(store):
    """Reads in one read transaction before and after the parent's 'go'."""
    con = connect(store)
    con.execute("BEGIN")
    say("reading", count(con))
    expect(sys.stdin, "go")
    try:
        # Pages of `big` were not read before: they come from the snapshot.
        n, total = con.execute("SELECT count(*), sum(length(pad)) FROM big").fetchone()
        say("read", n, total, count(con))
        con.execute("INSERT INTO t(v) VALUES ('from the reader')")
        con.execute("COMMIT")
        say("wrote", count(con))
    except sqlite3.OperationalError as e:
        say("refused", e.sqlite_errorcode, str(e).replace(" ", "_"))
        if con.in_transaction:
            con.execute("ROLLBACK")
        say("after", count(con))


def role_writer(store):
    con = connect(store)
    con.execute("INSERT INTO t(v) VALUES ('from the writer')")
    say("committed", count(con))


def spawn(lib, store, role):
    return subprocess.Popen(
        [sys.executable, __file__, "--role", lib, store, role],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def send(p, line):
    p.stdin.write(line + "\n")
    p.stdin.flush()


def finish(p):
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, f"child failed with status {p.returncode}"
    return out.split("\n")


def kill(p):
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)


def owner_dies_during_a_read(lib, store, rows, commit_meanwhile):
    o = spawn(lib, store, "owner")
    expect(o.stdout, f"owner {rows}")
    r = spawn(lib, store, "reader")
    expect(r.stdout, f"reading {rows}")
    kill(o)
    if commit_meanwhile:
        assert finish(spawn(lib, store, "writer"))[0] == f"committed {rows + 1}"
    send(r, "go")
    out = finish(r)
    if not commit_meanwhile:
        want = f"read {BIG_ROWS} {BIG_ROWS * 500} {rows}"
        assert out[0] == want, f"the read transaction goes on at its snapshot: {out[0]!r}"
        assert out[1] == f"wrote {rows + 1}", out[1]
        print("ok: the owner's death does not end a client's read transaction (no commit since)")
        return rows + 1
    want = f"refused {SQLITE_BUSY_SNAPSHOT} database_is_locked"
    assert out[0] == want, f"a lost, stale snapshot gives SQLITE_BUSY_SNAPSHOT: {out[0]!r}"
    assert out[1] == f"after {rows + 1}", out[1]
    print("ok: a snapshot lost with the owner, with a commit since: SQLITE_BUSY_SNAPSHOT")
    return rows + 1


def main():
    if sys.argv[1] == "--role":
        lib, store, role = sys.argv[2:5]
        load(lib)
        {"owner": role_owner, "reader": role_reader, "writer": role_writer}[role](store)
        return
    lib, work = sys.argv[1], sys.argv[2]
    load(lib)
    store = os.path.join(work, "failover-store")
    con = connect(store)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
    con.execute("INSERT INTO t(v) VALUES ('one'), ('two')")
    con.execute("CREATE TABLE big(id INTEGER PRIMARY KEY, pad BLOB)")
    con.execute(
        f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {BIG_ROWS}) "
        "INSERT INTO big(pad) SELECT randomblob(500) FROM s"
    )
    con.close()
    rows = owner_dies_during_a_read(lib, store, 2, commit_meanwhile=False)
    owner_dies_during_a_read(lib, store, rows, commit_meanwhile=True)


if __name__ == "__main__":
    main()
