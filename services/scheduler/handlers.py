"""Consumed events onto the scheduler's world: one short mapping per event type."""

from __future__ import annotations

from libs.core.scheduling import PodPhase
from libs.events.admission import (
    NodeRegistered,
    NodeUpdated,
    ObjectAdmitted,
    ObjectDeleted,
    PodAdmitted,
    PodGroupAdmitted,
    ResourceSlicePublished,
    WorkloadAdmitted,
)
from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, EventPayload
from libs.events.scheduling import (
    ClaimsAllocated,
    ClaimsAllocationFailed,
    PodGroupNominated,
    PodGroupNominationCleared,
    PodsEvicted,
    PodsFailed,
    PodsSucceeded,
)
from services.scheduler.adapter import ApiObject
from services.scheduler.scheduler import GangScheduler

SUBJECTS = [
    event.subject
    for event in (
        EventType.NODE_REGISTERED,
        EventType.NODE_UPDATED,
        EventType.RESOURCESLICE_PUBLISHED,
        EventType.OBJECT_ADMITTED,
        EventType.WORKLOAD_ADMITTED,
        EventType.PODGROUP_ADMITTED,
        EventType.POD_ADMITTED,
        EventType.OBJECT_DELETED,
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

_ADMITTED = (
    NodeRegistered,
    NodeUpdated,
    ResourceSlicePublished,
    ObjectAdmitted,
    WorkloadAdmitted,
    PodGroupAdmitted,
    PodAdmitted,
)


def apply_event(scheduler: GangScheduler, envelope: Envelope, payload: EventPayload) -> None:
    cause = str(envelope.event_id)
    if isinstance(payload, _ADMITTED):
        scheduler.apply_object(ApiObject.from_manifest(payload.object, uid=payload.uid), cause=cause)
    elif isinstance(payload, ObjectDeleted):
        scheduler.delete_object(payload.kind, payload.namespace or "", payload.name, payload.uid, cause=cause)
    elif isinstance(payload, PodsSucceeded):
        scheduler.pods_finished([pod.uid for pod in payload.pods], PodPhase.SUCCEEDED, cause=cause)
    elif isinstance(payload, PodsFailed):
        scheduler.pods_finished([pod.uid for pod in payload.pods], PodPhase.FAILED, cause=cause)
    elif isinstance(payload, PodsEvicted):
        scheduler.pods_evicted(pod.uid for pod in payload.pods)
    elif isinstance(payload, PodGroupNominated):
        scheduler.nominate(payload.podgroup.uid, payload.nodes, payload.expires_at, cause=cause)
    elif isinstance(payload, PodGroupNominationCleared):
        scheduler.clear_nomination(payload.podgroup.uid)
    elif isinstance(payload, ClaimsAllocated):
        scheduler.claims_allocated(payload.podgroup.uid, cause=cause)
    elif isinstance(payload, ClaimsAllocationFailed):
        scheduler.claims_failed(payload.podgroup.uid, payload.reason, cause=cause)
