"""Consumed events as the preemptor's inputs: what the scheduler is told, what it bound, what it asks."""

from __future__ import annotations

from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import (
    Input,
    ObjectRemoved,
    ObjectStored,
    PodsBound,
    PodsEvicted,
    PodsFinished,
)
from libs.core.scheduling.objects import ApiObject
from libs.events import admission, scheduling
from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, EventPayload

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
        EventType.PODS_BOUND,
        EventType.PODS_SUCCEEDED,
        EventType.PODS_FAILED,
        EventType.PODS_EVICTED,
        EventType.PREEMPTION_REQUESTED,
    )
]
"""Everything that changes which pods hold room where, and the requests for room."""

_ADMITTED = (
    admission.NodeRegistered,
    admission.NodeUpdated,
    admission.ResourceSlicePublished,
    admission.ObjectAdmitted,
    admission.WorkloadAdmitted,
    admission.PodGroupAdmitted,
    admission.PodAdmitted,
)


def cluster_input(envelope: Envelope, payload: EventPayload) -> Input | None:
    """The input an event is to the preemptor's view of the cluster, or None."""
    cause = str(envelope.event_id)
    if isinstance(payload, _ADMITTED):
        obj = ApiObject.from_manifest(
            payload.object, uid=payload.uid, resource_version=payload.resource_version
        )
        return ObjectStored(obj, cause)
    if isinstance(payload, admission.ObjectDeleted):
        return ObjectRemoved(payload.kind, payload.namespace or "", payload.name, payload.uid, cause)
    if isinstance(payload, scheduling.PodsBound):
        placements = tuple(
            (pod.pod_uid, pod.node, {cls: tuple(names) for cls, names in pod.devices.items()})
            for pod in payload.pods
        )
        return PodsBound(placements, cause)
    if isinstance(payload, scheduling.PodsSucceeded):
        return PodsFinished(tuple(pod.uid for pod in payload.pods), PodPhase.SUCCEEDED, cause)
    if isinstance(payload, scheduling.PodsFailed):
        return PodsFinished(tuple(pod.uid for pod in payload.pods), PodPhase.FAILED, cause)
    if isinstance(payload, scheduling.PodsEvicted):
        return PodsEvicted(tuple(pod.uid for pod in payload.pods), cause)
    return None
