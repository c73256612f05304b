"""Group commit for applies: concurrent requests are decided on one view and written in one transaction,
and each still gets its own answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from libs.events.rpc import ApplyReply

log = logging.getLogger(__name__)

Item = TypeVar("Item")


@dataclass
class _Pending(Generic[Item]):
    request: Item
    answer: asyncio.Future[ApplyReply] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class ApplyBatcher(Generic[Item]):
    """Collects apply requests while the previous group is being written, then writes them together."""

    def __init__(
        self, apply_group: Callable[[list[Item]], Awaitable[list[ApplyReply]]], *, max_group: int = 64
    ) -> None:
        self._apply_group = apply_group
        self._max_group = max_group
        self._queue: asyncio.Queue[_Pending[Item]] = asyncio.Queue()

    async def submit(self, request: Item) -> ApplyReply:
        pending = _Pending(request)
        self._queue.put_nowait(pending)
        return await pending.answer

    async def run(self) -> None:
        while True:
            group = [await self._queue.get()]
            while len(group) < self._max_group and not self._queue.empty():
                group.append(self._queue.get_nowait())
            await self._answer(group)

    async def _answer(self, group: list[_Pending[Item]]) -> None:
        try:
            replies = await self._apply_group([p.request for p in group])
        except Exception as exc:
            log.exception("apply group of %d failed", len(group))
            for pending in group:
                if not pending.answer.done():
                    pending.answer.set_exception(exc)
            return
        for pending, reply in zip(group, replies, strict=True):
            if not pending.answer.done():
                pending.answer.set_result(reply)
