"""What the quota core reasons about: flavors, cohorts and ClusterQueues with their quotas, admitted workloads
with their usage, a workload asking for quota, and the answers. Amounts are canonical integers
(libs.api.quantity: millicores for cpu, whole units otherwise)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from functools import cached_property
from typing import Final

from libs.api.models.core import Taint, Toleration

FlavorResource = tuple[str, str]
"""(flavor, resource): the unit quota is counted in."""

NEVER: Final = "Never"
ANY: Final = "Any"
LOWER_PRIORITY: Final = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY: Final = "LowerOrNewerEqualPriority"
MAY_STOP_SEARCH: Final = "MayStopSearch"
TRY_NEXT_FLAVOR: Final = "TryNextFlavor"


class Mode(StrEnum):
    """How a flavor (or a whole assignment) holds a request, worst first (Kueue's preemption modes)."""

    NO_FIT = "NoFit"
    PREEMPT = "Preempt"
    FIT = "Fit"

    @property
    def rank(self) -> int:
        """Larger is better."""
        return _RANKS[self]


_RANKS: Final = {Mode.NO_FIT: 0, Mode.PREEMPT: 1, Mode.FIT: 2}


class PreemptionReason(StrEnum):
    """Why a workload is preempted: Kueue's `Preempted` condition reasons."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


class FairSharingStrategy(StrEnum):
    """Kueue's fair-sharing preemption strategies (rules S2-a and S2-b of KEP 1714)."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


DEFAULT_STRATEGIES: Final = (
    FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    FairSharingStrategy.LESS_THAN_INITIAL_SHARE,
)


@dataclass(frozen=True)
class Quota:
    """A (flavor, resource) quota; a limit of None is no limit."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class ResourceGroupQuota:
    """Resources assigned one flavor together, and the flavors that provide them, in order of preference."""

    covered_resources: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's preemption policies (`borrow_within_cohort` is borrowWithinCohort's policy)."""

    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class FlavorFungibility:
    """Whether the flavor search goes on past a flavor that needs borrowing or preemption."""

    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR


@dataclass(frozen=True)
class ClusterQueueQuota:
    """A ClusterQueue as the core sees it."""

    name: str
    resource_groups: tuple[ResourceGroupQuota, ...] = ()
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)
    cohort: str | None = None
    preemption: Preemption = Preemption()
    fungibility: FlavorFungibility = FlavorFungibility()
    weight: Decimal = Decimal(1)
    stopped: bool = False
    strict_fifo: bool = False
    """`queueingStrategy: StrictFIFO`: a head that cannot be admitted blocks the workloads behind it (the
    default, BestEffortFIFO, lets them be tried)."""
    admission_fair_sharing: bool = False
    """`admissionScope.admissionMode: UsageBasedAdmissionFairSharing`: the workloads of the LocalQueue that
    used the least lately go first (admission_fair_sharing.py)."""


@dataclass(frozen=True)
class CohortQuota:
    """A Cohort: its parent, its own quota (a pool its subtree shares) and its weight."""

    name: str
    parent: str | None = None
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)
    weight: Decimal = Decimal(1)


@dataclass(frozen=True)
class LocalQueueQuota:
    """A LocalQueue: the ClusterQueue its namespace's workloads are queued to, and whether it is stopped."""

    namespace: str
    name: str
    cluster_queue: str
    stopped: bool = False
    weight: Decimal = Decimal(1)
    """`fairSharing.weight`: divides its usage under admission fair sharing."""

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Flavor:
    """A ResourceFlavor: the node labels and taints it stands for, tolerations it adds."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True)
class AdmittedWorkload:
    """A workload holding quota in a ClusterQueue."""

    name: str
    cluster_queue: str
    priority: int
    created: datetime
    reserved_at: datetime
    usage: Mapping[FlavorResource, int]

    @cached_property
    def preemption_order(self) -> tuple[int, float, str]:
        """Its place among preemption candidates of one queue (Kueue's `CandidatesOrdering`): lower priority
        first, then the most recently admitted, then the name. Computed once: it is asked in every search."""
        return (self.priority, -self.reserved_at.timestamp(), self.name)


@dataclass(frozen=True)
class PodSetRequest:
    """`count` pods alike: what each asks for, and what restricts the flavors they may run on."""

    name: str
    count: int
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True)
class WorkloadRequest:
    """A gang asking its ClusterQueue for quota: all its pods, whole."""

    name: str
    cluster_queue: str
    priority: int
    created: datetime
    pod_sets: tuple[PodSetRequest, ...]
    local_queue: str = ""
    """The LocalQueue it was queued through, `namespace/name` (admission fair sharing orders by it)."""

    @cached_property
    def queue_order(self) -> tuple[int, float, str]:
        """Its place in its ClusterQueue: higher priority, then earlier creation, then name (ordering.py).
        Computed once: every gang that asks compares the others'."""
        return (-self.priority, self.created.timestamp(), self.name)


@dataclass(frozen=True)
class QuotaDecision:
    """The answer to a workload: its flavors per pod set and resource, the mode of the whole assignment, its
    usage per (flavor, resource), whether it borrows, and why it does not fit (Kueue's wording)."""

    mode: Mode
    flavors: Mapping[str, Mapping[str, str]]
    usage: Mapping[FlavorResource, int]
    borrows: bool = False
    message: str = ""
    needs_preemption: frozenset[FlavorResource] = frozenset()
    """The (flavor, resource) pairs whose unused quota is short: what preemption must free."""

    @property
    def fits(self) -> bool:
        """Whether the workload can reserve quota now, without preempting."""
        return self.mode is Mode.FIT


@dataclass(frozen=True)
class PreemptionTarget:
    """A workload to preempt, and why."""

    workload: AdmittedWorkload
    reason: PreemptionReason
