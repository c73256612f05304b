"""Job controller phase 1, status side: a Job's status derived from the pods it owns."""

from __future__ import annotations

from typing import Any

from libs.api.jobs import COMPLETION_INDEX, terminal_condition
from libs.core.admission.delete import owned_by
from libs.core.admission.model import KnownObject, Manifest
from libs.core.admission.pod_failure_policy import COUNT, FAIL_INDEX, FAIL_JOB, REASON, match_failure

# Pods evicted by preemption end Failed with this reason; they do not count against backoffLimit (as a
# podFailurePolicy ignoring DisruptionTarget would).
DISRUPTION_REASON = "DisruptionTarget"
ACTIVE_PHASES = ("Pending", "Running")
REMOVED_FAILURES = "removedFailures"


def _phase(pod: KnownObject) -> str:
    return str((pod.manifest.get("status") or {}).get("phase") or "Pending")


def is_active(pod: KnownObject) -> bool:
    return _phase(pod) in ACTIVE_PHASES


def counts_as_failure(pod: KnownObject, policy: Manifest | None = None) -> bool:
    """Whether a pod's failure counts toward its Job's backoffLimit: as the first rule of the Job's
    `podFailurePolicy` it matches says (`Count`, `FailJob`), else unless it was evicted."""
    if _phase(pod) != "Failed":
        return False
    matched = match_failure(policy, pod.manifest)
    if matched is not None:
        return matched.action in (COUNT, FAIL_JOB)
    return (pod.manifest.get("status") or {}).get("reason") != DISRUPTION_REASON


def failed_indexes(pods: list[KnownObject], policy: Manifest | None) -> set[int]:
    """Indexes whose pod failed matching a `FailIndex` rule: not run again."""
    return {
        index
        for p in pods
        if _phase(p) == "Failed"
        and (index := completion_index(p)) is not None
        and (matched := match_failure(policy, p.manifest)) is not None
        and matched.action == FAIL_INDEX
    }


def policy_failure(pods: list[KnownObject], policy: Manifest | None) -> str | None:
    """The message of the first failed pod (by name) that matched a `FailJob` rule, if any."""
    if not policy:
        return None
    for pod in sorted(pods, key=lambda p: p.name):
        matched = match_failure(policy, pod.manifest) if _phase(pod) == "Failed" else None
        if matched is not None and matched.action == FAIL_JOB:
            return matched.message
    return None


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
    """The status of `job` from the pods it controls and the failures it counted before removing their pods:
    active / ready / succeeded / failed counts, completed indexes, start time, and the `Complete` or `Failed`
    condition once reached (kept, with its time, once set). Other conditions are kept as they are."""
    spec = job.manifest.get("spec") or {}
    policy = spec.get("podFailurePolicy")
    old: dict[str, Any] = job.manifest.get("status") or {}
    mine = owned_by(job, pods)
    succeeded = [p for p in mine if _phase(p) == "Succeeded"]
    status: dict[str, Any] = {
        "active": sum(1 for p in mine if _phase(p) in ACTIVE_PHASES),
        "ready": sum(1 for p in mine if _phase(p) == "Running"),
        "succeeded": len(succeeded),
        "failed": removed_failures(old) + sum(1 for p in mine if counts_as_failure(p, policy)),
    }
    if removed_failures(old):
        status["podway"] = {REMOVED_FAILURES: removed_failures(old)}
    if old.get("startTime"):
        status["startTime"] = old["startTime"]
    given_up = parse_indexes(old.get("failedIndexes")) | failed_indexes(mine, policy)
    if spec.get("completionMode") == "Indexed":
        indexes = sorted(succeeded_indexes(mine))
        if indexes:
            status["completedIndexes"] = compress_indexes(indexes)
        if given_up:
            status["failedIndexes"] = compress_indexes(sorted(given_up))
    conditions = list(old.get("conditions") or [])
    completions = int(spec.get("completions") or spec.get("parallelism") or 1)
    failing = None if finished(old) else policy_failure(mine, policy)
    if failing is not None:
        conditions.append(_failed(REASON, failing, now))
    elif not finished(old) and given_up and status["succeeded"] + len(given_up) >= completions:
        conditions.append(_failed("FailedIndexes", "Job has failed indexes", now))
    elif not finished(old) and status["succeeded"] >= completions:
        conditions.append({"type": "Complete", "status": "True", "lastTransitionTime": now})
        status["completionTime"] = now
    elif not finished(old) and status["failed"] > int(spec.get("backoffLimit", 6)):
        conditions.append(_failed("BackoffLimitExceeded", "Job has reached the specified backoff limit", now))
    if conditions:
        status["conditions"] = conditions
    if "completionTime" in old:
        status["completionTime"] = old["completionTime"]
    return status


def _failed(reason: str, message: str, now: str) -> Manifest:
    return {
        "type": "Failed",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }


def parse_indexes(text: str | None) -> set[int]:
    """`"0-2,5"` -> `{0, 1, 2, 5}` (the inverse of `compress_indexes`)."""
    indexes: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        indexes.update(range(int(low), int(high or low) + 1))
    return indexes


def given_up_indexes(job: KnownObject, pods: list[KnownObject]) -> set[int]:
    """Indexes of the Job not to run again: failed for good by a `FailIndex` rule."""
    spec = job.manifest.get("spec") or {}
    status = job.manifest.get("status") or {}
    return parse_indexes(status.get("failedIndexes")) | failed_indexes(pods, spec.get("podFailurePolicy"))


def removed_failures(status: Manifest) -> int:
    """Failures counted from pods the controller has since removed (to run their index again)."""
    return int((status.get("podway") or {}).get(REMOVED_FAILURES) or 0)


def newly_finished(old_status: Manifest, new_status: Manifest) -> dict[str, Any] | None:
    """The terminal condition (`Complete` or `Failed`) `new_status` reached and `old_status` had not: what
    `job.finished` announces, once."""
    return None if terminal_condition(old_status) else terminal_condition(new_status)


def finished(status: Manifest) -> bool:
    """Whether the Job reached `Complete` or `Failed`."""
    return terminal_condition(status) is not None


def completion_index(pod: KnownObject) -> int | None:
    index = (pod.manifest["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    return int(index) if index is not None else None


def succeeded_indexes(pods: list[KnownObject]) -> set[int]:
    return {i for p in pods if _phase(p) == "Succeeded" and (i := completion_index(p)) is not None}
