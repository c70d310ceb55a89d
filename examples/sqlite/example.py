"""Python's sqlite3 module on txvfs: two databases in one commit group.

    python3 examples/sqlite/example.py PATH/TO/libtxvfs_sqlite.so STORE_DIR
(needs a Python whose sqlite3 module allows load_extension, such as Debian's /usr/bin/python3)
"""

import sqlite3
import sys

lib, store = sys.argv[1], sys.argv[2]
boot = sqlite3.connect(":memory:")
boot.enable_load_extension(True)
boot.load_extension(lib)  # registers the VFS "txvfs" for the whole process

con = sqlite3.connect(
    f"file:/shop/orders.db?vfs=txvfs&store={store}&group=shop", uri=True, isolation_level=None
)
con.execute(f"ATTACH 'file:/shop/stock.db?vfs=txvfs&store={store}&group=shop' AS stock")
con.execute("CREATE TABLE IF NOT EXISTS orders(item TEXT, qty INTEGER)")
con.execute("CREATE TABLE IF NOT EXISTS stock.items(item TEXT PRIMARY KEY, qty INTEGER)")
con.execute("INSERT OR IGNORE INTO stock.items VALUES ('apple', 100)")
con.execute("BEGIN")  # both databases commit in one txvfs transaction
con.execute("INSERT INTO orders VALUES ('apple', 3)")
con.execute("UPDATE stock.items SET qty = qty - 3 WHERE item = 'apple'")
con.execute("COMMIT")
left = con.execute("SELECT qty FROM stock.items WHERE item = 'apple'").fetchone()[0]
orders = con.execute("SELECT count(*) FROM orders").fetchone()[0]
assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
print(f"{orders} order(s), {left} apples left")
