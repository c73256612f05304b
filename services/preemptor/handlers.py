"""Consumed events as the preemptor's inputs: what the scheduler is told, what it bound, what it asks."""

from __future__ import annotations

from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import (
    ClaimsHeld,
    Input,
    NodeHealthChanged,
    PodsBound,
    PodsEvicted,
    PodsFinished,
)
from libs.core.scheduling.node_health import NodeCondition
from libs.core.scheduling.object_events import OBJECT_EVENTS, object_input
from libs.events import scheduling
from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, EventPayload

SUBJECTS = [
    event.subject
    for event in (
        *OBJECT_EVENTS,
        EventType.CLAIMS_ALLOCATED,
        EventType.PODS_BOUND,
        EventType.PODS_SUCCEEDED,
        EventType.PODS_FAILED,
        EventType.PODS_EVICTED,
        EventType.PREEMPTION_REQUESTED,
        EventType.NODE_NOT_READY,
        EventType.NODE_READY,
    )
]
"""Everything that changes which pods hold room (devices and shares included) where, and the requests for
room."""


def cluster_input(envelope: Envelope, payload: EventPayload) -> Input | None:
    """The input an event is to the preemptor's view of the cluster, or None."""
    cause = str(envelope.event_id)
    stored = object_input(payload, cause)
    if stored is not None:
        return stored
    if isinstance(payload, scheduling.PodsBound):
        placements = tuple(
            (pod.pod_uid, pod.node, {cls: tuple(names) for cls, names in pod.devices.items()})
            for pod in payload.pods
        )
        return PodsBound(placements, cause)
    if isinstance(payload, scheduling.ClaimsAllocated):
        allocations = tuple(
            (
                allocation.pod_uid,
                {
                    "resourceClaimName": allocation.claim,
                    "devices": allocation.devices,
                    "shared": allocation.shared,
                },
            )
            for allocation in payload.allocations
        )
        return ClaimsHeld(payload.podgroup.uid, allocations, cause)
    if isinstance(payload, scheduling.PodsSucceeded):
        return PodsFinished(tuple(pod.uid for pod in payload.pods), PodPhase.SUCCEEDED, cause)
    if isinstance(payload, scheduling.PodsFailed):
        return PodsFinished(tuple(pod.uid for pod in payload.pods), PodPhase.FAILED, cause)
    if isinstance(payload, scheduling.PodsEvicted):
        return PodsEvicted(tuple(pod.uid for pod in payload.pods), cause)
    if isinstance(payload, scheduling.NodeNotReady):
        return NodeHealthChanged(payload.node, NodeCondition.NOT_READY, payload.since, cause)
    if isinstance(payload, scheduling.NodeReady):
        return NodeHealthChanged(payload.node, NodeCondition.READY, payload.since, cause)
    return None
