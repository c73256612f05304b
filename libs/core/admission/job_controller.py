"""The Job controller, level-triggered: from a Job and what it owns, what to create, stop or remove now, and
the Job's status. Each Job either progresses as upstream's Job controller would or says in its conditions
why it does not."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libs.api.jobs import gang_pod_group, job_pods
from libs.api.manifests import parse_object
from libs.api.models.batch import COMPLETION_MODE_INDEXED, Job, is_gang_job
from libs.api.models.meta import ApiObject
from libs.core.admission.apply import ApplyContext, admit_document
from libs.core.admission.delete import stop_pods
from libs.core.admission.events import deleted_event
from libs.core.admission.gang_resize import GangResize, plan_gang_resize, resize_gang
from libs.core.admission.jobs import (
    REMOVED_FAILURES,
    completion_index,
    counts_as_failure,
    finished,
    given_up_indexes,
    is_active,
    job_status,
    succeeded_indexes,
)
from libs.core.admission.model import (
    AdmissionView,
    BatchDecision,
    KnownObject,
    Manifest,
    ObjectRemoval,
)
from libs.events.admission import ObjectRejected

SUSPENDED = "Suspended"
REPLICA_FAILURE = "ReplicaFailure"
FAILED_CREATE = "FailedCreate"


@dataclass
class JobSync:
    """What one sync of a Job decided: objects to write and remove, events, and the Job's new status."""

    decision: BatchDecision
    status: Manifest


@dataclass(frozen=True)
class Wave:
    """Pods (and, for a gang, its PodGroup) to create, and the stopped objects they replace."""

    replaced: list[KnownObject]
    created: Sequence[ApiObject]


def sync_job(
    job: KnownObject,
    owned: list[KnownObject],
    bound: Mapping[str, str],
    view: AdmissionView,
    ctx: ApplyContext,
) -> JobSync:
    """Bring one Job a step closer to what its spec asks, as upstream's Job controller does.

    1. A Job being deleted or complete only has its status kept current; one that failed stops its pods.
    2. A suspended Job stops its active pods (condition `Suspended`); a resumed one starts again.
    3. A running gang whose Job was resized (parallelism and completions changed together) is resized in
       place: new indexes join its PodGroup, the highest surplus indexes stop, minCount is clamped down.
    4. Otherwise the next wave is created: plain pods up to `parallelism` while completions are left; a gang
       once none of its pods is active any more (victims hold their room until they stopped), as a new
       PodGroup for the indexes that did not succeed.
    5. A wave admission refuses is not created: condition `ReplicaFailure` (reason `FailedCreate`) says
       why, and the next sync tries again.
    `owned`: the Pods and PodGroup the Job controls; `bound`: node of every bound pod among them; `view`:
    the objects they touch and every PriorityClass."""
    now = _iso(ctx)
    pods = [o for o in owned if o.kind == "Pod"]
    old = job.manifest.get("status") or {}
    current = job_status(job, pods, now=now)
    if job.deletion_requested or finished(current):
        # A Job that failed stops what still runs of it, as upstream terminates a failed Job's pods.
        failed = not job.deletion_requested and _has_condition(current, "Failed")
        stopping = [p for p in pods if is_active(p)] if failed else []
        return JobSync(stop_pods(stopping, owned, bound, ctx.request_id, now=now), current)
    parsed = parse_object(job.manifest)
    assert isinstance(parsed, Job)
    if parsed.spec.suspend:
        return _suspend(job, pods, owned, bound, ctx)
    resize = plan_gang_resize(parsed, owned) if is_gang_job(parsed) else None
    if resize is not None:
        return _resized(job, parsed, owned, resize, bound, view, ctx)
    given_up = given_up_indexes(job, pods)
    wave = _gang_wave(parsed, owned, given_up) if is_gang_job(parsed) else _plain_wave(parsed, pods, given_up)
    decision, refusal = _create(wave, view, ctx) if wave.created else (BatchDecision(), None)
    gone = {obj.key for obj in wave.replaced} if refusal is None else set()
    after = [p for p in pods if p.key not in gone] + _created_pods(decision, view)
    policy = (job.manifest.get("spec") or {}).get("podFailurePolicy")
    carried = sum(
        1 for p in wave.replaced if p.key in gone and p.kind == "Pod" and counts_as_failure(p, policy)
    )
    status = job_status(_carrying(job, carried), after, now=now)
    status = _running(status, old, now)
    return JobSync(decision, _replica_failure(status, refusal, now))


