"""Every journal mode an application sets behaves as that mode or a stronger one, in every order:
for each of the 36 ordered pairs (A, B) of OFF, MEMORY, DELETE, TRUNCATE, PERSIST and WAL, a
fresh database is switched to A, then to B; after each switch a round runs:

- in a transaction, a good row, then one INSERT ... SELECT of 1,000 rows whose last row
  violates a UNIQUE constraint (the statement fails), then COMMIT;
- a transaction that inserts rows, deletes and updates others (more pages than the page cache
  holds, so pages reach the file before the end), then ROLLBACK.

The same steps run on stock SQLite (the unix VFS, a host file, the same SQLite library in the
same process), the reference. Stock SQLite is itself checked against what the modes promise
(its journal modes undo the failed statement and the rollback), so the test shows what it
compares. txvfs must answer every `PRAGMA journal_mode` (set and query) as stock SQLite does,
and keep the same rows after each round; where the mode set is OFF (no journal: a failed
statement keeps its rows), keeping what a journal mode keeps is also right (stronger).
In OFF mode the rollback transaction stays in the page cache (SQLite cannot undo pages that
reached the file without a journal, so stock SQLite's result there is no reference).

    python3 journal_modes.py LIBPATH WORKDIR
"""

import os
import sqlite3
import sys
import urllib.parse

MODES = ["off", "memory", "delete", "truncate", "persist", "wal"]


def connect_txvfs(store, name):
    uri = f"file:{name}?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}"
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def connect_stock(path):
    return sqlite3.connect(path, isolation_level=None)


def state(con):
    """What the table holds: rows, the sum of their values, integrity."""
    rows, total = con.execute("SELECT count(*), total(u) FROM t").fetchone()
    return (rows, total, con.execute("PRAGMA integrity_check").fetchone()[0])


def delta(st):
    """What a round changed: (rows, sum) of the failed statement's transaction, then of the
    rolled-back one."""
    before, after_statement, end = st
    return (
        (after_statement[0] - before[0], after_statement[1] - before[1]),
        (end[0] - after_statement[0], end[1] - after_statement[1]),
    )


def failed_statement(con, tag):
    con.execute("BEGIN")
    con.execute("INSERT INTO t(u) VALUES (?)", (tag,))
    try:
        # Rows tag+1 .. tag+999, then 0 (the first row's value): the 1,000th row fails.
        con.execute(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 1000) "
            "INSERT INTO t(u, pad) SELECT CASE WHEN i = 1000 THEN 0 ELSE ? + i END, "
            "randomblob(200) FROM s",
            (tag,),
        )
        raise AssertionError("the INSERT ... SELECT did not fail")
    except sqlite3.IntegrityError:
        pass
    con.execute("COMMIT")


def rolled_back(con, tag, spill):
    """A transaction over several pages, rolled back: more than the page cache holds when
    `spill`, else (OFF) within a cache large enough for all of it."""
    n = 2000 if spill else 20
    con.execute(f"PRAGMA cache_size={10 if spill else 2000}")
    con.execute("BEGIN")
    con.execute(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?) "
        "INSERT INTO t(u, pad) SELECT ? + 5000 + i, randomblob(500) FROM s",
        (n, tag),
    )
    con.execute("UPDATE t SET u = -u, pad = randomblob(300) WHERE u > 0 AND u < ?", (tag,))
    con.execute("DELETE FROM t WHERE u = 0")
    con.execute("ROLLBACK")


def run(con, first, second):
    """The pair's steps on one connection: the answers and the state after each round."""
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, u UNIQUE, pad BLOB)")
    con.execute("INSERT INTO t(u) VALUES (0)")
    answers, states = [], []
    for k, mode in enumerate((first, second), start=1):
        answers.append(con.execute(f"PRAGMA journal_mode={mode}").fetchone()[0])
        answers.append(con.execute("PRAGMA journal_mode").fetchone()[0])
        before = state(con)
        failed_statement(con, k * 10000)
        after_statement = state(con)
        rolled_back(con, k * 10000, spill=mode != "off")
        states.append((before, after_statement, state(con)))
        answers.append(con.execute("PRAGMA journal_mode").fetchone()[0])
    return answers, states


def spellings(con):
    """The answers to journal_mode values as SQLite parses them: any case, a prefix names the
    first mode it starts (delete, persist, off, truncate, memory, wal), anything else queries."""
    con.execute("CREATE TABLE IF NOT EXISTS s(x)")
    values = ["OFF", "o", "Wal", "w", "of", "WA", "t", "m", "p", "d", "walrus", "'off'", "wal"]
    values += ["x", "memory", '"OfF"', "persist", "truncate", "off", "DELETE"]
    return [con.execute(f"PRAGMA journal_mode={v}").fetchone()[0] for v in values]


def main():
    lib, work = sys.argv[1], sys.argv[2]
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()
    store = os.path.join(work, "jm-store")
    stock_dir = os.path.join(work, "jm-stock")
    os.makedirs(stock_dir)
    weaker = []
    for first in MODES:
        for second in MODES:
            pair = f"{first} -> {second}"
            ref = connect_stock(os.path.join(stock_dir, f"{first}-{second}.db"))
            ref_answers, ref_states = run(ref, first, second)
            ref.close()
            con = connect_txvfs(store, f"/jm/{first}-{second}.db")
            answers, states = run(con, first, second)
            con.close()
            assert answers == ref_answers, f"{pair}: answers {answers}, stock {ref_answers}"
            for k, mode in enumerate((first, second)):
                tag = (k + 1) * 10000
                ref_stmt, ref_end = delta(ref_states[k])
                stmt, end = delta(states[k])
                # A journal mode keeps the good row and nothing of the failed statement, and
                # ROLLBACK undoes the whole transaction: stock SQLite shows it.
                if mode != "off":
                    assert ref_stmt == (1, tag), f"{pair}: stock {mode}: {ref_states[k]}"
                assert ref_end == (0, 0), f"{pair}: stock {mode} rollback: {ref_states[k]}"
                allowed = [ref_stmt] + ([(1, tag)] if mode == "off" else [])
                intact = all(s[2] == "ok" for s in states[k] + ref_states[k])
                if stmt not in allowed or end != (0, 0) or not intact:
                    weaker.append(f"{pair}, set {mode}: txvfs {states[k]}, stock {ref_states[k]}")
    assert not weaker, "journal modes weaker than set:\n" + "\n".join(weaker)
    ref = connect_stock(os.path.join(stock_dir, "spellings.db"))
    want = spellings(ref)
    ref.close()
    got = spellings(connect_txvfs(store, "/jm/spellings.db"))
    assert got == want, f"spellings of journal modes: txvfs {got}, stock {want}"
    print(
        f"journal modes: {len(MODES) ** 2} ordered pairs, each as strong as stock SQLite; "
        f"{len(want)} spellings answered as stock SQLite answers them"
    )


if __name__ == "__main__":
    main()
