"""The faststream `NatsBroker` every service is wired with."""

from __future__ import annotations

import logging

from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.js import JetStreamContext

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
