"""The dead-letter queue: `podway.dlq.<consumer>` on stream PODWAY_DLQ, the original bytes plus the reason."""

from __future__ import annotations

from enum import StrEnum

from faststream.nats import NatsBroker
from nats.aio.msg import Msg

from libs.events.catalogue import DLQ_STREAM, dlq_subject
from libs.messaging.delivery import Delivery
from libs.messaging.publisher import MSG_ID_HEADER

REASON_HEADER = "Podway-Dlq-Reason"
DETAIL_HEADER = "Podway-Dlq-Detail"
CONSUMER_HEADER = "Podway-Dlq-Consumer"
SUBJECT_HEADER = "Podway-Dlq-Original-Subject"
ATTEMPTS_HEADER = "Podway-Dlq-Attempts"
MAX_DETAIL_CHARS = 2000


class DeadLetterReason(StrEnum):
    """Why a message was taken out of a consumer's way."""

    MALFORMED_ENVELOPE = "MalformedEnvelope"
    UNKNOWN_EVENT_TYPE = "UnknownEventType"
    UNKNOWN_SCHEMA_VERSION = "UnknownSchemaVersion"
    INVALID_PAYLOAD = "InvalidPayload"
    HANDLER_FAILED = "HandlerFailed"


async def dead_letter(
    broker: NatsBroker, consumer: str, msg: Msg, delivery: Delivery, reason: DeadLetterReason, detail: str
) -> None:
    """Publish the message's original bytes to the consumer's DLQ subject with the reason in headers.

    The Msg-Id is derived from the stream position, so a consumer that dies between this and its ack does not
    dead-letter the same message twice.
    """
    headers = {
        REASON_HEADER: reason.value,
        DETAIL_HEADER: _single_line(detail)[:MAX_DETAIL_CHARS],
        CONSUMER_HEADER: consumer,
        SUBJECT_HEADER: msg.subject,
        ATTEMPTS_HEADER: str(delivery.attempt),
    }
    if delivery.stream_seq is not None:
        headers[MSG_ID_HEADER] = f"dlq:{consumer}:{delivery.stream_seq}"
    await broker.publish(msg.data, dlq_subject(consumer), headers=headers, stream=DLQ_STREAM, timeout=5.0)


def _single_line(text: str) -> str:
    # Header values cannot carry line breaks.
    return " ".join(text.split())
