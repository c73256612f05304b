"""Delete, as the API server does with foreground propagation.

A pod that holds no node (not bound, or finished) is deleted at once; a bound pod that still runs is marked
and evicted (`pods.evicted`, reason Deleted): its node agent stops it and deletes it. A PodGroup is deleted
once none of its pods holds a node (at once when none is placed). A Job takes what it controls (by uid) with
it, and is deleted itself once nothing it owns remains (Foreground, the default), at once (Background), or at
once leaving what it owns, without its ownerReference (Orphan). A Workload takes the PodGroups created for its
v1.35 pods with it unless they are orphaned (v1.35 has no PodGroup object; see `implied_pod_group`).
Everything else is deleted at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping

from libs.api.annotations import WORKLOAD_REF_NAME
from libs.core.admission.events import admitted_event, deleted_event, evicted_event
from libs.core.admission.manifests import stored_spec
from libs.core.admission.model import (
    AdmissionView,
    BatchDecision,
    KnownObject,
    ObjectKey,
    ObjectRemoval,
    ObjectWrite,
)
from libs.events.rpc import ObjectResult, Outcome, Propagation
from libs.events.scheduling import PodRef

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
DELETED_REASON = "Deleted"
"""The `pods.evicted` reason of a pod deleted while it runs on its node."""
DEFAULT_GRACE_SECONDS = 30
"""A pod's terminationGracePeriodSeconds when its spec has none (upstream's default)."""
DELETION_GRACE = "deletionGracePeriodSeconds"


def pod_finished(pod: KnownObject) -> bool:
    return (pod.manifest.get("status") or {}).get("phase") in FINISHED_PHASES


def group_name_of(pod: KnownObject) -> str | None:
    """The PodGroup a pod names in `spec.schedulingGroup`, if any."""
    name = ((pod.manifest.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return name if isinstance(name, str) else None


def pods_of_group(group: KnownObject, pods: Iterable[KnownObject]) -> list[KnownObject]:
    """The pods whose `spec.schedulingGroup` names this PodGroup."""
    return [
        pod
        for pod in pods
        if pod.kind == "Pod" and pod.namespace == group.namespace and group_name_of(pod) == group.name
    ]


def owned_by(owner: KnownObject, candidates: Iterable[KnownObject]) -> list[KnownObject]:
    """Objects whose controller reference points at `owner`, by uid."""
    return [
        obj
        for obj in candidates
        if any(
            ref.get("controller") and ref.get("uid") == owner.uid
            for ref in (obj.manifest.get("metadata") or {}).get("ownerReferences") or []
        )
    ]


def implied_by(workload: KnownObject, candidates: Iterable[KnownObject]) -> list[KnownObject]:
    """The PodGroups created for the v1.35 pods of this Workload."""
    return [
        obj
        for obj in candidates
        if obj.kind == "PodGroup"
        and obj.namespace == workload.namespace
        and ((obj.manifest.get("metadata") or {}).get("annotations") or {}).get(WORKLOAD_REF_NAME)
        == workload.name
    ]


def decide_delete(
    key: ObjectKey,
    view: AdmissionView,
    scope: list[KnownObject],
    bound: Mapping[str, str],
    request_id: str,
    *,
    now: str,
    propagation: Propagation | None = None,
    grace_seconds: int | None = None,
) -> BatchDecision:
    """Delete one object (`now`: the time a deletion mark records). `scope` holds the objects of its
    namespace that it may own or that may hold it (Workloads, PodGroups, Pods); `bound` maps the uid of every
    bound pod among them to its node. `grace_seconds`: how long a running pod it deletes has to stop (else
    its own terminationGracePeriodSeconds)."""
    target = view.get(key)
    if target is None:
        kind, namespace, name = key
        decision = BatchDecision()
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
    deletion = _Deletion(scope, bound, request_id, now, propagation or "Foreground", grace_seconds)
    result = deletion.delete(target)
    return deletion.finish(result)


NAMESPACE_ORDER = ("Job", "Pod", "PodGroup", "Workload", "CompositePodGroup")
"""Kinds a namespace's deletion deletes first, in order: a Job takes what it owns, and a PodGroup whose pods
went first goes at once. Every other kind follows."""


def decide_namespace_delete(
    name: str,
    namespace: KnownObject | None,
    contents: list[KnownObject],
    bound: Mapping[str, str],
    request_id: str,
    *,
    now: str,
) -> BatchDecision:
    """Delete a namespace with everything in it, as upstream's namespace controller empties it: each object as
    its own delete would (a running pod marked and evicted, a PodGroup waiting for it), once, whether named here
    or taken by its owner's deletion. The Namespace goes at once when nothing in it waits, else it is marked
    (Terminating) until `finish_namespace_deletions` sees it empty. `namespace`: None when it was never stored
    (it existed only because objects were in it; the caller stores it first when something will wait, so
    that its watchers see it go). The first result is the Namespace's, then one per object deleted or marked;
    `not_found` when there was neither."""
    deletion = _Deletion(contents, bound, request_id, now)
    rank = {kind: position for position, kind in enumerate(NAMESPACE_ORDER)}
    results: list[ObjectResult] = []
    handled: set[str] = set()  # removed or marked already
    counted = 0
    for obj in sorted(contents, key=lambda o: rank.get(o.kind, len(rank))):
        removals = deletion.decision.removals
        handled.update(removal.uid for removal in removals[counted:])
        counted = len(removals)
        if obj.uid not in handled:
            results.append(deletion.delete(obj))
    waiting = held_back(deletion.decision)
    if namespace is not None and waiting:
        gone = deletion._mark(namespace, f"deletion waits for {waiting} object(s) in it to go")
    elif namespace is not None:
        gone = deletion.remove(namespace)
    elif results:
        gone = ObjectResult(kind="Namespace", name=name, outcome="deleted", message=f"{len(results)} objects")
    else:
        gone = ObjectResult(
            kind="Namespace", name=name, outcome="not_found", message=f'namespaces "{name}" not found'
        )
    decision = deletion.finish(gone)
    decision.results = [gone, *results]
    return decision


def held_back(decision: BatchDecision) -> int:
    """How many objects the decision marks for deletion instead of deleting (they wait for their pods)."""
    return sum(1 for removal in decision.removals if removal.mark_only)


def finish_namespace_deletions(
    marked: list[KnownObject], occupied: Collection[str], request_id: str
) -> BatchDecision:
    """Namespaces marked for deletion go once nothing is left in them (`occupied`: the names of those that
    still hold an object)."""
    deletion = _Deletion([], {}, request_id)
    for namespace in marked:
        if namespace.name not in occupied:
            deletion.decision.results.append(deletion.remove(namespace))
    return deletion.decision


def finish_pending_deletions(
    marked: list[KnownObject], scope: list[KnownObject], bound: Mapping[str, str], request_id: str
) -> BatchDecision:
    """Objects marked for deletion that nothing holds any more are deleted now: a PodGroup none of whose
    pods holds a node any more, then a Job that owns nothing any more. `scope` holds the Workloads,
    PodGroups and Pods of their namespaces; `bound` maps the uid of every bound pod among them to its node."""
    deletion = _Deletion(scope, bound, request_id)
    for group in (obj for obj in marked if obj.kind == "PodGroup"):
        if not deletion.holding(group):
            deletion.decision.results.append(deletion.remove(group))
    for job in (obj for obj in marked if obj.kind == "Job"):
        if not deletion.owned_by(job):
            deletion.decision.results.append(deletion.remove(job))
    return deletion.decision


def stop_pods(
    pods: list[KnownObject],
    scope: list[KnownObject],
    bound: Mapping[str, str],
    request_id: str,
    *,
    now: str,
) -> BatchDecision:
    """Delete pods as a delete request would: one that holds no node at once, one that runs marked and
    evicted (its node agent stops and deletes it; its room is its own until then). `scope` holds their
    PodGroups; `bound` maps the uid of every bound pod to its node."""
    deletion = _Deletion(scope, bound, request_id, now)
    results = [deletion.delete(pod) for pod in pods if not pod.deletion_requested]
    decision = deletion.finish(None)
    decision.results = results
    return decision


class _Deletion:
    """One deletion's bookkeeping: what goes now, what is marked, which pods are evicted."""

    def __init__(
        self,
        scope: list[KnownObject],
        bound: Mapping[str, str],
        request_id: str,
        now: str = "",
        propagation: Propagation = "Foreground",
        grace_seconds: int | None = None,
    ) -> None:
        self.objects = {obj.key: obj for obj in scope}
        self.propagation = propagation
        self.grace_seconds = grace_seconds
        self.bound = bound
        self.request_id = request_id
        self.now = now
        self.decision = BatchDecision()
        # Evicted pods by PodGroup name, or by uid for pods without one: one `pods.evicted` each.
        self._evicted: dict[tuple[str, str], list[PodRef]] = {}
        # Removed or marked, by uid, with the result: an object reached twice (a PodGroup marked for its
        # running pods, then again as its Workload's) is written once.
        self._done: dict[str, ObjectResult] = {}

    def delete(self, obj: KnownObject) -> ObjectResult:
        if obj.uid in self._done:
            return self._done[obj.uid]
        if obj.kind == "Pod":
            return self._pod(obj)
        if obj.kind == "PodGroup":
            return self._podgroup(obj)
        if obj.kind == "Job":
            return self._job(obj)
        if obj.kind == "ResourceClaim":
            return self._claim(obj)
        if obj.kind == "Workload" and self.propagation != "Orphan":
            for group in implied_by(obj, list(self.objects.values())):
                self._podgroup(group)
        return self.remove(obj)

    def finish(self, result: ObjectResult | None) -> BatchDecision:
        for (kind, name), pods in self._evicted.items():
            group = self.objects.get(("PodGroup", pods[0].namespace, name)) if kind == "PodGroup" else None
            event = evicted_event(
                pods, DELETED_REASON, group, self.request_id, grace_seconds=self.grace_seconds
            )
            self.decision.events.append(event)
        if result is not None:
            self.decision.results.insert(0, result)
        return self.decision

    def pods_of(self, group: KnownObject) -> list[KnownObject]:
        return pods_of_group(group, self.objects.values())

    def owned_by(self, owner: KnownObject) -> list[KnownObject]:
        return owned_by(owner, self.objects.values())

    def remove(self, obj: KnownObject) -> ObjectResult:
        if obj.uid in self._done:
            return self._done[obj.uid]
        self.objects.pop(obj.key, None)
        self.decision.removals.append(_removal(obj, mark_only=False))
        self.decision.events.append(deleted_event(obj, self.request_id, self._correlation(obj)))
        self._done[obj.uid] = _result(obj, "deleted")
        return self._done[obj.uid]

    def _mark(self, obj: KnownObject, message: str, *, grace_seconds: int | None = None) -> ObjectResult:
        """Mark it for deletion; the services that keep a view of it see it marked (the API server's watch
        shows the object with its `deletionTimestamp`, and a pod with its `deletionGracePeriodSeconds`)."""
        if obj.uid in self._done:
            return self._done[obj.uid]
        self.decision.removals.append(_removal(obj, mark_only=True, grace_seconds=grace_seconds))
        if not obj.deletion_requested:
            metadata = {**(obj.manifest.get("metadata") or {}), "deletionTimestamp": self.now}
            if grace_seconds is not None:
                metadata[DELETION_GRACE] = grace_seconds
            marked = dataclasses.replace(
                obj,
                resource_version=obj.resource_version + 1,
                manifest={**obj.manifest, "metadata": metadata},
                deletion_requested=True,
            )
            event = admitted_event(marked, "updated", [], self.request_id, self._correlation(obj))
            self.decision.events.append(event)
        self._done[obj.uid] = _result(obj, "pending", message)
        return self._done[obj.uid]

    def _pod(self, pod: KnownObject) -> ObjectResult:
        if pod.uid in self._done:
            return self._done[pod.uid]
        node = self.bound.get(pod.uid)
        if node is None or pod_finished(pod):
            return self.remove(pod)
        if not pod.deletion_requested:
            ref = PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid, node=node)
            group_name = group_name_of(pod)
            story = ("PodGroup", group_name) if group_name else ("Pod", pod.uid)
            self._evicted.setdefault(story, []).append(ref)
        return self._mark(pod, f"terminating on node {node}", grace_seconds=self._grace_of(pod))

    def _grace_of(self, pod: KnownObject) -> int:
        """How long a running pod has to stop: the delete's grace period, else its own (upstream's 30 s when
        its spec says none)."""
        if self.grace_seconds is not None:
            return self.grace_seconds
        own = (pod.manifest.get("spec") or {}).get("terminationGracePeriodSeconds")
        return (
            own if isinstance(own, int) and not isinstance(own, bool) and own >= 0 else DEFAULT_GRACE_SECONDS
        )

    def holding(self, group: KnownObject) -> list[KnownObject]:
        """The group's pods that hold a node and have not finished: its deletion waits for them. Pods that
        wait for a cycle hold nothing, and the scheduler places no pod of a group being deleted."""
        return [pod for pod in self.pods_of(group) if pod.uid in self.bound and not pod_finished(pod)]

    def _podgroup(self, group: KnownObject) -> ObjectResult:
        if group.uid in self._done:
            return self._done[group.uid]
        running = self.holding(group)
        if not running:
            return self.remove(group)
        return self._mark(group, f"deletion waits for {len(running)} pod(s) of the group to finish")

    def _claim(self, claim: KnownObject) -> ObjectResult:
        """A claim pods reserve stays, marked, until none does (upstream's delete-protection finalizer): its
        devices are theirs until then. The DRA allocator deletes it once it releases it."""
        reserved = (claim.manifest.get("status") or {}).get("reservedFor") or []
        if not reserved:
            return self.remove(claim)
        return self._mark(claim, f"deletion waits for {len(reserved)} pod(s) reserving the claim")

    def _job(self, job: KnownObject) -> ObjectResult:
        owned = self.owned_by(job)
        if self.propagation == "Orphan":
            for obj in owned:
                self._orphan(obj, job)
            return self.remove(job)
        for obj in sorted(owned, key=_dependents_first):
            self.delete(obj)
        left = self.owned_by(job)
        if not left or self.propagation == "Background":
            return self.remove(job)
        return self._mark(job, f"deletion waits for {len(left)} object(s) it owns")

    def _orphan(self, obj: KnownObject, owner: KnownObject) -> None:
        """`obj` stays, without its reference to `owner`, as the garbage collector orphans a dependent."""
        metadata = {
            k: v
            for k, v in (obj.manifest.get("metadata") or {}).items()
            if k not in ("resourceVersion", "generation")
        }
        kept = [ref for ref in metadata.pop("ownerReferences", None) or [] if ref.get("uid") != owner.uid]
        if kept:
            metadata["ownerReferences"] = kept
        self.decision.writes.append(
            ObjectWrite(
                kind=obj.kind,
                api_version=str(obj.manifest.get("apiVersion")),
                namespace=obj.namespace,
                name=obj.name,
                uid=obj.uid,
                spec=stored_spec(obj.kind, obj.manifest),
                metadata=metadata,
                status=dict(obj.manifest.get("status") or {}),
                expected_resource_version=obj.resource_version,
            )
        )
        shown = {**(obj.manifest.get("metadata") or {}), "resourceVersion": str(obj.resource_version + 1)}
        shown.pop("ownerReferences", None)
        if kept:
            shown["ownerReferences"] = kept
        orphaned = dataclasses.replace(
            obj, resource_version=obj.resource_version + 1, manifest={**obj.manifest, "metadata": shown}
        )
        self.objects[obj.key] = orphaned
        event = admitted_event(orphaned, "updated", [], self.request_id, self._correlation(obj))
        self.decision.events.append(event)

    def _correlation(self, obj: KnownObject) -> str:
        """A pod's deletion belongs to its PodGroup's story when the group exists."""
        group_name = group_name_of(obj) if obj.kind == "Pod" else None
        group = self.objects.get(("PodGroup", obj.namespace, group_name)) if group_name else None
        return group.uid if group is not None else obj.uid


def _dependents_first(obj: KnownObject) -> int:
    # Pods first: whether their PodGroup may go at once depends on which of them went.
    return {"Pod": 0, "PodGroup": 1}.get(obj.kind, 2)


def _result(obj: KnownObject, outcome: Outcome, message: str = "") -> ObjectResult:
    return ObjectResult(
        kind=obj.kind,
        namespace=obj.namespace or None,
        name=obj.name,
        uid=obj.uid,
        outcome=outcome,
        message=message,
    )


def _removal(obj: KnownObject, *, mark_only: bool, grace_seconds: int | None = None) -> ObjectRemoval:
    return ObjectRemoval(
        kind=obj.kind,
        namespace=obj.namespace,
        name=obj.name,
        uid=obj.uid,
        expected_resource_version=obj.resource_version,
        mark_only=mark_only,
        grace_seconds=grace_seconds,
    )
