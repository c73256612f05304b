"""Elastic gang Jobs: a running gang Job whose `parallelism` (and, in tandem, `completions`) changed is
resized in place, as Kueue's elastic Jobs and KAI's elastic PodGroups are, rather than started anew.

- Scale up: the missing completion indexes get pods in the same PodGroup; the scheduler places them in the
  running gang's topology domain, or they wait saying why.
- Scale down: the active pods whose completion index is no longer below `parallelism` are stopped, the
  highest indexes first (a running pod is evicted from its node, as a delete would).
- minCount is the gang's floor, not its size: a scale up leaves it, a scale down clamps it to the new
  `parallelism` (in the same transaction), so the gang never runs below its minCount and is not restarted
  for shrinking. Pods above minCount are the elastic part the preemptor may take first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from libs.api.jobs import job_pods
from libs.api.models.batch import Job
from libs.core.admission.apply import ApplyContext, admit_document
from libs.core.admission.delete import stop_pods
from libs.core.admission.jobs import completion_index, is_active
from libs.core.admission.model import AdmissionView, BatchDecision, KnownObject, Manifest


@dataclass(frozen=True)
class GangResize:
    """How a running gang follows its Job's new size: pods to stop, indexes to add, the minCount to set."""

    stopped: list[KnownObject]
    added: list[int]
    min_count: int | None
    """The PodGroup's new minCount, None when it stays."""


def plan_gang_resize(job: Job, owned: list[KnownObject]) -> GangResize | None:
    """What resizing the Job's running gang takes; None when the gang is not running (the Job controller
    then creates it whole at its current size) or already has the Job's size."""
    pods = [o for o in owned if o.kind == "Pod"]
    group = live_pod_group(owned)
    if group is None or not any(is_active(p) for p in pods):
        return None
    size = job.spec.parallelism or 0
    surplus = [p for p in pods if is_active(p) and not p.deletion_requested and _index(p) >= size]
    present = {_index(p) for p in pods}
    added = [i for i in range(size) if i not in present]
    current = gang_min_count(group.manifest)
    min_count = size if current is not None and current > size else None
    if not surplus and not added and min_count is None:
        return None
    stopped = sorted(surplus, key=_index, reverse=True)
    return GangResize(stopped, added, min_count)


def resize_gang(
    job: Job,
    owned: list[KnownObject],
    resize: GangResize,
    bound: Mapping[str, str],
    view: AdmissionView,
    ctx: ApplyContext,
) -> BatchDecision:
    """The resize as one decision: the PodGroup's minCount clamped, surplus pods stopped, new pods admitted.
    A pod admission refuses is left out (its result says why); the next sync tries it again."""
    now = ctx.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    decision = stop_pods(resize.stopped, owned, bound, ctx.request_id, now=now)
    group = live_pod_group(owned)
    if resize.min_count is not None and group is not None:
        admit_document(with_min_count(group.manifest, resize.min_count), view, decision, ctx)
    for pod in job_pods(job, resize.added):
        decision.results.append(admit_document(pod.to_wire(), view, decision, ctx, own_policy=True))
    return decision


def live_pod_group(owned: list[KnownObject]) -> KnownObject | None:
    return next((o for o in owned if o.kind == "PodGroup" and not o.deletion_requested), None)


def gang_min_count(manifest: Manifest) -> int | None:
    gang = ((manifest.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    return int(gang.get("minCount") or 1) if isinstance(gang, dict) else None


def with_min_count(manifest: Manifest, min_count: int) -> dict[str, Any]:
    spec = dict(manifest.get("spec") or {})
    spec["schedulingPolicy"] = {"gang": {"minCount": min_count}}
    return {**manifest, "spec": spec}


def _index(pod: KnownObject) -> int:
    index = completion_index(pod)
    return index if index is not None else -1
