"""The abi3 extension on another CPython (run by tests/python/run with each installed 3.9+
interpreter, no pytest needed): the package imports, and the calls that borrow Python buffers
through the C API the binding declares itself (src/buffer.rs) work on this version."""

from __future__ import annotations

import array
import os
import sys

import txvfs

with txvfs.open("memory:") as store:
    data = os.urandom((3 << 20) + 5)
    with store.open("/f", "wb") as f:
        assert f.write(memoryview(bytearray(data))) == len(data)
    with store.open("/f", "rb", buffering=0) as f:
        ints = array.array("i", bytes(1 << 20))
        assert f.readinto(ints) == 1 << 20 and ints.tobytes() == data[: 1 << 20]
        try:
            f.readinto(b"read-only")
        except TypeError:
            pass
        else:
            raise AssertionError("readinto(bytes) did not raise TypeError")
        assert f.tell() == 1 << 20
        assert f.read() == data[1 << 20 :]
print("abi3 extension on Python %s: ok" % sys.version.split()[0])
