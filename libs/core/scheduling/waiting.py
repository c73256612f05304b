"""Why a pending pod or PodGroup waits, derived when it is read from what is stored, so that nothing waits in
silence.

A cycle that failed left its condition (`PodGroupScheduled`, or `PodScheduled` for a pod without a group,
False with reason Unschedulable and kube-scheduler's message): that is the answer. An object no cycle tried
yet waits for what the scheduler's gang PreEnqueue waits for (its Workload, enough of its pods), for its
PodGroup to exist, or for its turn. A pod of an existing PodGroup waits for whatever its group waits for.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .lifecycle import Condition
from .queue import QueueReason

POD_SCHEDULED = "PodScheduled"


class WaitingReason(StrEnum):
    """Condition reasons of objects no cycle tried yet (a failed cycle's reason is the scheduler's)."""

    SCHEDULING_GATED = "SchedulingGated"
    """Not tried until something else exists (kube-scheduler's reason for pods held before the queue)."""
    QUEUED = "Queued"
    """Everything it needs exists: it waits for its turn in the scheduling queue."""


class WaitingMessage(StrEnum):
    """Messages beyond the queue's own (`QueueReason`), `str.format` templates."""

    WAITING_FOR_PODGROUP = "waiting for PodGroup {podgroup}, which does not exist"
    WAITING_FOR_CYCLE = "waiting for a scheduling cycle"


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why an object waits: a reason (PascalCase) and a message, as its condition shows them."""

    reason: str
    message: str

    def condition(self, type_: str) -> dict[str, str]:
        """The condition, as a reader sees it in `status.conditions`."""
        return {"type": type_, "status": "False", "reason": self.reason, "message": self.message}


@dataclass(frozen=True, slots=True)
class PodGroupFacts:
    """What is stored about a PodGroup that bears on why it waits."""

    namespace: str
    workload: str | None
    """The Workload its template reference names, if any."""
    workload_exists: bool
    pods: int
    """Its pods that exist."""
    min_count: int | None
    """Its gang minCount; None for a basic group (which needs one pod)."""
    scheduled: Condition | None
    """Its `PodGroupScheduled` condition, if the scheduler wrote one."""


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What is stored about a pod that no node holds yet, and about its PodGroup."""

    namespace: str
    podgroup: str | None
    """The PodGroup its `spec.schedulingGroup` names, if any."""
    group: PodGroupFacts | None
    """That PodGroup, when it exists."""
    awaited_workload: str | None
    """The Workload a v1.35 `workloadRef` of the pod named (recorded at admission), if any."""
    scheduled: Condition | None
    """Its `PodScheduled` condition, if the scheduler wrote one."""


def podgroup_waiting(group: PodGroupFacts) -> Waiting | None:
    """Why a pending PodGroup waits; None when the scheduler placed it.

    1. A cycle's verdict: `PodGroupScheduled` False, with its reason and message.
    2. Gated: its Workload does not exist, or fewer of its pods exist than it needs (minCount, or one).
    3. Otherwise it is queued for its next cycle.
    """
    if group.scheduled is not None:
        if group.scheduled.status:
            return None
        return Waiting(group.scheduled.reason, group.scheduled.message)
    if group.workload is not None and not group.workload_exists:
        workload = f"{group.namespace}/{group.workload}"
        return Waiting(
            WaitingReason.SCHEDULING_GATED, QueueReason.WAITING_FOR_WORKLOAD.format(workload=workload)
        )
    needed = group.min_count if group.min_count is not None else 1
    if group.pods < needed:
        message = QueueReason.WAITING_FOR_PODS.format(present=group.pods, count=needed)
        return Waiting(WaitingReason.SCHEDULING_GATED, message)
    return Waiting(WaitingReason.QUEUED, WaitingMessage.WAITING_FOR_CYCLE)


def pod_waiting(pod: PodFacts) -> Waiting:
    """Why a pod that no node holds waits.

    1. A cycle's verdict on a pod without a PodGroup: `PodScheduled` False, with its reason and message.
    2. Its PodGroup does not exist: it waits for the Workload a v1.35 `workloadRef` named, or for the group.
    3. Its PodGroup exists: whatever the group waits for.
    4. Otherwise it is queued for its next cycle.
    """
    if pod.scheduled is not None and not pod.scheduled.status:
        return Waiting(pod.scheduled.reason, pod.scheduled.message)
    if pod.podgroup is not None and pod.group is None:
        if pod.awaited_workload is not None:
            workload = f"{pod.namespace}/{pod.awaited_workload}"
            message = QueueReason.WAITING_FOR_WORKLOAD.format(workload=workload)
        else:
            message = WaitingMessage.WAITING_FOR_PODGROUP.format(podgroup=f"{pod.namespace}/{pod.podgroup}")
        return Waiting(WaitingReason.SCHEDULING_GATED, message)
    group_waits = podgroup_waiting(pod.group) if pod.group is not None else None
    return group_waits or Waiting(WaitingReason.QUEUED, WaitingMessage.WAITING_FOR_CYCLE)
