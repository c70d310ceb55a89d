"""Two copies of the txvfs core in one process share one store (issues 20 and 15).

Each binding carries its own copy of the core (the Python module, libtxvfs.so, the SQLite
extension). RocksDB's own LOCK never conflicted inside one process, so before issue 20 two
copies could both open a store and lose each other's files; then the second copy was refused.
Now the first copy owns the store and serves it, and the second becomes its client through
the store's socket, exactly as another process would: both see everything, nothing is lost.
"""

import ctypes
import errno
import os
import sqlite3

import txvfs
from conftest import sqlite_with_txvfs


def test_sqlite_extension_shares_the_store_python_owns(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    for i in range(101):
        store.write_bytes(f"/f{i}", b"python")
    sqlite_with_txvfs().close()
    con = sqlite3.connect(f"file:/app.db?vfs=txvfs&store={path}", uri=True)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES (42)")
    con.commit()
    assert store.exists("/app.db"), "Python sees the database SQLite wrote"
    store.write_bytes("/after", b"still python")
    con.close()
    store.close()
    store = txvfs.open(path)
    assert [store.read_bytes(f"/f{i}") for i in range(101)] == [b"python"] * 101
    assert store.read_bytes("/after") == b"still python"
    store.close()
    con = sqlite3.connect(f"file:/app.db?vfs=txvfs&store={path}", uri=True)
    assert con.execute("SELECT x FROM t").fetchall() == [(42,)]
    con.close()


def test_c_library_shares_the_store_python_owns(tmp_path, capi):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/kept", b"data")
    handle = ctypes.c_void_p()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == 0, (
        capi.txvfs_last_error()
    )
    assert capi.txvfs_write_file(handle, None, b"/from-c", b"C wrote", 7) == 0, (
        capi.txvfs_last_error()
    )
    assert store.read_bytes("/from-c") == b"C wrote"
    store.close()  # the C copy takes the store over
    assert capi.txvfs_write_file(handle, None, b"/after", b"C again", 7) == 0, (
        capi.txvfs_last_error()
    )
    capi.txvfs_store_free(handle)
    with txvfs.open(path) as store:
        assert store.read_bytes("/kept") == b"data"
        assert store.read_bytes("/after") == b"C again"


def test_python_shares_the_store_the_c_library_owns(tmp_path, capi):
    path = str(tmp_path / "store")
    handle = ctypes.c_void_p()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == 0
    assert capi.txvfs_write_file(handle, None, b"/c", b"from C", 6) == 0
    with txvfs.open(path) as store:
        assert store.read_bytes("/c") == b"from C"
        store.write_bytes("/py", b"from Python")
    capi.txvfs_store_free(handle)
    with txvfs.open(path) as store:
        assert store.read_bytes("/py") == b"from Python"


def test_an_exclusive_store_is_refused_to_the_other_copy_with_the_holder_named(tmp_path, capi):
    path = str(tmp_path / "store")
    store = txvfs.open(f"rocksdb:{path}?mode=exclusive")
    handle = ctypes.c_void_p()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == -errno.EBUSY
    message = capi.txvfs_last_error().decode()
    assert f"exclusive use by process {os.getpid()}" in message, message
    store.close()
    assert capi.txvfs_store_open(path.encode(), None, ctypes.byref(handle)) == 0
    capi.txvfs_store_free(handle)