def _resized(
    job: KnownObject,
    parsed: Job,
    owned: list[KnownObject],
    resize: GangResize,
    bound: Mapping[str, str],
    view: AdmissionView,
    ctx: ApplyContext,
) -> JobSync:
    """A running gang resized to its Job's new parallelism (see gang_resize)."""
    now = _iso(ctx)
    decision = resize_gang(parsed, owned, resize, bound, view, ctx)
    removed = {r.uid for r in decision.removals if not r.mark_only}
    pods = [o for o in owned if o.kind == "Pod" and o.uid not in removed]
    status = job_status(job, pods + _created_pods(decision, view), now=now)
    status = _running(status, job.manifest.get("status") or {}, now)
    refused = next((r.message for r in decision.results if r.outcome == "rejected"), None)
    return JobSync(decision, _replica_failure(status, refused, now))


def _suspend(
    job: KnownObject,
    pods: list[KnownObject],
    owned: list[KnownObject],
    bound: Mapping[str, str],
    ctx: ApplyContext,
) -> JobSync:
    now = _iso(ctx)
    active = [p for p in pods if is_active(p)]
    decision = stop_pods(active, owned, bound, ctx.request_id, now=now)
    removed = {r.uid for r in decision.removals if not r.mark_only}
    status = job_status(job, [p for p in pods if p.uid not in removed], now=now)
    status.pop("startTime", None)
    condition = {"type": SUSPENDED, "status": "True", "reason": "JobSuspended", "message": "Job suspended"}
    status["conditions"] = _with_condition(status.get("conditions") or [], condition, now)
    return JobSync(decision, status)


def _running(status: Manifest, old: Manifest, now: str) -> Manifest:
    """A Job not suspended has started (again, after a suspension)."""
    conditions = list(status.get("conditions") or [])
    if _has_condition(status, SUSPENDED):
        resumed = {"type": SUSPENDED, "status": "False", "reason": "JobResumed", "message": "Job resumed"}
        conditions = _with_condition(conditions, resumed, now)
        return {**status, "conditions": conditions, "startTime": now}
    return {**status, "startTime": old.get("startTime") or now}


def _gang_wave(job: Job, owned: list[KnownObject], given_up: set[int]) -> Wave:
    """A gang is created anew once none of its pods is active: a new PodGroup (its placement, domain and
    conditions start afresh) waiting for the indexes that did not succeed (nor failed for good), and their
    pods."""
    pods = [o for o in owned if o.kind == "Pod"]
    groups = [o for o in owned if o.kind == "PodGroup"]
    if any(is_active(p) for p in pods) or any(g.deletion_requested for g in groups):
        return Wave([], [])
    done = succeeded_indexes(pods) | given_up
    left = [i for i in range(job.spec.completions or 0) if i not in done]
    if not left:
        return Wave([], [])
    replaced = groups + [p for p in pods if completion_index(p) in left]
    return Wave(replaced, [gang_pod_group(job, len(left)), *job_pods(job, left)])


