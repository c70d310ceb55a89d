"""kill -9 crash test: a child process commits SQLite write transactions through txvfs on a
RocksDB store in a loop and reports each commit after COMMIT returns; the parent kills it
with SIGKILL at a random moment, then the next child opens the database, checks
PRAGMA integrity_check and that it holds exactly the committed rows, and goes on writing.

    python3 crash.py LIBPATH WORKDIR KILLS single|attach|group

single: one database, no commit group (the default path); each cycle picks a journal mode
        (delete, truncate, persist, memory, off), a synchronous setting (full, normal, off)
        and a cache size (tiny caches make SQLite write pages before COMMIT), and sometimes a
        large transaction.
attach: a main database and two attached ones, no commit group: SQLite's super-journal
        (journal modes delete, truncate, persist; synchronous full or normal) makes each
        transaction one txvfs commit. Every transaction inserts the same row into all three:
        after a kill all three hold the same rows.
group:  the same three databases in an explicit commit group (group=g), in every journal
        mode and synchronous setting.
"""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time


def child(lib, store, mode, seed):
    rnd = random.Random(seed)
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    group = "&group=g" if mode == "group" else ""
    con = sqlite3.connect(
        f"file:/crash/main.db?vfs=txvfs&store={store}{group}",
        uri=True,
        isolation_level=None,
        timeout=60,
    )
    schemas = ["main"]
    if mode in ("attach", "group"):
        for s in ("b", "c"):
            con.execute(f"ATTACH 'file:/crash/{s}.db?vfs=txvfs&store={store}{group}' AS {s}")
            schemas.append(s)
    for s in schemas:
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.t(id INTEGER PRIMARY KEY, n INTEGER, pad BLOB)"
        )
    # Verify what the killed predecessor left.
    state = []
    for s in schemas:
        ok = con.execute(f"PRAGMA {s}.integrity_check").fetchone()[0]
        n, mx, total = con.execute(
            f"SELECT count(*), coalesce(max(id), 0), coalesce(sum(n), 0) FROM {s}.t"
        ).fetchone()
        big = con.execute(f"SELECT count(*) FROM {s}.t WHERE id > 1000000").fetchone()[0]
        state.append(
            f"{s}:{ok}:{n - big}:{mx if mx < 1000000 else con.execute(f'SELECT max(id) FROM {s}.t WHERE id < 1000000').fetchone()[0] or 0}:{total}"
        )
    print("state " + " ".join(state), flush=True)
    if mode == "attach":
        # The modes in which SQLite uses a super-journal (and so tells the VFS the set).
        jm, sync = rnd.choice(["delete", "truncate", "persist"]), rnd.choice(["full", "normal"])
    else:
        jm, sync = (
            rnd.choice(["delete", "truncate", "persist", "memory", "off"]),
            rnd.choice(["full", "normal", "off"]),
        )
    cache = rnd.choice([5, 50, 2000])
    for s in schemas:
        got = con.execute(f"PRAGMA {s}.journal_mode={jm}").fetchone()[0]
        assert got == jm, (got, jm)
        con.execute(f"PRAGMA {s}.synchronous={sync}")
        con.execute(f"PRAGMA {s}.cache_size={cache}")
    nxt = max(int(x.split(":")[3]) for x in state) + 1
    big_id = 1000000 + nxt * 1000
    print("ready", flush=True)
    while True:
        con.execute("BEGIN")
        for s in schemas:
            con.execute(
                f"INSERT INTO {s}.t(id, n, pad) VALUES (?, ?, randomblob(?))",
                (nxt, nxt, rnd.choice([10, 500, 3000])),
            )
        if rnd.random() < 0.05:
            # A large transaction: many pages, spilled before COMMIT with small caches.
            for s in schemas:
                con.executemany(
                    f"INSERT INTO {s}.t(id, n, pad) VALUES (?, 0, randomblob(2000))",
                    [(big_id + k,) for k in range(300)],
                )
            big_id += 1000
        con.execute("COMMIT")
        print(f"committed {nxt}", flush=True)
        nxt += 1


def parent(lib, work, kills, mode):
    store = os.path.join(work, f"crash-{mode}")
    # A fixed seed (printed; TXVFS_SQLITE_CRASH_SEED picks another). The kill moments still
    # depend on timing.
    seed = int(os.environ.get("TXVFS_SQLITE_CRASH_SEED", "19"))
    rnd = random.Random()
    print(f"crash test {mode}: {kills} kills, seed {seed}", flush=True)
    rnd.seed(seed)
    last = 0  # last commit the child reported
    for cycle in range(kills + 1):
        p = subprocess.Popen(
            [sys.executable, __file__, "child", lib, store, mode, str(rnd.randrange(1 << 30))],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = p.stdout.readline().split()
        assert line and line[0] == "state", f"cycle {cycle}: child said {line}"
        rows = None
        for entry in line[1:]:
            s, ok, n, mx, total = entry.split(":")
            n, mx, total = int(n), int(mx), int(total)
            assert ok == "ok", f"cycle {cycle}: {s} integrity_check: {ok}"
            # Exactly the committed rows: 1..mx, where mx is the last reported commit or the
            # one that was in flight when the kill came.
            assert mx in (last, last + 1), (
                f"cycle {cycle}: {s} max {mx}, last reported commit {last}"
            )
            assert n == mx and total == mx * (mx + 1) // 2, (
                f"cycle {cycle}: {s} rows {n} sum {total} max {mx}"
            )
            assert rows is None or rows == mx, f"cycle {cycle}: databases disagree: {line}"
            rows = mx
        last = rows
        if cycle == kills:
            p.kill()
            p.wait()
            break
        assert p.stdout.readline().strip() == "ready"
        deadline = time.time() + rnd.uniform(0.02, 0.4)
        os.set_blocking(p.stdout.fileno(), False)
        while time.time() < deadline:
            time.sleep(0.005)
            for line in p.stdout.readlines():
                if line.startswith("committed"):
                    last = int(line.split()[1])
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        for line in p.stdout.readlines():  # anything written before the kill
            if line.startswith("committed"):
                last = int(line.split()[1])
        p.stdout.close()
    print(f"crash test {mode}: {kills} kills passed, {last} transactions committed", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        parent(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
