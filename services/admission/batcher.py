"""Group commit for applies: concurrent requests are decided on one view and written in one transaction,
and each still gets its own answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from libs.events.rpc import ApplyReply

log = logging.getLogger(__name__)

Item = TypeVar("Item")


class Footprint(NamedTuple):
    """What a request may read (what it writes included) and write."""

    reads: AbstractSet[Hashable]
    writes: AbstractSet[Hashable]


@dataclass
class _Pending(Generic[Item]):
    request: Item
    answer: asyncio.Future[ApplyReply] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class ApplyBatcher(Generic[Item]):
    """Collects apply requests while earlier groups are being written, then writes them together.

    With `depth` > 1, a group is decided while the previous one is still committing (overlapping one's
    database round trips with the other's CPU work), but only when neither writes what the other reads or
    writes: each group then decides on a view the other cannot change. `footprint_of` names what an item reads
    (what it writes included) and writes; None means it may touch anything (a PriorityClass changes how every
    object is admitted) and makes its group run alone.

    A group starts beside another only once `overlap_from` requests wait: fewer wait for the group in flight
    and go in the next one together. A group's cost is mostly its own (a transaction, its statements, its
    events' publication), so under a few clients that each wait for their answer, two small groups at once
    cost nearly twice one group of them all, and the clients' answers come no sooner on a busy host."""

    def __init__(
        self,
        apply_group: Callable[[list[Item]], Awaitable[list[ApplyReply]]],
        *,
        footprint_of: Callable[[Item], Footprint | None] = lambda _: None,
        max_group: int = 64,
        depth: int = 1,
        overlap_from: int = 1,
    ) -> None:
        self._apply_group = apply_group
        self._footprint_of = footprint_of
        self._max_group = max_group
        self._depth = depth
        self._overlap_from = overlap_from
        self._queue: asyncio.Queue[_Pending[Item]] = asyncio.Queue()
        self._in_flight: dict[asyncio.Task[None], Footprint | None] = {}
        self.groups_started = 0

    @property
    def idle(self) -> bool:
        """Whether no apply waits or is being written."""
        # A finished group's task leaves `_in_flight` only when the next group needs its place.
        return self._queue.empty() and all(task.done() for task in self._in_flight)

    async def submit(self, request: Item) -> ApplyReply:
        pending = _Pending(request)
        self._queue.put_nowait(pending)
        return await pending.answer

    async def run(self) -> None:
        try:
            while True:
                first = await self._queue.get()
                while len(self._in_flight) >= self._depth or (
                    self._in_flight and 1 + self._queue.qsize() < self._overlap_from
                ):
                    await self._one_finished()
                group = [first]
                while len(group) < self._max_group and not self._queue.empty():
                    group.append(self._queue.get_nowait())
                footprint = self._group_footprint(group)
                while any(_conflict(footprint, other) for other in self._in_flight.values()):
                    await self._one_finished()
                task = asyncio.create_task(self._answer(group), name="apply-group")
                self.groups_started += 1
                self._in_flight[task] = footprint
        finally:
            for task in self._in_flight:
                task.cancel()

    def _group_footprint(self, group: list[_Pending[Item]]) -> Footprint | None:
        reads: set[Hashable] = set()
        writes: set[Hashable] = set()
        for pending in group:
            footprint = self._footprint_of(pending.request)
            if footprint is None:
                return None
            reads |= footprint.reads
            writes |= footprint.writes
        return Footprint(frozenset(reads), frozenset(writes))

    async def _one_finished(self) -> None:
        done, _ = await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            del self._in_flight[task]

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


def _conflict(one: Footprint | None, other: Footprint | None) -> bool:
    if one is None or other is None:
        return True
    return not (one.writes.isdisjoint(other.reads) and other.writes.isdisjoint(one.reads))
