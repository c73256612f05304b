"""Messaging ports services depend on, free of NATS imports, so unit tests can pass fakes."""

from __future__ import annotations

from typing import Protocol

from libs.events.envelope import Envelope


class Publisher(Protocol):
    """Publishes an event envelope straight to the event stream (no outbox): for clients, e.g. `job.submitted`."""

    async def publish(self, envelope: Envelope) -> None: ...
