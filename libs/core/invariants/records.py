"""What `podway check` reads of a run, and what it reports: the rows, as plain values."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from libs.core.scheduling.objects import ApiObject


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One row of the audit log."""

    type: str
    correlation_id: str
    payload: Mapping[str, Any]
    event_id: str = ""
    causation_id: str | None = None


@dataclass(frozen=True, slots=True)
class BindingRow:
    pod_uid: str
    node_name: str


@dataclass(frozen=True, slots=True)
class DeviceAllocationRow:
    """A device a ResourceClaim (`namespace/name`) holds (`driver/pool/device`), as the DRA allocator wrote it."""

    claim: str
    device: str
    exclusive: bool


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken promise: which, about what, and what was found."""

    invariant: str
    subject: str
    detail: str


@dataclass(frozen=True, slots=True)
class Records:
    """What a run left behind."""

    objects: Sequence[ApiObject]
    bindings: Sequence[BindingRow]
    events: Sequence[RecordedEvent]
    expected_requests: frozenset[str] = field(default_factory=frozenset)
    """Inference request ids a harness knows it submitted: each must have exactly one outcome."""
    device_allocations: Sequence[DeviceAllocationRow] = ()


def event_time_ms(event_id: str) -> int | None:
    """When an event was made, from its UUIDv7 id (milliseconds); None for an id that is no UUIDv7."""
    try:
        parsed = uuid.UUID(event_id)
    except ValueError:
        return None
    return parsed.int >> 80 if parsed.version == 7 else None


def kept_since_ms(events: Sequence[RecordedEvent]) -> int:
    """When the oldest event the log still keeps was made (milliseconds); 0 for an empty log. What happened
    before it may have been pruned by retention."""
    return min((t for event in events if (t := event_time_ms(event.event_id)) is not None), default=0)
