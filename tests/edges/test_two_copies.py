"""Two copies of the txvfs core in one process must not both own one store (issue 20, item 1).

Before the fix, RocksDB's own LOCK (a POSIX record lock) never conflicted inside one process:
the Python module and the SQLite extension both opened the store and, after both closed, the
files written through Python were gone.
"""

import ctypes
import errno
import sqlite3

import pytest
import txvfs
from conftest import sqlite_with_txvfs


def test_sqlite_extension_is_refused_while_python_owns_the_store(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    for i in range(101):
        store.write_bytes(f"/f{i}", b"python")
    sqlite_with_txvfs().close()
    with pytest.raises(sqlite3.OperationalError):
        sqlite3.connect(f"file:/app.db?vfs=txvfs&store={path}", uri=True).execute("CREATE TABLE t(x)")
    store.close()
    # Once Python has closed it, SQLite may own it, and nothing was lost.
    con = sqlite3.connect(f"file:/app.db?vfs=txvfs&store={path}", uri=True)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    store = txvfs.open(path)
    assert [store.read_bytes(f"/f{i}") for i in range(101)] == [b"python"] * 101
    assert store.exists("/app.db")
    store.close()


def test_c_library_is_refused_with_the_holder_named(tmp_path, capi):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/kept", b"data")
    handle = ctypes.c_void_p()
    rc = capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle))
    assert rc == -errno.EBUSY
    message = capi.txvfs_last_error().decode()
    assert "this process" in message and "another copy" in message, message
    store.close()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == 0
    capi.txvfs_store_free(handle)
    with txvfs.open(path) as store:
        assert store.read_bytes("/kept") == b"data"


def test_python_is_refused_while_the_c_library_owns_the_store(tmp_path, capi):
    path = str(tmp_path / "store")
    handle = ctypes.c_void_p()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == 0
    with pytest.raises(OSError) as e:
        txvfs.open(path)
    assert e.value.errno == errno.EBUSY
    assert "in use by this process" in str(e.value)
    capi.txvfs_store_free(handle)
    txvfs.open(path).close()
