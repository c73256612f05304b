"""The events admission emits, built from its decisions."""

from __future__ import annotations

from typing import Literal

from libs.api.jobs import JobExpansion
from libs.api.manifests import ValidationResult
from libs.api.models.batch import Job
from libs.core.admission.model import AdmissionView, EmittedEvent, KnownObject
from libs.events.admission import (
    JobAdmitted,
    JobExpanded,
    NodeRegistered,
    NodeUpdated,
    ObjectAdmitted,
    ObjectDeleted,
    ObjectRejected,
    PodAdmitted,
    PodGroupAdmitted,
    RejectionCause,
    ResourceSlicePublished,
    WorkloadAdmitted,
)
from libs.events.envelope import AggregateRef
from libs.events.rpc import ObjectResult
from libs.events.scheduling import PodGroupRef, PodRef, PodsEvicted

_ADMITTED = {
    "Workload": WorkloadAdmitted,
    "PodGroup": PodGroupAdmitted,
    "Pod": PodAdmitted,
    "Job": JobAdmitted,
    "ResourceSlice": ResourceSlicePublished,
}


def aggregate(known: KnownObject) -> AggregateRef:
    return AggregateRef(kind=known.kind, namespace=known.namespace or None, name=known.name, uid=known.uid)


def correlation_of(known: KnownObject, view: AdmissionView) -> str:
    """Whose story an object's event belongs to: a Pod's PodGroup when it has one, else the object itself."""
    if known.kind == "Pod":
        group = ((known.manifest.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        stored = view.get(("PodGroup", known.namespace, group)) if group else None
        if stored is not None:
            return stored.uid
    return known.uid


def admitted_event(
    known: KnownObject,
    outcome: Literal["created", "updated"],
    warnings: list[str],
    request_id: str,
    correlation_id: str,
) -> EmittedEvent:
    model = _ADMITTED.get(known.kind, ObjectAdmitted)
    if known.kind == "Node":
        model = NodeRegistered if outcome == "created" else NodeUpdated
    # Built from an object admission has just validated: constructed, not validated again.
    payload = model.model_construct(
        kind=known.kind,
        api_version=str(known.manifest.get("apiVersion")),
        namespace=known.namespace or None,
        name=known.name,
        uid=known.uid,
        outcome=outcome,
        resource_version=known.resource_version,
        object=known.manifest,
        warnings=warnings,
        request_id=request_id,
    )
    return EmittedEvent(payload=payload, correlation_id=correlation_id, subject=aggregate(known))


def unchanged_job_event(known: KnownObject, request_id: str) -> EmittedEvent:
    """`job.admitted` with outcome `unchanged`: the answer to a Job submitted again as it is stored (an apply
    is answered by its reply, a submission only by events)."""
    payload = JobAdmitted.model_construct(
        kind=known.kind,
        api_version=str(known.manifest.get("apiVersion")),
        namespace=known.namespace or None,
        name=known.name,
        uid=known.uid,
        outcome="unchanged",
        resource_version=known.resource_version,
        object=known.manifest,
        warnings=[],
        request_id=request_id,
    )
    return EmittedEvent(payload=payload, correlation_id=known.uid, subject=aggregate(known))


def rejected_event(result: ValidationResult, request_id: str) -> EmittedEvent:
    causes = [RejectionCause(reason=e.type.value, field=e.path, message=e.body()) for e in result.errors]
    payload = ObjectRejected(
        kind=result.kind or None,
        namespace=result.namespace,
        name=result.name or None,
        message=result.message,
        causes=causes,
        request_id=request_id,
    )
    subject = AggregateRef(kind=result.kind or "Unknown", namespace=result.namespace, name=result.name or "")
    return EmittedEvent(payload=payload, correlation_id=request_id, subject=subject)


def refused_event(result: ObjectResult, request_id: str) -> EmittedEvent:
    """`object.rejected` for a manifest refused as a whole (no field errors), e.g. a name being deleted."""
    payload = ObjectRejected(
        kind=result.kind,
        namespace=result.namespace,
        name=result.name,
        message=result.message,
        request_id=request_id,
    )
    subject = AggregateRef(kind=result.kind or "Unknown", namespace=result.namespace, name=result.name or "")
    return EmittedEvent(payload=payload, correlation_id=request_id, subject=subject)


def expanded_event(job: Job, known: KnownObject, expansion: JobExpansion, request_id: str) -> EmittedEvent:
    payload = JobExpanded(
        namespace=known.namespace,
        job_name=known.name,
        job_uid=known.uid,
        gang=expansion.podgroup is not None,
        workload_name=expansion.workload.name if expansion.workload else None,
        podgroup_name=expansion.podgroup.name if expansion.podgroup else None,
        pod_names=[pod.name for pod in expansion.pods],
    )
    return EmittedEvent(payload=payload, correlation_id=known.uid, subject=aggregate(known))


def deleted_event(known: KnownObject, request_id: str, correlation_id: str) -> EmittedEvent:
    payload = ObjectDeleted(
        kind=known.kind,
        namespace=known.namespace or None,
        name=known.name,
        uid=known.uid,
        request_id=request_id,
    )
    return EmittedEvent(payload=payload, correlation_id=correlation_id, subject=aggregate(known))


def evicted_event(
    pods: list[PodRef],
    reason: str,
    group: KnownObject | None,
    request_id: str,
    *,
    grace_seconds: int | None = None,
) -> EmittedEvent:
    """`pods.evicted` for pods of one PodGroup (`group`), or for one pod without a group."""
    if group is not None:
        ref = PodGroupRef(namespace=group.namespace, name=group.name, uid=group.uid)
        payload = PodsEvicted(pods=pods, reason=reason, podgroup=ref, grace_seconds=grace_seconds)
        return EmittedEvent(payload=payload, correlation_id=group.uid, subject=aggregate(group))
    pod = pods[0]
    subject = AggregateRef(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid)
    payload = PodsEvicted(pods=pods, reason=reason, grace_seconds=grace_seconds)
    return EmittedEvent(payload=payload, correlation_id=pod.uid, subject=subject)
