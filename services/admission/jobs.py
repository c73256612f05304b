"""The Job controller's wiring: load a Job with what it owns, sync it, write what it decided."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from libs.api.jobs import JOB_NAME_LABEL, gang_pod_group_name
from libs.core.admission.apply import ApplyContext
from libs.core.admission.delete import owned_by
from libs.core.admission.job_controller import REPLICA_FAILURE, sync_job
from libs.core.admission.jobs import newly_finished
from libs.core.admission.model import KnownObject, ObjectKey
from libs.db.ports import UnitOfWork
from libs.db.records import StoredObject
from libs.events.admission import JobFinished
from libs.events.envelope import AggregateRef, Envelope
from libs.events.scheduling import PodGroupRef, PodRef
from services.admission.store import PRODUCER, known_from_stored, load_view, write_decision

JobKey = tuple[str, str]
"""(namespace, name) of a Job."""


async def jobs_of_pods(uow: UnitOfWork, pods: Iterable[PodRef]) -> set[JobKey]:
    """The Jobs that control any of these pods."""
    return await uow.objects.controllers_of(sorted({("Pod", p.namespace, p.name) for p in pods}), "Job")


async def jobs_of_groups(uow: UnitOfWork, groups: Iterable[PodGroupRef]) -> set[JobKey]:
    """The Jobs that control any of these PodGroups."""
    keys = sorted({("PodGroup", g.namespace, g.name) for g in groups})
    return await uow.objects.controllers_of(keys, "Job")


async def jobs_named_by_pods(uow: UnitOfWork, pods: Iterable[tuple[str, str]]) -> set[JobKey]:
    """The Jobs whose names a deleted pod's name starts with (a Job's pods are named after it; the pod
    itself is gone, so its labels can no longer say)."""
    candidates = {
        ("Job", namespace, "-".join(parts[:cut]))
        for namespace, name in pods
        for parts in [name.split("-")]
        for cut in range(1, len(parts))
    }
    return {(job.namespace, job.name) for job in await uow.objects.get_many(sorted(candidates))}


async def jobs_failing_to_create(uow: UnitOfWork) -> set[JobKey]:
    """Jobs that said a wave was refused: worth trying again once what refused it may have changed."""
    return {
        (job.namespace, job.name)
        for job in await uow.objects.find("Job")
        if any(c.get("type") == REPLICA_FAILURE for c in job.status.get("conditions") or [])
    }


async def every_job(uow: UnitOfWork) -> set[JobKey]:
    return {(job.namespace, job.name) for job in await uow.objects.find("Job")}


async def sync_jobs(uow: UnitOfWork, jobs: Iterable[JobKey], ctx: ApplyContext, cause: str | None) -> None:
    """Sync each Job once (see sync_job) and write what it decided in the unit of work. What they own, the
    bindings of their pods and every PriorityClass are read once for all of them."""
    loaded: list[tuple[StoredObject, KnownObject, list[KnownObject]]] = []
    for namespace, name in sorted(set(jobs)):
        stored = await uow.objects.get("Job", namespace, name)
        if stored is None:
            continue
        job = known_from_stored(stored)
        found = await uow.objects.find("Pod", namespace, labels={JOB_NAME_LABEL: name})
        found += await uow.objects.get_many([("PodGroup", namespace, gang_pod_group_name(name))])
        loaded.append((stored, job, owned_by(job, [known_from_stored(o) for o in found])))
    if not loaded:
        return
    keys = [key for _, job, owned in loaded for key in [*(o.key for o in owned), _workload_of(job)]]
    view = await load_view(uow, keys)
    pods = [o.uid for _, _, owned in loaded for o in owned if o.kind == "Pod"]
    bound = {b.pod_uid: b.node_name for b in await uow.bindings.get_many(pods)}
    for stored, job, owned in loaded:
        sync = sync_job(job, owned, bound, view, ctx)
        await write_decision(uow, sync.decision, now=ctx.now, causation_id=cause)
        if sync.status != stored.status:
            await uow.objects.update_status(
                "Job", job.namespace, job.name, sync.status, expected_resource_version=stored.resource_version
            )
            finished = newly_finished(stored.status, sync.status)
            if finished is not None:
                uow.emit(_finished_event(job, finished, ctx.now, cause))


def _workload_of(job: KnownObject) -> ObjectKey:
    """The Workload a gang Job generated (its new PodGroups refer to its template)."""
    return ("Workload", job.namespace, job.name)


def _finished_event(
    job: KnownObject, condition: dict[str, Any], now: datetime, cause: str | None
) -> Envelope:
    payload = JobFinished(
        namespace=job.namespace,
        name=job.name,
        uid=job.uid,
        condition=condition["type"],
        reason=str(condition.get("reason") or ""),
        message=str(condition.get("message") or ""),
    )
    subject = AggregateRef(kind="Job", namespace=job.namespace, name=job.name, uid=job.uid)
    return Envelope.wrap(
        payload,
        producer=PRODUCER,
        correlation_id=job.uid,
        occurred_at=now,
        causation_id=cause,
        subject=subject,
    )
