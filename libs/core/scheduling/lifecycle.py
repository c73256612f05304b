"""A PodGroup after it was placed: its derived phase, and whether a broken gang restarts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from .model import GangRestartPolicy, PodGroup


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class PodGroupPhase(StrEnum):
    """Podway's derived PodGroup phase (not an API field)."""

    PENDING = "Pending"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    PREEMPTED = "Preempted"


class ConditionType(StrEnum):
    POD_GROUP_SCHEDULED = "PodGroupScheduled"
    POD_GROUP_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
    """v1beta1's terminal condition: written True with every first binding of a placement, never False, so
    that it keeps the time the gang was first scheduled (docs/scheduling-api.md)."""
    DISRUPTION_TARGET = "DisruptionTarget"
    QUOTA_RESERVED = "QuotaReserved"
    """Kueue's: the gang holds quota in its ClusterQueue (True), or waits for it (False, reason Pending: also once
    its pods left their nodes unfinished), or its pods ended (False, reason Finished)."""
    COMPOSITE_INITIALLY_SCHEDULED = "CompositePodGroupInitiallyScheduled"
    """Terminal once True, as upstream's: a composite whose children are disrupted later keeps it."""


class ConditionReason(StrEnum):
    SCHEDULED = "Scheduled"
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULER_ERROR = "SchedulerError"
    PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
    SCHEDULING_GATED = "SchedulingGated"
    QUOTA_RESERVED = "QuotaReserved"
    QUOTA_PENDING = "Pending"
    QUOTA_INADMISSIBLE = "Inadmissible"
    """`QuotaReserved` False: the LocalQueue the gang is queued to does not exist (Kueue's reason)."""
    QUOTA_FINISHED = "Finished"
    """`QuotaReserved` False: the gang's pods ended, and with them its reservation."""


class RestartReason(StrEnum):
    BELOW_MIN_COUNT = "gang dropped below minCount {count}: {active} pod(s) active, {failed} failed or lost"


@dataclass(frozen=True, slots=True)
class Condition:
    """A PodGroup status condition (`status` True or False)."""

    type: str
    status: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class GangRestart:
    """Evict what is left of a broken gang and requeue it whole (`podway.io/gang-restart: Always`)."""

    podgroup: str
    podgroup_uid: str
    evict: tuple[str, ...]
    message: str


_ACTIVE = (PodPhase.PENDING, PodPhase.RUNNING)
_BROKEN = (PodPhase.FAILED, PodPhase.UNKNOWN)


def podgroup_phase(
    conditions: Iterable[Condition], pod_phases: Iterable[PodPhase], *, gang_min_count: int | None
) -> PodGroupPhase:
    """The derived phase of a PodGroup from its conditions and its pods' phases.

    Rules, first match wins (`needed` is minCount for a gang, 1 for a basic group; active pods are Pending
    or Running):
    1. Succeeded: no pod active and at least `needed` succeeded.
    2. Preempted: `DisruptionTarget` is True and fewer than `needed` pods are active (a requeued gang whose
       pods were recreated is Pending again).
    3. Failed: some pod failed and active plus succeeded pods are fewer than `needed` (a timed-out gang's
       pods are all Failed).
    4. Running: at least `needed` pods run.
    5. Scheduled: `PodGroupScheduled` is True and the group was not disrupted since (bound, pods starting).
    6. Pending otherwise (gated, queued, backing off).
    """
    needed = gang_min_count if gang_min_count is not None else 1
    counts = Counter(pod_phases)
    active = counts[PodPhase.PENDING] + counts[PodPhase.RUNNING]
    status = {condition.type: condition for condition in conditions}
    disrupted = _is_true(status.get(ConditionType.DISRUPTION_TARGET))
    # 1.-3. Terminal outcomes first.
    if active == 0 and counts[PodPhase.SUCCEEDED] >= needed:
        return PodGroupPhase.SUCCEEDED
    if disrupted and active < needed:
        return PodGroupPhase.PREEMPTED
    if counts[PodPhase.FAILED] and active + counts[PodPhase.SUCCEEDED] < needed:
        return PodGroupPhase.FAILED
    # 4.-6. Progress.
    if counts[PodPhase.RUNNING] >= needed:
        return PodGroupPhase.RUNNING
    if _is_true(status.get(ConditionType.POD_GROUP_SCHEDULED)) and not disrupted:
        return PodGroupPhase.SCHEDULED
    return PodGroupPhase.PENDING


def decide_gang_restart(group: PodGroup, pods: Mapping[str, PodPhase]) -> GangRestart | None:
    """Whether a gang that dropped below its minCount restarts, and which pods to evict if so.

    Only gangs with `podway.io/gang-restart: Always` restart, and only when a pod failed or was lost
    (phase Unknown) and fewer than minCount pods are still active; finishing normally is not breaking.
    The pods still Pending or Running are evicted (in uid order) and the whole gang is requeued.
    """
    if group.gang_min_count is None or group.gang_restart != GangRestartPolicy.ALWAYS:
        return None
    active = tuple(sorted(uid for uid, phase in pods.items() if phase in _ACTIVE))
    broken = sum(1 for phase in pods.values() if phase in _BROKEN)
    if broken == 0 or len(active) >= group.gang_min_count:
        return None
    message = RestartReason.BELOW_MIN_COUNT.format(
        count=group.gang_min_count, active=len(active), failed=broken
    )
    return GangRestart(group.key, group.uid, active, message)


def _is_true(condition: Condition | None) -> bool:
    return condition is not None and condition.status
