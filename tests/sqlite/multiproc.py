"""Several processes write one SQLite database through txvfs at once, as they would on the unix
VFS: each worker runs read-modify-write transactions (read a counter, write it back plus one,
insert a row naming the worker and its sequence number) with a busy timeout, and prints each
one after COMMIT returns. The parent kills a worker with SIGKILL now and then (sometimes the
store's owner, sometimes while it holds SQLite's locks) and starts a new one. At the end every
acknowledged row is present, the counter equals the number of rows (no update was lost), and
PRAGMA integrity_check is ok.

    python3 multiproc.py LIBPATH WORKDIR [SEED]
"""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

WORKERS = 3
KILLS = 3
TXNS_PER_WORKER = 400


def connect(lib, store):
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    con = sqlite3.connect(
        f"file:/mp/shared.db?vfs=txvfs&store={store}", uri=True, isolation_level=None, timeout=60
    )
    return con


def worker(lib, store, wid, seed):
    rnd = random.Random(seed)
    con = connect(lib, store)
    for seq in range(TXNS_PER_WORKER):
        while True:
            # Deferred transactions read under SHARED and upgrade at the write (the upgrade may
            # be refused to avoid a deadlock: roll back and run again); IMMEDIATE ones take
            # RESERVED first.
            begin = rnd.choice(["BEGIN", "BEGIN IMMEDIATE"])
            try:
                con.execute(begin)
                n = con.execute("SELECT n FROM c WHERE k = 0").fetchone()[0]
                con.execute("UPDATE c SET n = ? WHERE k = 0", (n + 1,))
                con.execute(
                    "INSERT INTO t(w, seq, pad) VALUES (?, ?, randomblob(?))",
                    (wid, seq, rnd.randrange(10, 3000)),
                )
                con.execute("COMMIT")
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                if con.in_transaction:
                    con.execute("ROLLBACK")
        print(f"ack {wid} {seq}", flush=True)
    print("done", flush=True)


def main():
    lib, work = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    print(f"sqlite multiproc: seed {seed}, {WORKERS} workers, {KILLS} kills")
    rnd = random.Random(seed)
    store = os.path.join(work, "mp-store")
    con = connect(lib, store)
    con.execute(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER, seq INTEGER, pad BLOB, UNIQUE(w, seq))"
    )
    con.execute("CREATE TABLE c(k INTEGER PRIMARY KEY, n INTEGER)")
    con.execute("INSERT INTO c VALUES (0, 0)")
    con.close()

    acked = set()
    procs = {}
    next_id = [0]

    def start():
        wid = next_id[0]
        next_id[0] += 1
        p = subprocess.Popen(
            [sys.executable, __file__, "--worker", lib, store, str(wid), str(seed * 1000 + wid)],
            stdout=subprocess.PIPE,
            text=True,
        )
        os.set_blocking(p.stdout.fileno(), False)
        procs[wid] = (p, [""])

    def drain(wid):
        p, buf = procs[wid]
        try:
            data = p.stdout.read()
        except (BlockingIOError, TypeError):
            data = None
        if data:
            buf[0] += data
        *lines, buf[0] = buf[0].split("\n")
        for line in lines:
            if line.startswith("ack "):
                _, w, s = line.split()
                acked.add((int(w), int(s)))

    for _ in range(WORKERS):
        start()
    kills = 0
    deadline = time.time() + 600
    while time.time() < deadline:
        time.sleep(rnd.uniform(1.0, 3.0))
        for wid in list(procs):
            drain(wid)
        if kills < KILLS:
            wid = rnd.choice(sorted(procs))
            p, _ = procs[wid]
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
                drain(wid)
                print(
                    f"killed worker {wid} after {sum(1 for a in acked if a[0] == wid)} commits",
                    flush=True,
                )
                kills += 1
                del procs[wid]
                start()
        for wid in list(procs):
            p, _ = procs[wid]
            if p.poll() is not None:
                drain(wid)
                if p.returncode != 0:
                    sys.exit(f"worker {wid} failed with status {p.returncode}")
                del procs[wid]
        if not procs:
            break
    if procs:
        sys.exit("workers did not finish in time")

    con = connect(lib, store)
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    rows = set(con.execute("SELECT w, seq FROM t"))
    n = con.execute("SELECT n FROM c").fetchone()[0]
    missing = acked - rows
    print(f"{len(acked)} acknowledged, {len(rows)} rows, counter {n}, integrity {ok}")
    if ok != "ok":
        sys.exit(f"integrity_check: {ok}")
    if missing:
        sys.exit(f"{len(missing)} acknowledged rows missing, e.g. {sorted(missing)[:5]}")
    if n != len(rows):
        sys.exit(f"lost update: counter {n} but {len(rows)} rows")
    print("multiproc ok")


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
