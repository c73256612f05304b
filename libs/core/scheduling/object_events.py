"""The events that store or remove an API object, as inputs to any state machine that keeps a view of the
cluster (the scheduler's, the preemptor's): one mapping, shared."""

from __future__ import annotations

from libs.events import admission
from libs.events.catalogue import EventType
from libs.events.envelope import EventPayload

from .inputs import Input, ObjectRemoved, ObjectStored
from .objects import ApiObject

OBJECT_EVENTS = (
    EventType.NODE_REGISTERED,
    EventType.NODE_UPDATED,
    EventType.RESOURCESLICE_PUBLISHED,
    EventType.OBJECT_ADMITTED,
    EventType.WORKLOAD_ADMITTED,
    EventType.PODGROUP_ADMITTED,
    EventType.POD_ADMITTED,
    EventType.OBJECT_DELETED,
)
"""The event types `object_input` reads."""

_ADMITTED = (
    admission.NodeRegistered,
    admission.NodeUpdated,
    admission.ResourceSlicePublished,
    admission.ObjectAdmitted,
    admission.WorkloadAdmitted,
    admission.PodGroupAdmitted,
    admission.PodAdmitted,
)


def object_input(payload: EventPayload, cause: str) -> Input | None:
    """An object stored or removed, or None when the event is about something else."""
    if isinstance(payload, _ADMITTED):
        obj = ApiObject.from_manifest(
            payload.object, uid=payload.uid, resource_version=payload.resource_version
        )
        return ObjectStored(obj, cause)
    if isinstance(payload, admission.ObjectDeleted):
        return ObjectRemoved(payload.kind, payload.namespace or "", payload.name, payload.uid, cause)
    return None
