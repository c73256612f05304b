"""Consumed events as the scheduler state machine's inputs: one short mapping per event type."""

from __future__ import annotations

from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import (
    ClaimsAllocated,
    ClaimsAllocationFailed,
    Input,
    Nominated,
    NominationCleared,
    PodsEvicted,
    PodsFinished,
)
from libs.core.scheduling.object_events import OBJECT_EVENTS, object_input
from libs.events import scheduling
from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, EventPayload

SUBJECTS = [
    event.subject
    for event in (
        *OBJECT_EVENTS,
        EventType.PODS_SUCCEEDED,
        EventType.PODS_FAILED,
        EventType.PODS_EVICTED,
        EventType.PODGROUP_NOMINATED,
        EventType.PODGROUP_NOMINATION_CLEARED,
        EventType.CLAIMS_ALLOCATED,
        EventType.CLAIMS_ALLOCATION_FAILED,
    )
]
"""Everything that changes what the scheduler may place where."""


def machine_input(envelope: Envelope, payload: EventPayload) -> Input | None:
    """The input an event is to the scheduler, or None when it is none of its business."""
    cause = str(envelope.event_id)
    stored = object_input(payload, cause)
    if stored is not None:
        return stored
    if isinstance(payload, scheduling.PodsSucceeded):
        return PodsFinished(tuple(pod.uid for pod in payload.pods), PodPhase.SUCCEEDED, cause)
    if isinstance(payload, scheduling.PodsFailed):
        return PodsFinished(tuple(pod.uid for pod in payload.pods), PodPhase.FAILED, cause)
    if isinstance(payload, scheduling.PodsEvicted):
        return PodsEvicted(tuple(pod.uid for pod in payload.pods), cause)
    if isinstance(payload, scheduling.PodGroupNominated):
        return Nominated(payload.podgroup.uid, tuple(payload.nodes), payload.expires_at, cause)
    if isinstance(payload, scheduling.PodGroupNominationCleared):
        return NominationCleared(payload.podgroup.uid, cause)
    if isinstance(payload, scheduling.ClaimsAllocated):
        devices = frozenset(
            (allocation.claim, f"{device.get('driver')}/{device.get('pool')}/{device.get('device')}")
            for allocation in payload.allocations
            for device in allocation.devices
        )
        return ClaimsAllocated(payload.podgroup.uid, cause, devices if payload.allocations else None)
    if isinstance(payload, scheduling.ClaimsAllocationFailed):
        return ClaimsAllocationFailed(payload.podgroup.uid, payload.reason, cause)
    return None
