"""Quotas from the stored objects and bindings alone, as a new leader restores them: Kueue's objects, the
gangs whose pods hold nodes (with those pods), the gangs whose pods wait, and from them the status of every
queue that `get` shows (docs/quotas.md). `podway check` verifies the same picture."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from libs.core.quota import QueuedWorkload, QueueStatuses

from .lifecycle import PodPhase
from .objects import ApiObject, parent_composite, pod_group_name, pod_phase, podgroup_workload_name
from .quotas import QUOTA_KINDS, Holding, QuotaLedger

_ENDED: Final = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


@dataclass(frozen=True, slots=True)
class StoredGangs:
    """Kueue's objects; the PodGroups whose pods hold nodes (`holding`, with those pods) and those none of
    whose pods holds one while some wait to be placed (`waiting`, with no pods); the labels of the nodes."""

    ledger: QuotaLedger
    holding: list[Holding]
    waiting: list[Holding]
    node_labels: dict[str, Mapping[str, str]]


def stored_gangs(objects: Iterable[ApiObject], holds: Mapping[str, str]) -> StoredGangs:
    """The gangs among `objects`, given the nodes pods hold (`holds`: pod uid -> node, the bindings). A pod
    holds its node until it ends; a waiting pod is one not ended, bound nowhere and not being deleted. A
    composite's children never wait for quota (they are not quota-managed), nor do PodGroups being deleted."""
    ledger = QuotaLedger()
    groups: dict[str, ApiObject] = {}
    workloads: dict[str, ApiObject] = {}
    on_nodes: dict[str, list[tuple[ApiObject, str]]] = {}
    with_waiting_pods: set[str] = set()
    labels: dict[str, Mapping[str, str]] = {}
    for obj in objects:
        if obj.kind in QUOTA_KINDS:
            ledger.put(obj)
        elif obj.kind == "PodGroup":
            groups[obj.key] = obj
        elif obj.kind == "Workload":
            workloads[obj.key] = obj
        elif obj.kind == "Node":
            labels[obj.name] = obj.labels
        elif obj.kind == "Pod" and pod_phase(obj) not in _ENDED and (name := pod_group_name(obj)) is not None:
            key = f"{obj.namespace}/{name}"
            if obj.uid in holds:
                on_nodes.setdefault(key, []).append((obj, holds[obj.uid]))
            elif not obj.metadata.get("deletionTimestamp"):
                with_waiting_pods.add(key)
    holding, waiting = [], []
    for key, group in sorted(groups.items()):
        workload = _workload_of(group, workloads)
        priority = int(group.spec.get("priority") or 0)
        if key in on_nodes:
            holding.append(Holding(key, group, workload, priority, tuple(on_nodes[key])))
        elif key in with_waiting_pods and not _never_waits_for_quota(group):
            waiting.append(Holding(key, group, workload, priority, ()))
    return StoredGangs(ledger, holding, waiting, labels)


def queue_statuses(gangs: StoredGangs) -> QueueStatuses:
    """The status of every queue: the gangs holding nodes are admitted (their usage what their pods hold),
    the waiting ones pending, each in the LocalQueue it is queued to."""
    ledger = gangs.ledger
    snapshot = ledger.snapshot(gangs.holding, gangs.node_labels.get)
    queued = [
        QueuedWorkload(gang.key, queue.key, queue.cluster_queue, admitted)
        for gangs_of, admitted in ((gangs.holding, True), (gangs.waiting, False))
        for gang in gangs_of
        if (queue := ledger.local_queue_for(gang.obj, gang.workload)) is not None
    ]
    return QueueStatuses(snapshot, ledger.local_queues.values(), queued)


def _workload_of(group: ApiObject, workloads: Mapping[str, ApiObject]) -> ApiObject | None:
    name = podgroup_workload_name(group)
    return workloads.get(f"{group.namespace}/{name}") if name else None


def _never_waits_for_quota(group: ApiObject) -> bool:
    return parent_composite(group) is not None or bool(group.metadata.get("deletionTimestamp"))
