"""Admission's next page of a paginated list, asked for while the client reads this one.

A paginated list is a chain: admission reads a page, the API server shapes it, the client decodes it and
asks for the next. Each step waits for the one before, so a list of 10,000 pods costs the sum of every
process's time on it. Asking admission for the next page as soon as a page is answered lets admission read
it while the API server and the client work on this one: on two or more cores a list costs about its slowest
step instead. The API server decodes a page read ahead as it arrives (see listed.py), while the client is
still reading the page before. A client that does not come back leaves one page read for nothing, kept at
most `ttl_s`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable

from libs.events.rpc import FramedPage

TTL_S = 30.0
"""How long a page read ahead waits for its client."""
KEPT = 64
"""Pages read ahead at most (the oldest goes first)."""


class ReadAhead:
    """Pages read ahead, by what the request for them will be."""

    def __init__(
        self, *, ttl_s: float = TTL_S, kept: int = KEPT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl_s, self._kept, self._clock = ttl_s, kept, clock
        self._pages: OrderedDict[Hashable, tuple[float, asyncio.Task[FramedPage]]] = OrderedDict()

    def start(self, key: Hashable, read: Callable[[], Awaitable[FramedPage]]) -> None:
        """Read the page `key` names now, for a request that may come."""
        self._forget_expired()
        if key in self._pages:
            return
        self._pages[key] = (self._clock(), asyncio.ensure_future(read()))
        while len(self._pages) > self._kept:
            _, (_, oldest) = self._pages.popitem(last=False)
            oldest.cancel()

    async def take(self, key: Hashable) -> FramedPage | None:
        """The page read ahead for `key`, once; None when there is none or reading it failed (ask again)."""
        self._forget_expired()
        found = self._pages.pop(key, None)
        if found is None:
            return None
        with contextlib.suppress(Exception):
            return await found[1]
        return None

    def close(self) -> None:
        for _, task in self._pages.values():
            task.cancel()
        self._pages.clear()

    def _forget_expired(self) -> None:
        horizon = self._clock() - self._ttl_s
        while self._pages:
            key, (started, task) = next(iter(self._pages.items()))
            if started >= horizon:
                return
            del self._pages[key]
            task.cancel()
