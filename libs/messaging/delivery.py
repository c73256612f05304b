"""JetStream delivery metadata, read defensively: `TestNatsBroker` messages are not JetStream messages."""

from __future__ import annotations

from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.errors import NotJSMessageError


@dataclass(frozen=True)
class Delivery:
    """Which delivery of which stream message this is."""

    attempt: int
    stream_seq: int | None


def delivery_of(msg: Msg) -> Delivery:
    """Attempt number (1 = first delivery) and stream sequence; attempt 1 and no sequence outside JetStream."""
    try:
        metadata = msg.metadata
    except NotJSMessageError:
        return Delivery(attempt=1, stream_seq=None)
    return Delivery(attempt=metadata.num_delivered or 1, stream_seq=metadata.sequence.stream)
