"""The faststream `NatsBroker` every service is wired with."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.js import JetStreamContext

from libs.messaging.consumer import EventConsumer
from libs.messaging.rpc import start_rpc
from libs.messaging.streams import ensure_streams

# A stuck drain must never hold a service's shutdown for nats-py's default 30 s.
DRAIN_TIMEOUT_S = 5


def make_broker(url: str, name: str, *, message_log_level: int = logging.DEBUG) -> NatsBroker:
    """A broker for service `name` (shown in NATS monitoring); per-message logs at DEBUG, not INFO."""
    return NatsBroker(
        url,
        name=name,
        drain_timeout=DRAIN_TIMEOUT_S,
        graceful_timeout=DRAIN_TIMEOUT_S,
        log_level=message_log_level,
    )


def connection(broker: NatsBroker) -> Client:
    """The connected nats-py client under a started (or connected) broker."""
    return broker.connection


def jetstream(broker: NatsBroker) -> JetStreamContext:
    """A JetStream context on the broker's connection."""
    return broker.connection.jetstream()


async def start_broker(broker: NatsBroker, consumers: Sequence[EventConsumer] = ()) -> None:
    """Connect, provision the streams and the durable consumers (creating or updating them), then start the
    subscribers. The one start-up sequence of every service."""
    await broker.connect()
    js = jetstream(broker)
    await ensure_streams(js)
    for consumer in consumers:
        await consumer.ensure(js)
    await broker.start()
    await start_rpc(broker)
    for consumer in consumers:
        await consumer.start()
