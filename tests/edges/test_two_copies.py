"""Two copies of the txvfs core in one process (the Python module, libtxvfs.so through ctypes,
the SQLite extension) on one store (issue 20, item 1; issue 15).

Before issue 20's fix, RocksDB's own LOCK (a POSIX record lock) never conflicted inside one
process: the Python module and the SQLite extension both opened the store and, after both
closed, the files written through Python were gone. Since issue 15 the copy that opens the
store second is a client of the first (over the store's socket, like another process): both
work at once, each sees the other's commits, and nothing is lost.
"""

import ctypes
import sqlite3

import txvfs
from conftest import sqlite_with_txvfs


def test_sqlite_extension_shares_the_store_python_holds(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    for i in range(101):
        store.write_bytes(f"/f{i}", b"python")
    sqlite_with_txvfs().close()
    con = sqlite3.connect(f"file:/app.db?vfs=txvfs&store={path}", uri=True)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES ('from sqlite')")
    con.commit()
    assert store.exists("/app.db") and store.stat("/app.db").st_size > 0
    con.close()
    store.close()
    store = txvfs.open(path)
    assert [store.read_bytes(f"/f{i}") for i in range(101)] == [b"python"] * 101
    assert store.exists("/app.db")
    store.close()
    con = sqlite3.connect(f"file:/app.db?vfs=txvfs&store={path}", uri=True)
    assert con.execute("SELECT x FROM t").fetchall() == [("from sqlite",)]
    con.close()


def _c_write(capi, handle, name: str, data: bytes) -> None:
    assert capi.txvfs_write_file(handle, None, name.encode(), data, len(data)) == 0, capi.txvfs_last_error()


def _c_read(capi, handle, name: str) -> bytes:
    buf = ctypes.create_string_buffer(4096)
    n = ctypes.c_size_t()
    assert capi.txvfs_read_file(handle, None, name.encode(), buf, 4096, ctypes.byref(n)) == 0, capi.txvfs_last_error()
    return buf.raw[: n.value]


def test_c_library_shares_the_store_python_holds(tmp_path, capi):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/kept", b"data")
    handle = ctypes.c_void_p()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == 0, capi.txvfs_last_error()
    assert _c_read(capi, handle, "/kept") == b"data"
    _c_write(capi, handle, "/from-c", b"c")
    assert store.read_bytes("/from-c") == b"c"
    capi.txvfs_store_free(handle)
    store.close()
    with txvfs.open(path) as store:
        assert store.read_bytes("/kept") == b"data" and store.read_bytes("/from-c") == b"c"


def test_python_shares_the_store_the_c_library_holds(tmp_path, capi):
    path = str(tmp_path / "store")
    handle = ctypes.c_void_p()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == 0
    _c_write(capi, handle, "/from-c", b"c")
    with txvfs.open(path) as store:
        assert store.read_bytes("/from-c") == b"c"
        store.write_bytes("/from-python", b"py")
    assert _c_read(capi, handle, "/from-python") == b"py"
    capi.txvfs_store_free(handle)
    with txvfs.open(path) as store:
        assert store.read_bytes("/from-c") == b"c" and store.read_bytes("/from-python") == b"py"
