"""ClusterQueue, LocalQueue and Cohort status computed when they are read (`get`, `describe`, the Kubernetes
API), from the stored objects and bindings as a new scheduler leader restores quota usage: one snapshot per
read, whatever the number of queues read (docs/quotas.md)."""

from __future__ import annotations

from typing import Any, Final

from libs.core.quota import QueueStatuses
from libs.core.scheduling.quotas import QUOTA_KINDS
from libs.core.scheduling.stored_quotas import queue_statuses, stored_gangs
from libs.db.core_objects import api_object
from libs.db.ports import UnitOfWork
from libs.db.records import StoredObject

QUEUE_KINDS: Final = ("ClusterQueue", "LocalQueue", "Cohort")
"""The kinds whose status is computed on read."""
GANG_KINDS: Final = ("Workload", "PodGroup", "Pod")
ENDED: Final = ("Succeeded", "Failed")


async def with_queue_statuses(uow: UnitOfWork, kind: str, queues: list[dict[str, Any]]) -> None:
    """The queues' manifests with their status as Kueue writes it: the computed fields replace what the
    stored status says, and the `Active` condition (its time the queue's creation: transitions of a status
    computed on read are not recorded) replaces a stored one."""
    if not queues:
        return
    statuses = await _statuses(uow, kind, queues)
    for queue in queues:
        meta = queue.get("metadata") or {}
        name, namespace = meta.get("name", ""), meta.get("namespace", "")
        if kind == "ClusterQueue":
            computed = statuses.cluster_queue(name)
        elif kind == "LocalQueue":
            computed = statuses.local_queue(namespace, name)
        else:
            computed = statuses.cohort(name)
        stored = queue.get("status") or {}
        if "conditions" in computed:
            written = [
                {
                    **c,
                    "observedGeneration": meta.get("generation"),
                    "lastTransitionTime": meta.get("creationTimestamp"),
                }
                for c in computed["conditions"]
            ]
            types = {c["type"] for c in written}
            computed["conditions"] = [c for c in stored.get("conditions") or [] if c.get("type") not in types]
            computed["conditions"] += written
        queue["status"] = {**computed, **{k: v for k, v in stored.items() if k not in computed}}


async def _statuses(uow: UnitOfWork, kind: str, queues: list[dict[str, Any]]) -> QueueStatuses:
    """Kueue's objects, then the gangs of the namespaces that have a LocalQueue (only those read, for
    LocalQueues: a LocalQueue's status is its own workloads'), the bindings of their live pods and the nodes
    those hold."""
    stored: list[StoredObject] = []
    for quota_kind in QUOTA_KINDS:
        stored += await uow.objects.find(quota_kind, None)
    namespaces = {obj.namespace for obj in stored if obj.kind == "LocalQueue"}
    if kind == "LocalQueue":
        namespaces &= {(q.get("metadata") or {}).get("namespace", "") for q in queues}
    for namespace in sorted(namespaces):
        for gang_kind in GANG_KINDS:
            stored += await uow.objects.find(gang_kind, namespace)
    live = [obj.uid for obj in stored if obj.kind == "Pod" and (obj.status or {}).get("phase") not in ENDED]
    holds = (
        {binding.pod_uid: binding.node_name for binding in await uow.bindings.get_many(live)} if live else {}
    )
    held = [("Node", "", name) for name in sorted(set(holds.values()))]
    nodes = await uow.objects.get_many(held) if held else []
    gangs = stored_gangs([api_object(obj) for obj in [*stored, *nodes]], holds)
    return queue_statuses(gangs)
