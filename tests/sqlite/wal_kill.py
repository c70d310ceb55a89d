"""SIGKILL test for journal_mode=WAL: writer and reader processes (Python's sqlite3 loading the
extension) share one database on one RocksDB store, every connection running
`PRAGMA journal_mode=WAL` first, as applications do; the parent SIGKILLs a random one of them
at random instants (every other kill the process serving the store, when it is one of them;
readers inside read transactions, writers holding SQLite's locks or committing) and starts another in its place.

Writers run read-modify-write transactions (BEGIN or BEGIN IMMEDIATE): a counter plus one, a
row naming the worker and its sequence number, a transfer between two of ten accounts, and
now and then a few hundred rows of padding (pages spilled before COMMIT with a small cache);
each acknowledges its transaction after COMMIT returns, in a log file of its own (written
line by line, so a kill keeps what was written). A deferred writer whose snapshot went stale
gets SQLITE_BUSY_SNAPSHOT, rolls back and runs again.

Readers hold read transactions that read the counter, the rows and the accounts' total twice,
a few milliseconds apart: within one transaction both reads agree (a snapshot), the counter
equals the rows (no half transaction) and the total never changes; a reader's counter never
goes back. A read transaction whose snapshot died with the process serving the store, the
database changed since, ends with SQLITE_BUSY_SNAPSHOT and runs again (counted). Now and then a reader tries to write in its read transaction (a stale one must get
SQLITE_BUSY_SNAPSHOT; one that succeeds acknowledges like a writer), or runs
PRAGMA wal_checkpoint (0|-1|-1: nothing to copy).

Afterwards (everyone killed): PRAGMA integrity_check is ok, every acknowledged transaction is
present, the counter equals the rows (no lost update), the accounts' total is unchanged, the
database still answers `wal`, and every worker and reader made progress.

    python3 wal_kill.py LIBPATH WORKDIR [SECONDS [SEED]]

SECONDS (default 30; $TXVFS_SQLITE_WALKILL_SECONDS) is how long the kills go on; SEED (default
28; $TXVFS_SQLITE_WALKILL_SEED; printed) fixes every random choice but not the instant a kill
lands, which depends on timing.
"""

import ctypes
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse

SQLITE_BUSY_SNAPSHOT = 517
WRITERS = 2
READERS = 2
ACCOUNTS = 10
BALANCE = 1000
# How long any process waits for a lock: a kill never makes one wait for ever.
BUSY_TIMEOUT_S = 30


def connect(lib, store):
    """A connection in WAL mode (the extension loaded first), as an application opens one."""
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()
    uri = f"file:/wk/shared.db?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}"
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    mode = con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    assert mode == "wal", f"PRAGMA journal_mode=WAL answered {mode!r}"
    return con


def retryable(e):
    """SQLITE_BUSY (a lock held past the timeout, or refused to avoid a deadlock) and
    SQLITE_BUSY_SNAPSHOT both read "database is locked": roll back and run again."""
    return "locked" in str(e) or "busy" in str(e)


def write_txn(con, rnd, wid, seq):
    """One writer transaction, from after its BEGIN to COMMIT."""
    n = con.execute("SELECT n FROM c WHERE k = 0").fetchone()[0]
    con.execute("UPDATE c SET n = ? WHERE k = 0", (n + 1,))
    con.execute(
        "INSERT INTO t(w, seq, pad) VALUES (?, ?, randomblob(?))",
        (wid, seq, rnd.randrange(10, 3000)),
    )
    a, b = rnd.sample(range(ACCOUNTS), 2)
    amount = rnd.randrange(1, 50)
    con.execute("UPDATE acct SET bal = bal - ? WHERE id = ?", (amount, a))
    con.execute("UPDATE acct SET bal = bal + ? WHERE id = ?", (amount, b))
    if rnd.random() < 0.03:
        con.execute(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 300) "
            "INSERT INTO big(w, pad) SELECT ?, randomblob(1500) FROM s",
            (wid,),
        )
    if rnd.random() < 0.03:
        con.execute("DELETE FROM big WHERE id IN (SELECT id FROM big ORDER BY random() LIMIT 200)")
    con.execute("COMMIT")


def writer(con, rnd, wid, log):
    seq = 0
    while True:
        begin = rnd.choice(["BEGIN", "BEGIN IMMEDIATE"])
        try:
            con.execute(begin)
            write_txn(con, rnd, wid, seq)
        except sqlite3.OperationalError as e:
            if not retryable(e):
                raise
            if e.sqlite_errorcode == SQLITE_BUSY_SNAPSHOT:
                log("busy_snapshot")
            if con.in_transaction:
                con.execute("ROLLBACK")
            time.sleep(rnd.uniform(0, 0.01))
            continue
        log(f"ack {wid} {seq}")
        seq += 1


