"""The change feed: one poller per API server asks admission what changed since the last revision and hands
each change to the watches that want it; recent changes are kept so that a watch resuming from a recent
resourceVersion replays them without asking admission again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from libs.events.rpc import Change, ChangesReply
from libs.messaging.errors import RpcError, RpcTimeout, RpcUnavailable
from libs.runtime.shutdown import cancel_tasks
from services.api_server.backend import CHANGES_LIMIT, Admission

log = logging.getLogger(__name__)

POLL_S = 0.02
"""How often the feed asks while anyone watches; a committed change reaches watchers within about this."""
KEPT = 20_000
"""Recent changes kept for watches that resume."""
IDLE_S = 1.0
"""How often the feed moves its cursor on while nobody watches."""


class Expired(Exception):
    """A watch asked to resume from a revision whose deletions are forgotten (410 Gone, reason Expired)."""

    def __init__(self, asked: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {asked} ({oldest})")
        self.asked, self.oldest = asked, oldest


@dataclass(eq=False)
class Subscription:
    """One watch's queue of changes after its starting revision."""

    wants: Callable[[Change], bool]
    after: int = 0
    queue: asyncio.Queue[Change | None] = field(default_factory=asyncio.Queue)


class ChangeFeed:
    """Polls admission's changes while subscriptions exist. The feed's cursor is (revision, uid): every change
    up to it has been handed out; a large revision is read in pages, so the cursor may sit inside one.
    `revision` is the last revision handed out whole."""

    def __init__(self, admission: Admission, *, poll_s: float = POLL_S, idle_s: float = IDLE_S) -> None:
        self._admission = admission
        self._poll_s = poll_s
        self._idle_s = idle_s
        self._recent: deque[Change] = deque(maxlen=KEPT)
        self._subscribers: set[Subscription] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._cursor: tuple[int, str | None] = (-1, None)
        self.compacted = 0
        self._limit = CHANGES_LIMIT

    @property
    def revision(self) -> int:
        revision, partial = self._cursor
        return revision - 1 if partial is not None else revision

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="change-feed")

    async def current(self) -> int:
        """The feed's revision, asking admission for the current one the first time."""
        if self._cursor[0] < 0:
            reply = await self._admission.changes(2**62)  # nothing is that new: only the revision comes back
            if self._cursor[0] < 0:
                self._cursor, self.compacted = (reply.revision, None), reply.compacted
        return self.revision

    async def latest(self) -> int:
        """Admission's current revision (the feed may not have read that far yet)."""
        reply = await self._admission.changes(2**62)
        return reply.revision

    async def stop(self) -> None:
        """Stop polling in bounded time (a poll stuck on the bus is left behind), then end every watch."""
        if self._task is not None:
            await cancel_tasks((self._task,), service="api_server")
        for subscription in self._subscribers:
            subscription.queue.put_nowait(None)

    async def subscribe(self, after: int, wants: Callable[[Change], bool]) -> Subscription:
        """A subscription to every change after revision `after` that `wants` accepts; Expired when the
        deletions since `after` are forgotten."""
        subscription = Subscription(wants, after)
        await self.current()
        async with self._lock:  # no poll hands out changes between the backlog and the subscription
            for change in await self._since(after):
                if wants(change):
                    subscription.queue.put_nowait(change)
            self._subscribers.add(subscription)
        self._wake.set()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    async def _since(self, after: int) -> list[Change]:
        """The changes after `after` that the feed has handed out, from memory when it still holds them all."""
        if self._recent and after >= self._recent[0].revision:
            return [change for change in self._recent if change.revision > after]
        found: list[Change] = []
        cursor: tuple[int, str | None] = (after, None)
        while _later(self._cursor, cursor):
            reply = await self._changes(cursor)
            if after < reply.compacted:
                raise Expired(after, reply.compacted)
            found += [change for change in reply.changes if not _later(_position(change), self._cursor)]
            following = (reply.revision, reply.partial_uid)
            if not reply.changes or not _later(following, cursor):
                break
            cursor = following
        return found

    async def _run(self) -> None:
        while True:
            if not self._subscribers:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self._idle_s)
            try:
                await self.current()
                async with self._lock:
                    await (self._poll() if self._subscribers else self._skip_ahead())
            except (RpcError, RpcTimeout, RpcUnavailable) as error:
                log.warning("change feed: %s", error)
                await asyncio.sleep(0.5)
                continue
            await asyncio.sleep(self._poll_s)

    async def _poll(self) -> None:
        reply = await self._changes(self._cursor)
        self.compacted = reply.compacted
        for change in reply.changes:
            self._recent.append(change)
            for subscription in list(self._subscribers):
                # A watch may start after the feed's cursor (a resourceVersion newer than the feed has read).
                if change.revision > subscription.after and subscription.wants(change):
                    subscription.queue.put_nowait(change)
        following = (reply.revision, reply.partial_uid)
        if _later(following, self._cursor):
            self._cursor = following

    async def _skip_ahead(self) -> None:
        """Nobody watches: move the cursor to the current revision without reading what changed (under a
        write load, every object written). The changes kept are dropped with it: a watch resuming from before
        the cursor reads its backlog from admission (`_since`)."""
        reply = await self._admission.changes(2**62)  # nothing is that new: only the revision comes back
        self.compacted = reply.compacted
        if _later((reply.revision, None), self._cursor):
            self._cursor = (reply.revision, None)
            self._recent.clear()

    async def _changes(self, cursor: tuple[int, str | None]) -> ChangesReply:
        """Admission's changes after `cursor`, asked for again with half as many while the answer is larger
        than the bus carries (a revision of any size is read in pages); the full amount again once the feed
        has caught up."""
        after, after_uid = cursor
        while True:
            try:
                reply = await self._admission.changes(after, after_uid=after_uid, limit=self._limit)
            except RpcError as error:
                if error.error_type != "AnswerTooLarge" or self._limit == 1:
                    raise
                self._limit = max(1, self._limit // 2)
                continue
            if len(reply.changes) < self._limit and reply.partial_uid is None:
                self._limit = CHANGES_LIMIT
            return reply


def _position(change: Change) -> tuple[int, str]:
    return change.revision, str((change.object.get("metadata") or {}).get("uid") or "")


def _later(one: tuple[int, str | None], other: tuple[int, str | None]) -> bool:
    """Whether cursor `one` is past `other` (a whole revision is past any part of it)."""
    if one[0] != other[0]:
        return one[0] > other[0]
    return other[1] is not None and (one[1] is None or one[1] > other[1])
