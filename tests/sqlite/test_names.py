"""One database, several names: every spelling of a database's path, a symlink and a hard link
reach one set of locks, as with SQLite's unix VFS (which keys its locks by inode).

Run by bindings/sqlite/tests/names.rs, which prepares the store first (the core API is not
loaded in this process): /data/x.db (empty), /data/link.db -> x.db (symlink), /data/hard.db
(hard link), directory /a.

    python3 test_names.py LIBPATH STORE_URI OTHER_STORE_URI
"""

import sqlite3
import sys
import urllib.parse

LIB, STORE, OTHER = sys.argv[1], sys.argv[2], sys.argv[3]
ALIASES = [
    "/./data/x.db",
    "//data/x.db",
    "/a/../data/x.db",
    "/data/./x.db",
    "/data/link.db",
    "/data/hard.db",
]
passed = []


def uri(name, store=STORE):
    # "file://" + an empty authority keeps a leading "//" in the path.
    prefix = "file://" if name.startswith("//") else "file:"
    return f"{prefix}{name}?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}"


def connect(name, store=STORE, **kw):
    return sqlite3.connect(uri(name, store), uri=True, isolation_level=None, **kw)


def locked(con, sql):
    """Runs sql, which must fail with 'database is locked' (SQLITE_BUSY)."""
    try:
        con.execute(sql)
    except sqlite3.OperationalError as e:
        assert "locked" in str(e), e
        return
    raise AssertionError(f"{sql}: no SQLITE_BUSY")


def rows(con, schema="main"):
    return [r[0] for r in con.execute(f"SELECT n FROM {schema}.t ORDER BY rowid")]


def check(con, schema="main"):
    assert con.execute(f"PRAGMA {schema}.integrity_check").fetchone()[0] == "ok"


boot = sqlite3.connect(":memory:")
boot.enable_load_extension(True)
boot.load_extension(LIB)
boot.close()

a = connect("/data/x.db", timeout=0)
a.execute("CREATE TABLE t(n INTEGER)")
want = []

# Two connections, two names: the second writer gets SQLITE_BUSY while the first holds
# RESERVED, and no committed transaction is lost.
for alias in ALIASES:
    b = connect(alias, timeout=0)
    assert rows(b) == want, (alias, rows(b), want)
    a.execute("BEGIN IMMEDIATE")
    a.execute("INSERT INTO t VALUES (?)", (len(want),))
    locked(b, "BEGIN IMMEDIATE")
    a.execute("COMMIT")
    want.append(len(want))
    b.execute("BEGIN IMMEDIATE")
    b.execute("INSERT INTO t VALUES (?)", (len(want),))
    locked(a, "BEGIN IMMEDIATE")
    b.execute("COMMIT")
    want.append(len(want))
    # A reader under one name does not hold up a writer under the other: it keeps its
    # snapshot, and its own write is then refused (SQLITE_BUSY_SNAPSHOT: one file, one lock).
    b.execute("BEGIN")
    before = rows(b)
    a.execute("BEGIN IMMEDIATE")
    a.execute("INSERT INTO t VALUES (?)", (len(want),))
    a.execute("COMMIT")
    want.append(len(want))
    assert rows(b) == before, (alias, rows(b), before)
    locked(b, "INSERT INTO t VALUES (-1)")
    b.execute("ROLLBACK")
    assert rows(a) == want and rows(b) == want, (alias, rows(a), rows(b), want)
    check(b)
    b.close()
passed.append("two connections, two names: writers exclude each other, a reader keeps its snapshot")

# One connection, the same database attached under another name: a transaction writing
# through both names gets SQLITE_BUSY at the second (as with the unix VFS), and nothing is
# corrupted.
for alias in ALIASES:
    a.execute(f"ATTACH '{uri(alias)}' AS y")
    assert rows(a, "y") == want
    a.execute("BEGIN")
    a.execute("INSERT INTO main.t VALUES (-2)")
    locked(a, "INSERT INTO y.t VALUES (-3)")
    a.execute("ROLLBACK")
    a.execute("INSERT INTO y.t VALUES (?)", (len(want),))  # alone, through the other name
    want.append(len(want))
    assert rows(a) == want and rows(a, "y") == want, (alias, rows(a), want)
    check(a)
    check(a, "y")
    a.execute("DETACH y")
passed.append("ATTACH under another name")

# xFullPathname gives one canonical name for every spelling.
for alias in [
    "/./data/x.db",
    "//data/x.db",
    "/a/../data/x.db",
    "/data/./x.db",
    "data/x.db",
    "/data//x.db",
]:
    c = connect(alias)
    name = c.execute("PRAGMA database_list").fetchone()[2]
    assert name == "/data/x.db", (alias, name)
    c.close()
passed.append("canonical names")

# The same name in another store of this process is another database.
o = connect("/data/x.db", store=OTHER)
o.execute("CREATE TABLE t(n INTEGER)")
o.execute("INSERT INTO t VALUES (42)")
assert rows(o) == [42] and rows(a) == want
# ... with its own journal: both write (tiny caches spill pages, so the journals matter), one
# rolls back, the other commits; each sees only its own committed rows.
for c in (a, o):
    c.execute("CREATE TABLE big(b)")
    c.execute("PRAGMA cache_size=5")
a.execute("BEGIN")
o.execute("BEGIN")
for _ in range(300):
    a.execute("INSERT INTO big VALUES (randomblob(1000))")
    o.execute("INSERT INTO big VALUES (randomblob(1000))")
a.execute("INSERT INTO t VALUES (-4)")
a.execute("ROLLBACK")
o.execute("COMMIT")
assert rows(a) == want and a.execute("SELECT count(*) FROM big").fetchone()[0] == 0
assert rows(o) == [42] and o.execute("SELECT count(*) FROM big").fetchone()[0] == 300
check(a)
check(o)
o.close()
passed.append("same name, two stores")

a.close()
a = connect("/data/hard.db")
assert rows(a) == want
check(a)
a.close()
print(f"names: {len(passed)} passed ({'; '.join(passed)})")
