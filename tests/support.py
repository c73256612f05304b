"""Helpers shared by integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from libs.db.uow import SqlAlchemyUnitOfWork

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


class AcknowledgementLost:
    """Units of work whose next commit reaches the database while its caller hears only a lost connection
    (the server committed, then the connection dropped before the answer arrived)."""

    def __init__(self, real: Callable[[], SqlAlchemyUnitOfWork]) -> None:
        self._real = real
        self.lose_next = True

    def __call__(self) -> SqlAlchemyUnitOfWork:
        uow = self._real()
        commit = uow.commit

        async def commit_then_lose_the_answer() -> None:
            await commit()
            if self.lose_next:
                self.lose_next = False
                raise ConnectionResetError("connection lost before the commit was acknowledged")

        uow.commit = commit_then_lose_the_answer  # type: ignore[method-assign]
        return uow
