"""Delete: remove an object; a PodGroup only once its pods have finished; a Job with what it generated."""

from __future__ import annotations

from collections.abc import Iterable

from libs.core.admission.events import deleted_event
from libs.core.admission.model import AdmissionView, BatchDecision, KnownObject, ObjectKey, ObjectRemoval
from libs.events.rpc import ObjectResult

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def pod_finished(pod: KnownObject) -> bool:
    return (pod.manifest.get("status") or {}).get("phase") in FINISHED_PHASES


def pods_of_group(group: KnownObject, pods: Iterable[KnownObject]) -> list[KnownObject]:
    """The pods whose `spec.schedulingGroup` names this PodGroup."""
    return [
        pod
        for pod in pods
        if pod.namespace == group.namespace
        and ((pod.manifest.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == group.name
    ]


def owned_by(owner: KnownObject, candidates: Iterable[KnownObject]) -> list[KnownObject]:
    """Objects whose controller reference points at `owner` (by uid, or by kind and name without one)."""
    owned = []
    for obj in candidates:
        for ref in (obj.manifest.get("metadata") or {}).get("ownerReferences") or []:
            same_uid = ref.get("uid") == owner.uid
            same_name = not ref.get("uid") and ref.get("kind") == owner.kind and ref.get("name") == owner.name
            if ref.get("controller") and (same_uid or same_name):
                owned.append(obj)
    return owned


def decide_delete(
    key: ObjectKey,
    view: AdmissionView,
    pods: list[KnownObject],
    request_id: str,
    dependents: list[KnownObject],
) -> BatchDecision:
    """Delete one object. `pods` are the pods of its namespace (for PodGroup protection), `dependents` the
    objects that may be owned by it (for a Job's cascade)."""
    decision = BatchDecision()
    target = view.get(key)
    if target is None:
        kind, namespace, name = key
        decision.results.append(
            ObjectResult(
                kind=kind,
                namespace=namespace or None,
                name=name,
                outcome="not_found",
                message=f'{kind.lower()}s "{name}" not found',
            )
        )
        return decision
    removed = {d.key for d in owned_by(target, dependents) if d.kind == "Pod"}
    for dependent in owned_by(target, dependents):
        remaining = [p for p in pods if p.key not in removed]
        _remove(dependent, remaining, decision, request_id)
    remaining_pods = [p for p in pods if p.key not in removed]
    decision.results.insert(0, _remove(target, remaining_pods, decision, request_id))
    return decision


def _remove(
    obj: KnownObject, pods: list[KnownObject], decision: BatchDecision, request_id: str
) -> ObjectResult:
    if obj.kind == "PodGroup":
        running = [p for p in pods_of_group(obj, pods) if not pod_finished(p)]
        if running:
            decision.removals.append(_removal(obj, mark_only=True))
            return ObjectResult(
                kind=obj.kind,
                namespace=obj.namespace or None,
                name=obj.name,
                uid=obj.uid,
                outcome="pending",
                message=f"deletion waits for {len(running)} pod(s) of the group to finish",
            )
    decision.removals.append(_removal(obj, mark_only=False))
    decision.events.append(deleted_event(obj, request_id, obj.uid))
    return ObjectResult(
        kind=obj.kind, namespace=obj.namespace or None, name=obj.name, uid=obj.uid, outcome="deleted"
    )


def _removal(obj: KnownObject, *, mark_only: bool) -> ObjectRemoval:
    return ObjectRemoval(
        kind=obj.kind,
        namespace=obj.namespace,
        name=obj.name,
        uid=obj.uid,
        expected_resource_version=obj.resource_version,
        mark_only=mark_only,
    )


def finish_pending_deletions(
    marked_groups: list[KnownObject], pods: list[KnownObject], request_id: str
) -> BatchDecision:
    """PodGroups marked for deletion whose pods have all finished (or are gone) are deleted now."""
    decision = BatchDecision()
    for group in marked_groups:
        if all(pod_finished(p) for p in pods_of_group(group, pods)):
            decision.results.append(_remove(group, [], decision, request_id))
    return decision
