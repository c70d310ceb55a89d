"""``universal_pathlib`` support: ``UPath("txvfs:///data/a.txt", store="/path/to/store")`` is a
:class:`TxvfsPath`, a ``pathlib``-style path over :class:`txvfs.fsspec.TxvfsFileSystem`.

The package registers it through the ``universal_pathlib.implementations`` entry point (and
the file system through ``fsspec.specs``); importing this module registers it too.
"""

from __future__ import annotations

from upath import UPath
from upath.registry import register_implementation

from . import fsspec as _fsspec  # noqa: F401  (registers the "txvfs" protocol with fsspec)

__all__ = ["TxvfsPath"]


class TxvfsPath(UPath):
    """A path in a txvfs store (``txvfs:///dir/file``): the generic fsspec-backed
    ``UPath``, declared for the protocol so universal_pathlib uses it without warning.
    ``store=`` and ``store_options=`` go to the file system, as with ``fsspec.open``."""

    __slots__ = ()


register_implementation("txvfs", TxvfsPath, clobber=True)