def observe(con):
    """(counter, rows, accounts' total) as this read transaction sees them."""
    n = con.execute("SELECT n FROM c WHERE k = 0").fetchone()[0]
    rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
    total = con.execute("SELECT sum(bal) FROM acct").fetchone()[0]
    return n, rows, total


def reader(con, rnd, wid, log):
    last = 0
    seq = 0
    while True:
        if rnd.random() < 0.05:
            got = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            assert tuple(got) == (0, -1, -1), f"wal_checkpoint answered {got}"
            log("checkpoint")
        con.execute("BEGIN")
        try:
            first = observe(con)
            time.sleep(rnd.uniform(0, 0.05))
            second = observe(con)
        except sqlite3.OperationalError as e:
            # The snapshot was lost with the process serving the store, and the database
            # changed since: the read transaction is over (SQLITE_BUSY_SNAPSHOT); run it again.
            if e.sqlite_errorcode != SQLITE_BUSY_SNAPSHOT:
                raise
            log("snapshot_lost")
            if con.in_transaction:
                con.execute("ROLLBACK")
            continue
        n, rows, total = first
        assert first == second, f"one read transaction saw {first} then {second}"
        assert n == rows, f"counter {n} but {rows} rows: a half transaction was visible"
        assert total == ACCOUNTS * BALANCE, f"accounts total {total}"
        assert n >= last, f"the counter went back from {last} to {n}"
        last = n
        if rnd.random() < 0.1:
            # A write in the read transaction: SQLITE_BUSY_SNAPSHOT if another process
            # committed since the snapshot, else an ordinary acknowledged transaction.
            try:
                write_txn(con, rnd, wid, seq)
                log(f"ack {wid} {seq}")
                seq += 1
                continue
            except sqlite3.OperationalError as e:
                if not retryable(e):
                    raise
                if e.sqlite_errorcode == SQLITE_BUSY_SNAPSHOT:
                    log("busy_snapshot")
                if con.in_transaction:
                    con.execute("ROLLBACK")
                time.sleep(rnd.uniform(0, 0.01))
                continue
        con.execute("COMMIT")
        log(f"read {n}")


def die_with_parent():
    """PR_SET_PDEATHSIG: the kernel SIGKILLs this worker when the parent dies, so a failed or
    interrupted run leaves no process behind (nor a pipe held open)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before prctl
        os._exit(1)


def worker(lib, store, role, wid, seed, logpath):
    die_with_parent()
    rnd = random.Random(seed)
    with open(logpath, "a", buffering=1) as f:

        def log(line):
            f.write(line + "\n")
            f.flush()

        con = connect(lib, store)
        con.execute(f"PRAGMA synchronous={rnd.choice(['FULL', 'NORMAL'])}")
        con.execute(f"PRAGMA cache_size={rnd.choice([5, 50, 2000])}")
        log("started")
        (writer if role == "writer" else reader)(con, rnd, wid, log)


def create(lib, store):
    con = connect(lib, store)
    con.executescript(
        f"""
        CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER, seq INTEGER, pad BLOB, UNIQUE(w, seq));
        CREATE TABLE c(k INTEGER PRIMARY KEY, n INTEGER);
        INSERT INTO c VALUES (0, 0);
        CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER);
        WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {ACCOUNTS - 1})
        INSERT INTO acct SELECT i, {BALANCE} FROM s;
        CREATE TABLE big(id INTEGER PRIMARY KEY, w INTEGER, pad BLOB);
        """
    )
    con.close()


def owner_pid(store):
    """The pid of the process serving the store, or None."""
    try:
        with open(os.path.join(store, "txvfs.owner")) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_log(path):
    """The complete lines of a worker's log (a kill may cut the last one short, or come
    before the log was made)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        data = f.read()
    return data.split("\n")[:-1]


