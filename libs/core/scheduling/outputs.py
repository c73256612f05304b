"""What the scheduler state machine decides, for its adapter to write in one transaction: events, bindings,
statuses and conditions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .lifecycle import ConditionReason
from .model import CycleDecision, Placement, TopologyDomainRef
from .node_health import NodeCondition


class GroupRef(NamedTuple):
    """The PodGroup an outcome is about; `standalone` for the one-pod group of a pod without a PodGroup
    (then `uid` is the pod's)."""

    namespace: str
    name: str
    uid: str
    standalone: bool = False


class PodKey(NamedTuple):
    namespace: str
    name: str
    uid: str
    node: str | None


@dataclass(frozen=True, slots=True)
class Binding:
    """Bind a placed gang: one binding per pod, `pods.bound`, `podgroup.scheduled`, the PodGroupScheduled
    condition and the placement in the PodGroup's status."""

    group: GroupRef
    placements: tuple[Placement, ...]
    domain: TopologyDomainRef | None
    placement_status: Mapping[str, Any]
    first: bool
    cause: str | None = None
    cluster_queue: str | None = None
    """The ClusterQueue the gang holds quota in (`QuotaReserved` True), if it is quota-managed."""


@dataclass(frozen=True, slots=True)
class CycleRan:
    """One cycle: `podgroup.cycle.started`, then `cycle.placed` (followed by `bind`, or by
    `placement.proposed` when `claims` need devices) or `podgroup.unschedulable`."""

    group: GroupRef
    attempt: int
    pods: int
    min_count: int
    decision: CycleDecision
    cycle_ms: float
    cause: str | None
    backoff_s: float = 0.0
    bind: Binding | None = None
    claims: tuple[str, ...] = ()
    proposal_status: Mapping[str, Any] | None = None
    """With `claims`: the proposed placement, recorded (`status.proposal`) so that a new leader still waits
    for its claims."""
    preemption_priority: int | None = None
    condition_false: bool = True
    joining: tuple[str, ...] = ()
    """Pods joining a scheduled gang (scale up) that wait: the gang's own condition stays True, so each of
    these pods' `PodScheduled` condition says why (e.g. the gang's domain is full)."""
    quota_message: str | None = None
    """Why the gang's ClusterQueue has no quota for it (Kueue's message): it was not placed, it waits for
    quota (`QuotaReserved` False, and `PodGroupScheduled` False, SchedulingGated, with `decision.message`)."""
    quota_reason: ConditionReason = ConditionReason.QUOTA_PENDING
    """`QuotaReserved`'s reason meanwhile (Kueue's: Pending, or Inadmissible when its LocalQueue is missing)."""


@dataclass(frozen=True, slots=True)
class AllocationFailed:
    """The DRA allocator refused the proposed placement, or did not answer in time: it is forgotten (and
    its record in `status.proposal` cleared) and the gang retries."""

    group: GroupRef
    reason: str
    min_count: int
    backoff_s: float
    cause: str | None
    condition_false: bool


@dataclass(frozen=True, slots=True)
class TimedOut:
    """A gang pending past its `podway.io/max-pending-seconds`: it and its waiting pods fail, and a placement
    it proposed is forgotten."""

    group: GroupRef
    pending_s: float
    message: str
    pods: tuple[PodKey, ...]
    cause: str | None
    condition_false: bool


@dataclass(frozen=True, slots=True)
class Restart:
    """A running gang fell below minCount (`podway.io/gang-restart: Always`): evict the rest (each marked
    `DisruptionTarget`, so a new leader knows they are leaving), requeue."""

    group: GroupRef
    message: str
    evict: tuple[PodKey, ...]
    cause: str | None


@dataclass(frozen=True, slots=True)
class NodeHealthChange:
    """A watched node became NotReady (`node.not_ready`) or Ready again (`node.ready`): its Ready condition."""

    node: str
    condition: NodeCondition
    since: float


@dataclass(frozen=True, slots=True)
class NodeLost:
    """A node is gone (unheard past the eviction timeout, or deleted): the pods that held room on it fail,
    `NodeLost` with `DisruptionTarget`, their bindings released (`node.lost`, `pods.failed`)."""

    node: str
    pods: tuple[tuple[GroupRef, PodKey], ...]
    """Each pod that failed, with the PodGroup (or the pod's own group) whose story it belongs to."""
    since: float
    deleted: bool
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class Disrupted:
    """Every pod of a scheduled gang left its node unfinished (preempted, lost): the gang is placed anew,
    its domain and placement forgotten and `PodGroupScheduled` False until then."""

    group: GroupRef
    reason: str
    message: str
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class QuotaReleased:
    """A quota-managed gang none of whose pods holds a node any more holds no quota: its `QuotaReserved`
    turns False (when it was True), as finished when none of its pods is left to place, else as waiting for
    quota again."""

    group: GroupRef
    cluster_queue: str
    finished: bool
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class LocalQueuesSampled:
    """Admission fair sharing sampled the LocalQueues' usage: each changed one's (namespace, name, Kueue's
    `admissionFairSharingStatus`), to be written in its status."""

    statuses: tuple[tuple[str, str, Mapping[str, Any]], ...]


@dataclass(frozen=True, slots=True)
class CompositeCycleRan:
    """A cycle of a CompositePodGroup not yet placed: its children placed together (the composite's
    `CompositePodGroupInitiallyScheduled` True, for good) or none of them (False, with why)."""

    composite: GroupRef
    placed: bool
    groups: tuple[str, ...]
    domain: TopologyDomainRef | None
    message: str
    cause: str | None


Output = (
    CompositeCycleRan
    | CycleRan
    | Binding
    | AllocationFailed
    | TimedOut
    | Restart
    | NodeHealthChange
    | NodeLost
    | Disrupted
    | QuotaReleased
    | LocalQueuesSampled
)
