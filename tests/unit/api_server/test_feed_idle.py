"""The API server's change feed reads what changed only while someone watches: idle, it moves its cursor on
without reading the objects written, and a watch that starts later still gets its backlog."""

from __future__ import annotations

import asyncio
from typing import Any

from libs.events.rpc import Change, ChangesReply
from services.api_server.backend import CHANGES_LIMIT
from services.api_server.feed import ChangeFeed
from tests.support import eventually

NOTHING_THAT_NEW = 2**62


def change(revision: int) -> Change:
    return Change(
        type="ADDED", revision=revision, object={"metadata": {"name": f"p{revision}", "uid": str(revision)}}
    )


class Admission:
    """Answers the feed as admission does: the changes after a revision, or only the revision."""

    def __init__(self) -> None:
        self.written: list[Change] = []
        self.asked: list[int] = []

    @property
    def revision(self) -> int:
        return self.written[-1].revision if self.written else 1

    async def changes(
        self, after: int, *, after_uid: str | None = None, limit: int = CHANGES_LIMIT
    ) -> ChangesReply:
        self.asked.append(after)
        found = [c for c in self.written if c.revision > after][:limit]
        return ChangesReply(revision=self.revision, compacted=0, changes=found)


async def test_an_idle_feed_skips_ahead_and_a_later_watch_still_gets_its_backlog() -> None:
    admission = Admission()
    feed = ChangeFeed(admission, poll_s=0.001, idle_s=0.001)  # type: ignore[arg-type]
    await feed.start()
    try:
        admission.written = [change(revision) for revision in range(2, 8)]
        await eventually(lambda: _revision(feed), lambda revision: revision == 7)

        assert set(admission.asked) == {NOTHING_THAT_NEW}  # nothing read while nobody watched

        subscription = await feed.subscribe(4, lambda _: True)
        admission.written.append(change(8))
        seen: list[int] = []
        while len(seen) < 4:
            seen.append((await asyncio.wait_for(subscription.queue.get(), timeout=30)).revision)  # type: ignore[union-attr]
        assert seen == [5, 6, 7, 8]
    finally:
        await feed.stop()


async def _revision(feed: ChangeFeed) -> Any:
    return feed.revision
