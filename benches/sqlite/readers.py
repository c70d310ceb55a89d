"""Readers and a writer on one SQLite database, in separate processes: the writer's durable
one-row commits per second alone, then with READERS reader processes running read
transactions (BEGIN; a few point reads and a count over a range; COMMIT) in a loop, on txvfs
(one RocksDB store shared by the processes) and on stock SQLite in WAL mode
(synchronous=FULL, a file on the host). Prints a table: commits/s alone, with readers, the
ratio, and the writer's mean commit time alone.

    python3 benches/sqlite/readers.py LIBPATH WORKDIR [SECONDS] [READERS]
"""

import os
import sqlite3
import subprocess
import sys
import time
import urllib.parse

ROWS = 20000


def load(lib):
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()


def connect(kind, work):
    if kind == "txvfs":
        store = urllib.parse.quote(os.path.join(work, "bench-store"), safe="/:=")
        uri = f"file:/bench/readers.db?vfs=txvfs&store={store}"
        con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=60)
    else:
        con = sqlite3.connect(os.path.join(work, "stock.db"), isolation_level=None, timeout=60)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    return con


def setup(kind, work):
    con = connect(kind, work)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t(v) VALUES (randomblob(100))", [()] * ROWS)
    con.execute("COMMIT")
    con.close()


def writer(kind, work, seconds):
    con = connect(kind, work)
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        con.execute("INSERT INTO t(v) VALUES (randomblob(100))")
        n += 1
    elapsed = time.perf_counter() - start
    print(n, elapsed, flush=True)


def reader(kind, work):
    con = connect(kind, work)
    i = 0
    while True:
        con.execute("BEGIN")
        for k in range(5):
            con.execute(
                "SELECT v FROM t WHERE id = ?", ((i * 7919 + k * 104729) % ROWS + 1,)
            ).fetchone()
        con.execute(
            "SELECT count(*) FROM t WHERE id BETWEEN ? AND ?",
            (i % ROWS, i % ROWS + 500),
        ).fetchone()
        con.execute("COMMIT")
        i += 1


def run(lib, work, kind, role, *args):
    return subprocess.Popen(
        [sys.executable, __file__, "--role", lib, work, kind, role, *args],
        stdout=subprocess.PIPE,
        text=True,
    )


def measure(lib, work, kind, seconds, readers):
    readers_p = [run(lib, work, kind, "reader") for _ in range(readers)]
    time.sleep(1.0 if readers else 0)  # the readers are reading when the writer starts
    w = run(lib, work, kind, "writer", str(seconds))
    out, _ = w.communicate()
    for r in readers_p:
        r.kill()
        r.wait()
    n, elapsed = out.split()
    return int(n), float(elapsed)


def main():
    if sys.argv[1] == "--role":
        lib, work, kind, role, *rest = sys.argv[2:]
        if kind == "txvfs":
            load(lib)
        if role == "writer":
            writer(kind, work, float(rest[0]))
        else:
            reader(kind, work)
        return
    lib, work = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    readers = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    load(lib)
    print(
        f"| database | writer alone, commits/s | with {readers} readers, commits/s | ratio | commit alone, us |"
    )
    print("|---|---|---|---|---|")
    for kind in ("txvfs", "stock WAL"):
        setup(kind, work)
        n0, e0 = measure(lib, work, kind, seconds, 0)
        n1, e1 = measure(lib, work, kind, seconds, readers)
        a, b = n0 / e0, n1 / e1
        print(
            f"| {kind} | {a:.0f} | {b:.0f} | {b / a:.2f}x | {e0 / n0 * 1e6:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
