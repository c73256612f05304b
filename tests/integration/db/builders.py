"""Builders for persistence and messaging tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from libs.db.records import ObjectDraft
from libs.events.catalogue import EventType
from libs.events.envelope import AggregateRef, Envelope, uuid7

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def make_envelope(
    type_: EventType = EventType.JOB_SUBMITTED,
    *,
    correlation_id: str = "pg-1",
    payload: dict[str, Any] | None = None,
    occurred_at: datetime = T0,
    causation_id: str | None = None,
    event_id: uuid.UUID | None = None,
) -> Envelope:
    return Envelope(
        event_id=event_id or uuid7(),
        type=type_.value,
        occurred_at=occurred_at,
        producer="test",
        correlation_id=correlation_id,
        causation_id=causation_id,
        subject=AggregateRef(kind="PodGroup", namespace="ml", name="train-0", uid=correlation_id),
        payload=payload or {"n": 1},
    )


def make_draft(
    name: str = "train-0",
    *,
    kind: str = "PodGroup",
    namespace: str = "ml",
    spec: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    uid: str | None = None,
) -> ObjectDraft:
    return ObjectDraft(
        kind=kind,
        api_version="scheduling.k8s.io/v1alpha2",
        namespace=namespace,
        name=name,
        spec=spec or {"minCount": 2},
        metadata={"labels": labels or {}},
        uid=uid,
    )


def make_pod(uid: str, *, status: dict[str, Any] | None = None) -> ObjectDraft:
    """A pod named after its uid (bindings refer to pods by uid)."""
    return ObjectDraft(
        kind="Pod", api_version="v1", namespace="ml", name=uid, spec={}, status=status or {}, uid=uid
    )
