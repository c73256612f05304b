"""Following the event stream live: a core NATS subscription on `podway.events.>` (no consumer state)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from faststream.nats import NatsBroker
from pydantic import ValidationError

from libs.events.catalogue import EVENTS_PREFIX
from libs.events.envelope import Envelope


async def watch_events(broker: NatsBroker, subject: str = f"{EVENTS_PREFIX}.>") -> AsyncIterator[Envelope]:
    """Yield envelopes published on `subject` from now on; unparseable messages are skipped."""
    async with subscribed_events(broker, subject) as envelopes:
        async for envelope in envelopes:
            yield envelope


@contextlib.asynccontextmanager
async def subscribed_events(
    broker: NatsBroker, subject: str = f"{EVENTS_PREFIX}.>"
) -> AsyncIterator[AsyncIterator[Envelope]]:
    """Subscribe on entry (the server knows of it when the block starts), so that nothing published from the
    block is missed; the iterator yields the envelopes, unparseable messages skipped."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def on_message(msg: object) -> None:
        queue.put_nowait(msg.data)  # type: ignore[attr-defined]

    subscription = await broker.connection.subscribe(subject, cb=on_message)
    await broker.connection.flush()

    async def envelopes() -> AsyncIterator[Envelope]:
        while True:
            data = await queue.get()
            try:
                yield Envelope.from_bytes(data)
            except ValidationError:
                continue

    try:
        yield envelopes()
    finally:
        await subscription.unsubscribe()
