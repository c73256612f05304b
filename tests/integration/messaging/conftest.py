"""Fixtures for messaging tests: a started broker on the test's own nats-server, with the streams provisioned."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from faststream.nats import NatsBroker
from nats.js import JetStreamContext

from libs.messaging.broker import jetstream, make_broker, start_broker
from libs.messaging.consumer import EventConsumer


@contextlib.asynccontextmanager
async def running(broker: NatsBroker, *consumers: EventConsumer) -> AsyncIterator[NatsBroker]:
    """Start a broker whose subscribers are registered, the way services start theirs."""
    await start_broker(broker, consumers)
    try:
        yield broker
    finally:
        for consumer in consumers:
            await consumer.stop()
        await broker.stop()


@pytest.fixture
async def js(nats_url: str) -> AsyncIterator[JetStreamContext]:
    """A JetStream context on a provisioned server, for publishing and inspecting streams."""
    async with running(make_broker(nats_url, "test-inspector")) as broker:
        yield jetstream(broker)


async def eventually(condition: Callable[[], Awaitable[bool]], *, within_s: float = 10.0) -> None:
    """Poll `condition` until it holds; fail after `within_s` (a bound, not a sleep the test relies on)."""
    deadline = time.monotonic() + within_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within_s}s")
        await asyncio.sleep(0.01)


@dataclass(frozen=True)
class StoredMessage:
    subject: str
    data: bytes
    headers: dict[str, str]


async def stream_messages(js: JetStreamContext, stream: str) -> list[StoredMessage]:
    """Every message stored in `stream`, in stream order."""
    state = (await js.stream_info(stream)).state
    if state.messages == 0:
        return []
    raw = [await js.get_msg(stream, seq) for seq in range(state.first_seq, state.last_seq + 1)]
    return [StoredMessage(m.subject or "", m.data or b"", dict(m.headers or {})) for m in raw]
