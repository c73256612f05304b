"""Keeping Job status current as the pods it owns change phase."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from libs.api.jobs import JOB_NAME_LABEL
from libs.core.admission.apply import ApplyContext
from libs.core.admission.jobs import job_status, newly_finished, recreate_gang_pods
from libs.core.admission.model import BatchDecision, KnownObject
from libs.db.ports import UnitOfWork
from libs.events.admission import JobFinished
from libs.events.envelope import AggregateRef, Envelope
from libs.events.scheduling import PodGroupRef, PodRef
from services.admission.store import PRODUCER, iso, known_from_stored, load_view


async def refresh_job_status(uow: UnitOfWork, pods: Iterable[PodRef], *, now: datetime) -> None:
    """Recompute the status of every Job that owns one of `pods`."""
    owners = await uow.objects.controllers_of(sorted({("Pod", p.namespace, p.name) for p in pods}), "Job")
    await _refresh(uow, owners, now=now)


async def refresh_every_job_status(uow: UnitOfWork, *, now: datetime) -> None:
    """Recompute the status of every Job (when the events that would have said what changed were lost)."""
    await _refresh(uow, {(job.namespace, job.name) for job in await uow.objects.find("Job")}, now=now)


async def _refresh(uow: UnitOfWork, owners: set[tuple[str, str]], *, now: datetime) -> None:
    for namespace, name in sorted(owners):
        stored = await uow.objects.get("Job", namespace, name)
        if stored is None:
            continue
        job = known_from_stored(stored)
        siblings = [
            known_from_stored(o)
            for o in await uow.objects.find("Pod", namespace, labels={JOB_NAME_LABEL: name})
        ]
        status = job_status(job, siblings, now=iso(now))
        if status != stored.status:
            await uow.objects.update_status("Job", namespace, name, status)
            finished = newly_finished(stored.status, status)
            if finished is not None:
                uow.emit(_finished_event(job, finished, now))


def _finished_event(job: KnownObject, condition: dict[str, Any], now: datetime) -> Envelope:
    payload = JobFinished(
        namespace=job.namespace,
        name=job.name,
        uid=job.uid,
        condition=condition["type"],
        reason=str(condition.get("reason") or ""),
        message=str(condition.get("message") or ""),
    )
    subject = AggregateRef(kind="Job", namespace=job.namespace, name=job.name, uid=job.uid)
    return Envelope.wrap(payload, producer=PRODUCER, correlation_id=job.uid, occurred_at=now, subject=subject)


async def recreate_restarted_gang(uow: UnitOfWork, ref: PodGroupRef, ctx: ApplyContext) -> BatchDecision:
    """A restarted gang owned by a Job gets fresh pods; other gangs are left to their owners."""
    stored = await uow.objects.get("PodGroup", ref.namespace, ref.name)
    owner = (
        next(
            (
                r
                for r in (stored.metadata.get("ownerReferences") or [])
                if r.get("kind") == "Job" and r.get("controller")
            ),
            None,
        )
        if stored
        else None
    )
    if stored is None or owner is None:
        return BatchDecision()
    job = await uow.objects.get("Job", ref.namespace, str(owner.get("name")))
    if job is None:
        return BatchDecision()
    pods = [known_from_stored(o) for o in await uow.objects.find("Pod", ref.namespace)]
    view = await load_view(uow, [p.key for p in pods])
    return recreate_gang_pods(known_from_stored(job), known_from_stored(stored), pods, view, ctx)
