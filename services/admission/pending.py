"""Why pending pods and PodGroups wait, as `podway get` and `describe` show it: the facts read from the store,
the reasons from libs.core.scheduling.waiting, added as the condition the object lacks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from libs.api.annotations import WORKLOAD_REF_NAME
from libs.core.scheduling.lifecycle import Condition, ConditionType
from libs.core.scheduling.waiting import POD_SCHEDULED, PodFacts, PodGroupFacts, pod_waiting, podgroup_waiting
from libs.db.ports import UnitOfWork
from libs.db.records import Condition as StoredCondition
from libs.db.records import StoredObject


@dataclass(frozen=True)
class Scope:
    """What one namespace holds that bears on why some of its objects wait: its Workloads, and the PodGroups
    those objects are or run in, with their pods."""

    namespace: str
    pods: list[StoredObject]
    groups: dict[str, StoredObject]
    group_conditions: dict[str, list[StoredCondition]]
    workloads: frozenset[str]
    """Workloads that exist and are not being deleted."""
    _group_facts: dict[str, PodGroupFacts] = field(default_factory=dict, compare=False, repr=False)

    def pods_of(self, group: str) -> list[StoredObject]:
        return self._by_group.get(group, [])

    @cached_property
    def _by_group(self) -> dict[str, list[StoredObject]]:
        found: dict[str, list[StoredObject]] = {}
        for pod in self.pods:
            if (name := _group_name(pod.spec)) is not None:
                found.setdefault(name, []).append(pod)
        return found


async def load_scope(uow: UnitOfWork, kind: str, manifests: list[dict[str, Any]], namespace: str) -> Scope:
    """The scope of these pods or PodGroups of `namespace`: only the PodGroups they name and the Workloads
    those name, so that reading a few objects does not read every pod of a large namespace (and a pod in no
    PodGroup reads nothing more)."""
    names = sorted(_podgroups_named(kind, manifests))
    if not names:
        return Scope(namespace=namespace, pods=[], groups={}, group_conditions={}, workloads=frozenset())
    pods = await uow.objects.find("Pod", namespace, podgroups=names)
    keys = [("PodGroup", namespace, name) for name in names]
    groups = {group.name: group for group in await uow.objects.get_many(keys)}
    specs = [group.spec for group in groups.values()]
    if kind == "PodGroup":
        specs += [manifest.get("spec") or {} for manifest in manifests]
    named = sorted({("Workload", namespace, name) for spec in specs if (name := _workload_of(spec))})
    workloads = await uow.objects.get_many(named)
    return Scope(
        namespace=namespace,
        pods=pods,
        groups=groups,
        group_conditions=await uow.conditions.list_for_many(group.uid for group in groups.values()),
        workloads=frozenset(w.name for w in workloads if w.deletion_requested_at is None),
    )


def _podgroups_named(kind: str, manifests: list[dict[str, Any]]) -> set[str]:
    if kind == "PodGroup":
        return {manifest["metadata"]["name"] for manifest in manifests}
    return {name for manifest in manifests if (name := _group_name(manifest.get("spec") or {})) is not None}


def with_group_waiting(groups: list[dict[str, Any]], scope: Scope) -> None:
    """Give each pending PodGroup of `scope`'s namespace the condition saying why it waits, unless it has one
    of that type already."""
    for manifest in groups:
        status = manifest.setdefault("status", {})
        if (status.get("podway") or {}).get("phase") != "Pending":
            continue
        conditions = _conditions(status.get("conditions") or [])
        facts = _group_facts(manifest["metadata"]["name"], manifest.get("spec") or {}, conditions, scope)
        waiting = podgroup_waiting(facts)
        if waiting is not None:
            _add(status, waiting.condition(ConditionType.POD_GROUP_SCHEDULED), manifest)


def with_pod_waiting(pod: dict[str, Any], facts: PodFacts, reasons: dict[PodFacts, dict[str, str]]) -> None:
    """Give a pending pod the condition saying why it waits, given its facts (`reasons`: the conditions worked
    out for the facts met so far, added to)."""
    if facts not in reasons:
        reasons[facts] = pod_waiting(facts).condition(POD_SCHEDULED)
    _add(pod.setdefault("status", {}), reasons[facts], pod)


def is_pending(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    no_node = not (pod.get("spec") or {}).get("nodeName")
    return phase == "Pending" and no_node and "deletionTimestamp" not in pod["metadata"]


def _add(status: dict[str, Any], condition: dict[str, str], manifest: Mapping[str, Any]) -> None:
    """Add the waiting condition unless one of its type is there; it has held since the object was made."""
    conditions = status.get("conditions") or []
    if all(c.get("type") != condition["type"] for c in conditions):
        since = manifest["metadata"].get("creationTimestamp")
        status["conditions"] = [
            *conditions,
            {**condition, "lastTransitionTime": since} if since else condition,
        ]


def pod_facts(pod: Mapping[str, Any], scope: Scope) -> PodFacts:
    group_name = _group_name(pod.get("spec") or {})
    stored = scope.groups.get(group_name) if group_name else None
    group = None
    if stored is not None:
        # The same for every pod of the group: worked out once per scope (a gang's pods are read together).
        group = scope._group_facts.get(stored.name)
        if group is None:
            rows = scope.group_conditions.get(stored.uid, [])
            group = _group_facts(stored.name, stored.spec, [_condition(row) for row in rows], scope)
            scope._group_facts[stored.name] = group
    awaited = (pod["metadata"].get("annotations") or {}).get(WORKLOAD_REF_NAME)
    return PodFacts(
        namespace=scope.namespace,
        podgroup=group_name,
        group=group,
        awaited_workload=awaited if isinstance(awaited, str) else None,
        scheduled=_scheduled((pod.get("status") or {}).get("conditions") or []),
    )


def _scheduled(conditions: list[dict[str, Any]]) -> Condition | None:
    """A pod's PodScheduled condition, if it has one."""
    found = next((c for c in conditions if c.get("type") == POD_SCHEDULED), None)
    return _conditions([found])[0] if found is not None else None


def _group_facts(
    name: str, spec: Mapping[str, Any], conditions: list[Condition], scope: Scope
) -> PodGroupFacts:
    workload = _workload_of(spec)
    gang = (spec.get("schedulingPolicy") or {}).get("gang")
    return PodGroupFacts(
        namespace=scope.namespace,
        workload=workload,
        workload_exists=workload in scope.workloads,
        pods=len(scope.pods_of(name)),
        min_count=int(gang.get("minCount") or 1) if isinstance(gang, dict) else None,
        scheduled=_of_type(conditions, ConditionType.POD_GROUP_SCHEDULED),
    )


def _workload_of(spec: Mapping[str, Any]) -> str | None:
    """The Workload a PodGroup's spec names as its template's."""
    ref = (spec.get("podGroupTemplateRef") or {}).get("workload") or {}
    workload = ref.get("workloadName") if isinstance(ref, Mapping) else None
    return workload if isinstance(workload, str) else None


def _group_name(spec: Mapping[str, Any]) -> str | None:
    name = (spec.get("schedulingGroup") or {}).get("podGroupName")
    return name if isinstance(name, str) else None


def _conditions(conditions: list[dict[str, Any]]) -> list[Condition]:
    return [
        Condition(
            type=str(c.get("type")),
            status=c.get("status") == "True",
            reason=c.get("reason") or "",
            message=c.get("message") or "",
        )
        for c in conditions
    ]


def _condition(row: StoredCondition) -> Condition:
    return Condition(type=row.type, status=row.status == "True", reason=row.reason, message=row.message)


def _of_type(conditions: list[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)
