"""Job controller phase 1, status side: a Job's status derived from the pods it owns."""

from __future__ import annotations

from typing import Any

from libs.api.jobs import COMPLETION_INDEX, expand_job, terminal_condition
from libs.api.manifests import parse_object
from libs.api.models.batch import Job
from libs.core.admission.apply import ApplyContext, admit_document
from libs.core.admission.delete import owned_by, pods_of_group
from libs.core.admission.events import deleted_event
from libs.core.admission.model import AdmissionView, BatchDecision, KnownObject, Manifest, ObjectRemoval

# Pods evicted by preemption end Failed with this reason; they do not count against backoffLimit (as a
# podFailurePolicy ignoring DisruptionTarget would).
DISRUPTION_REASON = "DisruptionTarget"


def _phase(pod: KnownObject) -> str:
    return str((pod.manifest.get("status") or {}).get("phase") or "Pending")


def _counts_as_failure(pod: KnownObject) -> bool:
    return _phase(pod) == "Failed" and (pod.manifest.get("status") or {}).get("reason") != DISRUPTION_REASON


def compress_indexes(indexes: list[int]) -> str:
    """`[0, 1, 2, 5, 7, 8]` -> `"0-2,5,7-8"`, as Job `status.completedIndexes` writes them."""
    ranges: list[str] = []
    for index in sorted(set(indexes)):
        if ranges and ranges[-1].split("-")[-1] == str(index - 1):
            start = ranges[-1].split("-")[0]
            ranges[-1] = f"{start}-{index}"
        else:
            ranges.append(str(index))
    return ",".join(ranges)


def job_status(job: KnownObject, pods: list[KnownObject], *, now: str) -> Manifest:
    """The status of `job` from the pods it controls: active / succeeded / failed counts, completed indexes,
    and the `Complete` or `Failed` condition once reached (kept, with its time, once set)."""
    spec = job.manifest.get("spec") or {}
    old: dict[str, Any] = job.manifest.get("status") or {}
    mine = owned_by(job, pods)
    succeeded = [p for p in mine if _phase(p) == "Succeeded"]
    status: dict[str, Any] = {
        "active": sum(1 for p in mine if _phase(p) in ("Pending", "Running")),
        "succeeded": len(succeeded),
        "failed": sum(1 for p in mine if _counts_as_failure(p)),
    }
    if spec.get("completionMode") == "Indexed":
        indexes = [
            int(i)
            for p in succeeded
            if (i := (p.manifest["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)) is not None
        ]
        if indexes:
            status["completedIndexes"] = compress_indexes(indexes)
    conditions = list(old.get("conditions") or [])
    finished = {c.get("type") for c in conditions if c.get("status") == "True"}
    completions = int(spec.get("completions") or spec.get("parallelism") or 1)
    if not finished and status["succeeded"] >= completions:
        conditions.append({"type": "Complete", "status": "True", "lastTransitionTime": now})
        status["completionTime"] = now
    elif not finished and status["failed"] > int(spec.get("backoffLimit", 6)):
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
                "lastTransitionTime": now,
            }
        )
    if conditions:
        status["conditions"] = conditions
    if "completionTime" in old:
        status["completionTime"] = old["completionTime"]
    return status


def newly_finished(old_status: Manifest, new_status: Manifest) -> dict[str, Any] | None:
    """The terminal condition (`Complete` or `Failed`) `new_status` reached and `old_status` had not: what
    `job.finished` announces, once."""
    return None if terminal_condition(old_status) else terminal_condition(new_status)


def job_failed(job: KnownObject) -> bool:
    conditions = (job.manifest.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Failed" and c.get("status") == "True" for c in conditions)


def recreate_gang_pods(
    job: KnownObject, group: KnownObject, pods: list[KnownObject], view: AdmissionView, ctx: ApplyContext
) -> BatchDecision:
    """Job controller: a gang of this Job was restarted (or preempted), so its pods are replaced by fresh ones
    (new uids, no status) and the whole gang is queued again. A Job past its backoff limit is left failed,
    and nothing is recreated for a Job or PodGroup being deleted."""
    decision = BatchDecision()
    if job_failed(job) or job.deletion_requested or group.deletion_requested:
        return decision
    parsed = parse_object(job.manifest)
    assert isinstance(parsed, Job)
    fresh = {pod.name: pod for pod in expand_job(parsed).pods}
    for pod in pods_of_group(group, pods):
        if pod.name not in fresh:
            continue
        decision.removals.append(
            ObjectRemoval(pod.kind, pod.namespace, pod.name, pod.uid, pod.resource_version)
        )
        decision.events.append(deleted_event(pod, ctx.request_id, group.uid))
        view.drop(pod.key)
        # Without a generated uid the server assigns a fresh one: a new incarnation, never the old identity.
        admit_document(fresh[pod.name].to_wire(), view, decision, ctx)
    return decision
