"""Shared fixtures: the C library through ctypes and a sqlite3 connection with the extension."""

import ctypes
import os
import sqlite3

import pytest


@pytest.fixture
def capi() -> ctypes.CDLL:
    """libtxvfs.so, a second copy of the txvfs core in this process."""
    lib = ctypes.CDLL(os.environ["TXVFS_CAPI_LIB"])
    lib.txvfs_last_error.restype = ctypes.c_char_p
    lib.txvfs_store_open.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    lib.txvfs_store_free.argtypes = [ctypes.c_void_p]
    lib.txvfs_write_file.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.txvfs_read_file.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ]
    return lib


def sqlite_with_txvfs() -> sqlite3.Connection:
    """An in-memory connection that has loaded the txvfs extension (a third copy of the core)."""
    con = sqlite3.connect(":memory:")
    con.enable_load_extension(True)
    con.load_extension(os.environ["TXVFS_SQLITE_LIB"].removesuffix(".so"))
    return con
