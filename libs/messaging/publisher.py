"""`NatsPublisher`: the `Publisher` port on JetStream, for events that do not come from an outbox."""

from __future__ import annotations

from faststream.nats import NatsBroker

from libs.events.catalogue import EVENTS_STREAM
from libs.events.envelope import Envelope

MSG_ID_HEADER = "Nats-Msg-Id"


def event_headers(envelope: Envelope) -> dict[str, str]:
    """Headers of a published event: the event id as Nats-Msg-Id, so JetStream drops re-publications."""
    return {MSG_ID_HEADER: str(envelope.event_id)}


class NatsPublisher:
    """Publishes envelopes to PODWAY_EVENTS and waits for the stream's acknowledgement.

    Built on the faststream broker, so it works the same under `TestNatsBroker`.
    """

    def __init__(self, broker: NatsBroker, *, timeout_s: float = 5.0) -> None:
        self._broker = broker
        self._timeout_s = timeout_s

    async def publish(self, envelope: Envelope) -> None:
        """Publish `envelope` on its subject; raises if the stream does not acknowledge it in time."""
        await self._broker.publish(
            envelope.to_bytes(),
            envelope.nats_subject,
            headers=event_headers(envelope),
            stream=EVENTS_STREAM,
            timeout=self._timeout_s,
        )
