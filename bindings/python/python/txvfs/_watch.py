"""The change feed from Python: :meth:`txvfs.Store.watch` returns a :class:`Watcher`, an
iterator (blocking), an ``asyncio`` async iterator, and ``poll()``/``wait(timeout)``."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Iterator, List, Optional

from . import _txvfs

Change = _txvfs.Change


class Watcher:
    """Follows a store's change feed: every change committed after the start, once, in
    commit order. Iterate it (blocking), ``async for`` it, or call :meth:`poll` /
    :meth:`wait`. Save :attr:`cursor` (or a change's ``cursor``) to resume later with
    ``store.watch(since=cursor)``."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self._ready: List[Any] = []

    def poll(self) -> List[Any]:
        """The changes there now (maybe none), without blocking."""
        return self._take() or list(self._native.poll())

    def wait(self, timeout: float) -> List[Any]:
        """The next changes, waiting up to ``timeout`` seconds; empty if none came."""
        return self._take() or list(self._native.wait(timeout))

    def _take(self) -> List[Any]:
        ready, self._ready = self._ready, []
        return ready

    @property
    def cursor(self) -> str:
        """The position after everything returned so far."""
        return str(self._native.cursor)

    def close(self) -> None:
        """Stops watching."""
        self._native.close()

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        # Short waits, so that Ctrl-C (a signal checked between calls) stops it.
        while not self._ready:
            self._ready = list(self._native.wait(0.2))
        return self._ready.pop(0)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[Any]:
        loop = asyncio.get_running_loop()
        while True:
            if not self._ready:
                self._ready = list(await loop.run_in_executor(None, self._native.wait, 0.2))
                continue
            yield self._ready.pop(0)


def watch(
    store: Any,
    prefix: Optional[Any] = None,
    kinds: Optional[List[str]] = None,
    since: Optional[str] = None,
) -> Watcher:
    """See :meth:`txvfs.Store.watch`."""
    if prefix is not None and not isinstance(prefix, (list, tuple)):
        prefix = [prefix]
    return Watcher(store.watch_native(prefix=prefix, kinds=kinds, since=since))