def verify(lib, store, procs):
    acked, reads, snaps, lost, ckpts = set(), 0, 0, 0, 0
    for p in procs:
        lines = read_log(p["log"])
        p["acks"] = sum(1 for ln in lines if ln.startswith("ack "))
        p["reads"] = sum(1 for ln in lines if ln.startswith("read "))
        for ln in lines:
            if ln.startswith("ack "):
                _, w, s = ln.split()
                acked.add((int(w), int(s)))
        reads += p["reads"]
        snaps += lines.count("busy_snapshot")
        lost += lines.count("snapshot_lost")
        ckpts += lines.count("checkpoint")
    con = connect(lib, store)
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    rows = set(con.execute("SELECT w, seq FROM t"))
    n = con.execute("SELECT n FROM c").fetchone()[0]
    total = con.execute("SELECT sum(bal) FROM acct").fetchone()[0]
    mode = con.execute("PRAGMA journal_mode").fetchone()[0]
    con.close()
    print(
        f"wal kill: {len(acked)} acknowledged transactions, {len(rows)} rows, counter {n}, "
        f"{reads} read transactions checked, {snaps} SQLITE_BUSY_SNAPSHOT at a write, {lost} read transactions ended "
        f"by a lost snapshot, {ckpts} checkpoints, "
        f"integrity {ok}, journal_mode {mode}"
    )
    errors = []
    if ok != "ok":
        errors.append(f"integrity_check: {ok}")
    missing = acked - rows
    if missing:
        errors.append(f"{len(missing)} acknowledged rows missing, e.g. {sorted(missing)[:5]}")
    if n != len(rows):
        errors.append(f"lost update: counter {n} but {len(rows)} rows")
    if total != ACCOUNTS * BALANCE:
        errors.append(f"accounts total {total}, expected {ACCOUNTS * BALANCE}")
    if mode != "wal":
        errors.append(f"journal_mode {mode} after the run")
    for role in ("writer", "reader"):
        key = "acks" if role == "writer" else "reads"
        if not sum(p[key] for p in procs if p["role"] == role):
            errors.append(f"no {role} made progress")
    return errors


def main():
    lib, work = sys.argv[1], sys.argv[2]
    seconds = float(
        sys.argv[3] if len(sys.argv) > 3 else os.environ.get("TXVFS_SQLITE_WALKILL_SECONDS", 30)
    )
    seed = int(
        sys.argv[4] if len(sys.argv) > 4 else os.environ.get("TXVFS_SQLITE_WALKILL_SEED", 28)
    )
    print(
        f"wal kill: seed {seed} (TXVFS_SQLITE_WALKILL_SEED), {seconds:g} s of kills, "
        f"{WRITERS} writers, {READERS} readers",
        flush=True,
    )
    rnd = random.Random(seed)
    store = os.path.join(work, "walkill-store")
    logs = os.path.join(work, "walkill-logs")
    os.makedirs(logs, exist_ok=True)
    create(lib, store)

    procs = []  # every process started: role, id, Popen, log path

    def start(role):
        wid = len(procs)
        log = os.path.join(logs, f"{role}-{wid}.log")
        err = open(log + ".err", "w")  # the child keeps its own copy
        args = [sys.executable, __file__, "--worker", lib, store, role, str(wid)]
        p = subprocess.Popen(args + [str(rnd.randrange(1 << 30)), log], stderr=err)
        err.close()
        procs.append({"role": role, "id": wid, "p": p, "log": log, "killed": False})

    def check_alive(q):
        if q["p"].poll() is not None and not q["killed"]:
            with open(q["log"] + ".err") as f:
                sys.exit(
                    f"{q['role']} {q['id']} stopped by itself (status {q['p'].returncode}):\n"
                    + f.read()[-3000:]
                )

    kills = {"writer": 0, "reader": 0, "owner": 0}
    try:
        for role in ["writer"] * WRITERS + ["reader"] * READERS:
            start(role)
        end = time.time() + seconds
        while time.time() < end:
            time.sleep(rnd.uniform(0.1, 1.2))
            live = [q for q in procs if not q["killed"]]
            for q in live:
                check_alive(q)
            # Every other kill, the process serving the store (its pid in txvfs.owner), if it is one.
            owner = [q for q in live if q["p"].pid == owner_pid(store)]
            victim = owner[0] if owner and rnd.random() < 0.5 else rnd.choice(live)
            kills["owner"] += victim in owner
            victim["p"].send_signal(signal.SIGKILL)
            victim["p"].wait(timeout=30)
            victim["killed"] = True
            kills[victim["role"]] += 1
            start(victim["role"])
        for q in procs:
            if not q["killed"]:
                check_alive(q)
                q["p"].send_signal(signal.SIGKILL)
                q["p"].wait(timeout=30)
                q["killed"] = True
    finally:  # however the run ends, no worker outlives it
        for q in procs:
            if q["p"].poll() is None:
                q["p"].kill()
                q["p"].wait(timeout=30)
    print(
        f"wal kill: {kills['writer']} writers and {kills['reader']} readers killed "
        f"during the run ({kills['owner']} of them serving the store), {len(procs)} processes in all",
        flush=True,
    )
    errors = verify(lib, store, procs)
    if errors:
        sys.exit("wal kill FAILED: " + "; ".join(errors) + f" (logs in {logs}, seed {seed})")
    print("wal kill ok")


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        lib, store, role, wid, seed, log = sys.argv[2:8]
        worker(lib, store, role, int(wid), int(seed), log)
    else:
        main()
