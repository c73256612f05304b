"""ClusterQueue, LocalQueue and Cohort status as Kueue v1beta2 writes it (`ClusterQueueStatus`,
`LocalQueueStatus`, `CohortStatus`), from one snapshot and the workloads queued to each LocalQueue: what is
used per flavor and resource (`total`, and for a ClusterQueue in a cohort what it `borrowed` past its
nominal quota), how many workloads are pending, reserving and admitted, the fair-sharing `weightedShare`, and
the `Active` condition with Kueue's reasons.

Quota is reserved and used alike here (there are no admission checks): `flavorsReservation` equals
`flavorsUsage` and `reservingWorkloads` equals `admittedWorkloads`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from libs.api.quantity import format_amount
from libs.core.quota.fair_sharing import dominant_resource_share
from libs.core.quota.model import ClusterQueueQuota, FlavorResource, LocalQueueQuota
from libs.core.quota.snapshot import COHORT, Node, QuotaSnapshot

ACTIVE: Final = "Active"
"""The condition type of ClusterQueues and LocalQueues."""


class ActiveReason(StrEnum):
    """Reasons of the `Active` condition: Kueue's for ClusterQueues (`ClusterQueueActiveReason*`) and
    LocalQueues (its LocalQueue controller's), and `CohortHasCycle`, Podway's own for a ClusterQueue whose
    cohort tree has a cycle (Kueue admits nothing from such a queue but leaves its condition as it was)."""

    READY = "Ready"
    STOPPED = "Stopped"
    FLAVOR_NOT_FOUND = "FlavorNotFound"
    COHORT_HAS_CYCLE = "CohortHasCycle"
    CLUSTER_QUEUE_DOES_NOT_EXIST = "ClusterQueueDoesNotExist"
    CLUSTER_QUEUE_IS_INACTIVE = "ClusterQueueIsInactive"


@dataclass(frozen=True)
class QueuedWorkload:
    """A quota-managed workload in its LocalQueue (`namespace/name`): admitted, holding quota (its usage is
    the snapshot's workload of that name), or pending, waiting for it."""

    name: str
    local_queue: str
    cluster_queue: str
    admitted: bool


class QueueStatuses:
    """The status of each ClusterQueue, LocalQueue and Cohort of one snapshot; the workloads are grouped once,
    so a list of queues costs one pass over them."""

    def __init__(
        self,
        snapshot: QuotaSnapshot,
        local_queues: Iterable[LocalQueueQuota],
        workloads: Iterable[QueuedWorkload],
    ) -> None:
        self.snapshot = snapshot
        self.local_queues = {queue.key: queue for queue in local_queues}
        self._in_cluster_queue: dict[str, list[QueuedWorkload]] = {}
        self._in_local_queue: dict[str, list[QueuedWorkload]] = {}
        for workload in workloads:
            self._in_cluster_queue.setdefault(workload.cluster_queue, []).append(workload)
            self._in_local_queue.setdefault(workload.local_queue, []).append(workload)

    def cluster_queue(self, name: str) -> dict[str, Any]:
        """A ClusterQueue's status (empty for a queue the snapshot does not hold)."""
        queue = self.snapshot.cluster_queues.get(name)
        if queue is None:
            return {}
        node = self.snapshot.cluster_queue_node(name)
        usage = self.snapshot.usage[node]
        pending, admitted = _counts(self._in_cluster_queue.get(name, []))
        # Reservation and usage are equal but built twice: one list in two places would be aliased in YAML.
        return {
            "conditions": [self._cluster_queue_active(queue)],
            "flavorsReservation": _flavors_usage(queue, usage, borrowed=True),
            "flavorsUsage": _flavors_usage(queue, usage, borrowed=True),
            "pendingWorkloads": pending,
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
            "fairSharing": {"weightedShare": dominant_resource_share(self.snapshot, node).weighted_share},
        }

    def local_queue(self, namespace: str, name: str) -> dict[str, Any]:
        """A LocalQueue's status: its own workloads' counts and usage, in its ClusterQueue's flavors (empty
        for a queue the statuses were not given)."""
        queue = self.local_queues.get(f"{namespace}/{name}")
        if queue is None:
            return {}
        workloads = self._in_local_queue.get(queue.key, [])
        pending, admitted = _counts(workloads)
        status: dict[str, Any] = {"conditions": [self._local_queue_active(queue)]}
        cluster_queue = self.snapshot.cluster_queues.get(queue.cluster_queue)
        if cluster_queue is not None:
            usage: dict[FlavorResource, int] = {}
            for workload in workloads:
                held = self.snapshot.workloads.get(workload.name) if workload.admitted else None
                for fr, amount in (held.usage if held is not None else {}).items():
                    usage[fr] = usage.get(fr, 0) + amount
            status["flavorsReservation"] = _flavors_usage(cluster_queue, usage, borrowed=False)
            status["flavorsUsage"] = _flavors_usage(cluster_queue, usage, borrowed=False)
        return {
            **status,
            "pendingWorkloads": pending,
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
        }

    def cohort(self, name: str) -> dict[str, Any]:
        """A Cohort's status: its share of what its parent lends (0 for a root)."""
        node = Node(COHORT, name)
        if node not in self.snapshot.parent:
            return {}
        return {"fairSharing": {"weightedShare": dominant_resource_share(self.snapshot, node).weighted_share}}

    def _cluster_queue_active(self, queue: ClusterQueueQuota) -> dict[str, str]:
        # Every reason that holds, in Kueue's order, in one message; the condition's reason is the first.
        reasons: list[tuple[ActiveReason, str]] = []
        if queue.stopped:
            reasons.append((ActiveReason.STOPPED, "is stopped"))
        missing = self.snapshot.missing_flavors(queue.name)
        if missing:
            flavors = ",".join(missing)
            reasons.append(
                (ActiveReason.FLAVOR_NOT_FOUND, f"references missing ResourceFlavor(s): {flavors}")
            )
        if self.snapshot.in_cycle(queue.name):
            reasons.append((ActiveReason.COHORT_HAS_CYCLE, "its cohort tree has a cycle"))
        if not reasons:
            return _condition(True, ActiveReason.READY, "Can admit new workloads")
        said = ", ".join(message for _, message in reasons)
        return _condition(False, reasons[0][0], f"Can't admit new workloads: {said}.")

    def _local_queue_active(self, queue: LocalQueueQuota) -> dict[str, str]:
        if queue.stopped:
            return _condition(False, ActiveReason.STOPPED, "LocalQueue is stopped")
        inactive = "Can't submit new workloads to clusterQueue"
        if queue.cluster_queue not in self.snapshot.cluster_queues:
            return _condition(False, ActiveReason.CLUSTER_QUEUE_DOES_NOT_EXIST, inactive)
        if queue.cluster_queue in self.snapshot.inactive:
            return _condition(False, ActiveReason.CLUSTER_QUEUE_IS_INACTIVE, inactive)
        return _condition(True, ActiveReason.READY, "Can submit new workloads to localQueue")


def _counts(workloads: Iterable[QueuedWorkload]) -> tuple[int, int]:
    """(pending, admitted)."""
    admitted = pending = 0
    for workload in workloads:
        if workload.admitted:
            admitted += 1
        else:
            pending += 1
    return pending, admitted


def _flavors_usage(
    queue: ClusterQueueQuota, usage: Mapping[FlavorResource, int], *, borrowed: bool
) -> list[dict[str, Any]]:
    """Per flavor of the queue's resource groups, in order, each covered resource by name: its `total`, and
    with `borrowed` what is used past the queue's nominal quota (always 0 outside a cohort), as Kueue's cache
    reports usage (`getUsage`)."""
    flavors = []
    for group in queue.resource_groups:
        for flavor in group.flavors:
            resources = []
            for resource in sorted(group.covered_resources):
                used = usage.get((flavor, resource), 0)
                entry = {"name": resource, "total": format_amount(resource, used)}
                if borrowed:
                    quota = queue.quotas.get((flavor, resource))
                    over = used - (quota.nominal if quota is not None else 0) if queue.cohort else 0
                    entry["borrowed"] = format_amount(resource, max(over, 0))
                resources.append(entry)
            flavors.append({"name": flavor, "resources": resources})
    return flavors


def _condition(active: bool, reason: ActiveReason, message: str) -> dict[str, str]:
    return {
        "type": ACTIVE,
        "status": "True" if active else "False",
        "reason": reason.value,
        "message": message,
    }
