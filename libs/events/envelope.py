"""The event envelope and the base of every event payload model."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field

from libs.events.catalogue import EventType


def uuid7(unix_ms: int | None = None) -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds then random bits, so ids sort by creation time."""
    ms = int(time.time() * 1000) if unix_ms is None else unix_ms
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return uuid.UUID(int=value)


class EventPayload(BaseModel):
    """Base of the one frozen model per event type. Subclasses set TYPE and SCHEMA_VERSION."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    TYPE: ClassVar[EventType]
    SCHEMA_VERSION: ClassVar[int] = 1


class AggregateRef(BaseModel):
    """The aggregate an event is about."""

    model_config = ConfigDict(frozen=True)

    kind: str = Field(description="Kind of the aggregate, e.g. PodGroup")
    namespace: str | None = Field(default=None, description="Namespace, absent for cluster-scoped kinds")
    name: str = Field(description="Name of the aggregate")
    uid: str | None = Field(default=None, description="Uid of the aggregate when it has one")


class Envelope(BaseModel):
    """What travels on the wire and sits in the audit log: metadata plus the typed payload as a dict."""

    model_config = ConfigDict(frozen=True)

    event_id: uuid.UUID = Field(default_factory=uuid7, description="UUIDv7; also the Nats-Msg-Id")
    type: str = Field(description="Event type from the catalogue, e.g. podgroup.admitted")
    schema_version: int = Field(default=1, description="Version of the payload model")
    occurred_at: datetime = Field(description="When the fact happened (UTC)")
    producer: str = Field(description="Service that produced the event")
    correlation_id: str = Field(description="PodGroup uid or inference request id the story belongs to")
    causation_id: str | None = Field(default=None, description="event_id of the event that caused this one")
    subject: AggregateRef | None = Field(default=None, description="The aggregate the event is about")
    payload: dict[str, Any] = Field(default_factory=dict, description="The typed payload, serialised")

    @classmethod
    def wrap(
        cls,
        payload: EventPayload,
        *,
        producer: str,
        correlation_id: str,
        occurred_at: datetime,
        causation_id: str | None = None,
        subject: AggregateRef | None = None,
        event_id: uuid.UUID | None = None,
    ) -> Envelope:
        # Every value is built here from typed arguments: validating them again is pure cost on the hot path.
        return cls.model_construct(
            event_id=event_id or uuid7(),
            type=payload.TYPE.value,
            schema_version=payload.SCHEMA_VERSION,
            occurred_at=occurred_at.astimezone(UTC),
            producer=producer,
            correlation_id=correlation_id,
            causation_id=causation_id,
            subject=subject,
            payload=payload.model_dump(mode="json"),
        )

    @property
    def nats_subject(self) -> str:
        return EventType(self.type).subject

    def to_bytes(self, *, payload_json: str | None = None) -> bytes:
        """The envelope as JSON; `payload_json`, the payload already serialised, is used as it is (an object's
        event carries the whole object: serialising it once is enough)."""
        if payload_json is None:
            return self.model_dump_json().encode()
        return f'{self.model_dump_json(exclude={"payload"})[:-1]},"payload":{payload_json}}}'.encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        return cls.model_validate_json(data)
