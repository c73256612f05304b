"""Which payload model belongs to which event type, and the schema-version rule for consumers."""

from __future__ import annotations

from typing import TypeVar

from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, EventPayload

P = TypeVar("P", bound=type[EventPayload])

PAYLOAD_MODELS: dict[EventType, type[EventPayload]] = {}


class UnknownSchemaVersion(ValueError):
    """The event carries a schema version this consumer does not know."""


def event_model(cls: P) -> P:
    """Register a payload model as the one model of its event type."""
    if cls.TYPE in PAYLOAD_MODELS:
        raise ValueError(f"{cls.TYPE} already has a payload model: {PAYLOAD_MODELS[cls.TYPE].__name__}")
    PAYLOAD_MODELS[cls.TYPE] = cls
    return cls


def parse_payload(envelope: Envelope) -> EventPayload:
    """The typed payload of an envelope; accepts the model's schema version and the one before it."""
    model = PAYLOAD_MODELS[EventType(envelope.type)]
    if envelope.schema_version not in (model.SCHEMA_VERSION, model.SCHEMA_VERSION - 1):
        raise UnknownSchemaVersion(
            f"{envelope.type} schema_version {envelope.schema_version} is not "
            f"{model.SCHEMA_VERSION} or {model.SCHEMA_VERSION - 1}"
        )
    return model.model_validate(envelope.payload)