def _plain_wave(job: Job, pods: list[KnownObject], given_up: set[int]) -> Wave:
    """Pods up to `parallelism` while completions are left: an Indexed Job's missing indexes (a failed
    index's pod replaced, unless it failed for good), a NonIndexed Job's next pods under fresh names."""
    active = [p for p in pods if is_active(p)]
    room = (job.spec.parallelism or 0) - len(active)
    if room <= 0:
        return Wave([], [])
    if job.spec.completion_mode == COMPLETION_MODE_INDEXED:
        busy = succeeded_indexes(pods) | given_up | {completion_index(p) for p in active}
        todo = [i for i in range(job.spec.completions or 0) if i not in busy][:room]
        return Wave([p for p in pods if completion_index(p) in todo], job_pods(job, todo))
    succeeded = sum(1 for p in pods if (p.manifest.get("status") or {}).get("phase") == "Succeeded")
    if job.spec.completions is None:
        count = 0 if succeeded else room  # a work queue: done once any pod succeeded
    else:
        count = max(0, min(room, job.spec.completions - succeeded - len(active)))
    taken = {p.name for p in pods}
    free = [n for n in range(len(taken) + count) if f"{job.name}-{n}" not in taken]
    return Wave([], job_pods(job, free[:count]))


def _create(wave: Wave, view: AdmissionView, ctx: ApplyContext) -> tuple[BatchDecision, str | None]:
    """The wave admitted whole, or, when admission refuses any of it, nothing but the refusal's events and
    its message."""
    decision = BatchDecision()
    story = next((o.uid for o in wave.replaced if o.kind == "PodGroup"), None)
    for obj in wave.replaced:
        decision.removals.append(_removal(obj))
        decision.events.append(deleted_event(obj, ctx.request_id, story or obj.uid))
        view.drop(obj.key)
    results = [admit_document(o.to_wire(), view, decision, ctx, own_policy=True) for o in wave.created]
    refused = next((r for r in results if r.outcome == "rejected"), None)
    if refused is None:
        return decision, None
    for write in decision.writes:
        view.drop(write.key)
    for obj in wave.replaced:
        view.put(obj)
    events = [e for e in decision.events if isinstance(e.payload, ObjectRejected)]
    return BatchDecision(events=events), refused.message


def _created_pods(decision: BatchDecision, view: AdmissionView) -> list[KnownObject]:
    return [known for w in decision.writes if w.kind == "Pod" and (known := view.get(w.key)) is not None]


def _carrying(job: KnownObject, failures: int) -> KnownObject:
    """The Job with `failures` more counted from pods about to be removed (so its backoff limit holds)."""
    if not failures:
        return job
    status: dict[str, Any] = dict(job.manifest.get("status") or {})
    carried = int((status.get("podway") or {}).get(REMOVED_FAILURES) or 0) + failures
    status["podway"] = {**(status.get("podway") or {}), REMOVED_FAILURES: carried}
    return dataclasses.replace(job, manifest={**job.manifest, "status": status})


def _replica_failure(status: Manifest, refusal: str | None, now: str) -> Manifest:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != REPLICA_FAILURE]
    if refusal is not None:
        failure = {"type": REPLICA_FAILURE, "status": "True", "reason": FAILED_CREATE, "message": refusal}
        conditions = _with_condition(status.get("conditions") or [], failure, now)
    updated = {k: v for k, v in status.items() if k != "conditions"}
    return {**updated, "conditions": conditions} if conditions else updated


def _with_condition(conditions: list[Manifest], condition: Manifest, now: str) -> list[Manifest]:
    """`conditions` with `condition` set; its transition time moves only when its status changes."""
    old = next((c for c in conditions if c.get("type") == condition["type"]), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == condition["status"] else now
    others = [c for c in conditions if c.get("type") != condition["type"]]
    return [*others, {**condition, "lastTransitionTime": since}]


def _has_condition(status: Manifest, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def _removal(obj: KnownObject) -> ObjectRemoval:
    return ObjectRemoval(obj.kind, obj.namespace, obj.name, obj.uid, obj.resource_version)


def _iso(ctx: ApplyContext) -> str:
    return ctx.now.strftime("%Y-%m-%dT%H:%M:%SZ")
