"""Multi-database transactions: each transaction inserts one 100-byte row into each of K
databases attached to one connection, durably (synchronous=FULL), K = 1, 3, 5, 9.
Compares, on the same disk in the same run: stock SQLite (unix VFS) with its rollback
journal (super-journal for K > 1) and with WAL; txvfs with each database committing on its
own (default); txvfs with the databases in one commit group.

    python3 benches/sqlite/multidb.py LIBPATH DIR [TRANSACTIONS [RESULTS_CSV [ROUNDS]]]

RESULTS_CSV gets the measurements (`workload,system,role,seconds,per`) for benches/charts.py
("-": none). With ROUNDS > 1 every cell is measured ROUNDS times, the rounds interleaved
(each round runs every K and system once), and the best round is kept: on a shared machine
the disk's fsync time drifts over minutes.
"""

import os
import shutil
import sqlite3
import sys
import time

lib, root = sys.argv[1], sys.argv[2]
n_tx = int(sys.argv[3]) if len(sys.argv) > 3 else 200
results_csv = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 1
boot = sqlite3.connect(":memory:")
boot.enable_load_extension(True)
boot.load_extension(lib)


def run(kind, k):
    d = os.path.join(root, f"{kind}-{k}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    store = os.path.join(d, "store")

    def uri(i):
        if kind.startswith("stock"):
            return f"file:{d}/db{i}.db"
        group = "&group=bench" if kind == "txvfs-group" else ""
        return f"file:/bench{k}/db{i}.db?vfs=txvfs&store={store}{group}"

    con = sqlite3.connect(uri(0), uri=True, isolation_level=None)
    names = ["main"]
    for i in range(1, k):
        con.execute(f"ATTACH '{uri(i)}' AS d{i}")
        names.append(f"d{i}")
    for s in names:
        if kind == "stock-wal":
            con.execute(f"PRAGMA {s}.journal_mode=WAL")
        con.execute(f"PRAGMA {s}.synchronous=FULL")
        con.execute(f"CREATE TABLE {s}.t(id INTEGER PRIMARY KEY, v BLOB)")
    row = b"x" * 100
    t0 = time.perf_counter()
    for _ in range(n_tx):
        con.execute("BEGIN")
        for s in names:
            con.execute(f"INSERT INTO {s}.t(v) VALUES (?)", (row,))
        con.execute("COMMIT")
    dt = time.perf_counter() - t0
    for s in names:
        assert con.execute(f"SELECT count(*) FROM {s}.t").fetchone()[0] == n_tx
        assert con.execute(f"PRAGMA {s}.integrity_check").fetchone()[0] == "ok"
    con.close()
    return dt / n_tx * 1e6  # µs per transaction


kinds = ["stock-journal", "stock-wal", "txvfs", "txvfs-group"]
print(
    f"{n_tx} transactions per cell, best of {rounds}, µs per transaction (lower is better); "
    "ratio = stock / txvfs-group"
)
print(
    "| K | stock rollback journal | stock WAL | txvfs (each db commits alone) | txvfs commit group | journal / group | WAL / group | txvfs alone / group |"
)
print("|---|---|---|---|---|---|---|---|")
names = {
    "stock-journal": "stock rollback journal",
    "stock-wal": "stock WAL",
    "txvfs": "txvfs (each db alone)",
    "txvfs-group": "txvfs commit group",
}
csv = ["workload,system,role,seconds,per"]
best = {}
for _ in range(rounds):
    for k in (1, 3, 5, 9):
        for kind in kinds:
            t = run(kind, k)
            best[k, kind] = min(t, best.get((k, kind), t))
for k in (1, 3, 5, 9):
    r = {kind: best[k, kind] for kind in kinds}
    for kind in kinds:
        role = "baseline" if kind.startswith("stock") else "txvfs"
        csv.append(
            f"K={k} databases per transaction,{names[kind]},{role},{r[kind] / 1e6:.9e},transaction"
        )
    g = r["txvfs-group"]
    print(
        f"| {k} | {r['stock-journal']:.0f} | {r['stock-wal']:.0f} | {r['txvfs']:.0f} | {g:.0f} | "
        f"{r['stock-journal'] / g:.1f}x | {r['stock-wal'] / g:.1f}x | {r['txvfs'] / g:.1f}x |",
        flush=True,
    )
if results_csv:
    with open(results_csv, "w") as f:
        f.write("\n".join(csv) + "\n")
