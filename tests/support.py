"""Helpers shared by integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    *,
    timeout_s: float = 15.0,
    interval_s: float = 0.05,
) -> T:
    """Poll `probe` until `done(value)` or the deadline; returns the last value either way (assert on it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    value = await probe()
    while not done(value) and loop.time() < deadline:
        await asyncio.sleep(interval_s)
        value = await probe()
    return value
