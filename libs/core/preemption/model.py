"""What the victim search works on and what it decides: running units, the preemptor, the decision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from libs.core.dra.allocator import ClaimAllocation
from libs.core.scheduling.model import Placement, PodGroup, PodRequest, TopologyDomainRef

PREEMPT_NEVER = "Never"
"""`preemptionPolicy` of a pod (from its PriorityClass) that may wait but never preempts."""


class DisruptionMode(StrEnum):
    """`PodGroup.spec.disruptionMode`: whether the group goes whole, or may lose single pods."""

    POD_GROUP = "PodGroup"
    POD = "Pod"


class PreemptionReason(StrEnum):
    """Why the search decided what it decided (templates take `str.format` arguments)."""

    PREEMPTING = (
        "preempting {pods} pod(s) of {groups} lower-priority unit(s) (priority at most {priority}) "
        "frees room for the group in {domain}"
    )
    FITS = "the group fits without preempting anyone"
    RECLAIMING = "preempting {groups} gang(s) to free quota for the group in ClusterQueue {queue}"
    NOTHING_TO_RECLAIM = (
        "no gang that ClusterQueue {queue}'s preemption policies allow to preempt frees its quota"
    )
    NEVER = "the group's preemptionPolicy is Never"
    NOTHING_PENDING = "the group has no pods waiting"
    NO_CANDIDATES = "no running pods have a priority lower than {priority}"
    WOULD_NOT_FIT = "no {where} would hold the group even with every lower-priority pod in it preempted"


class VictimReason(StrEnum):
    """Why a unit was chosen, told in the victim's own story."""

    CHOSEN = (
        "preempted by {preemptor} (priority {preemptor_priority}) to make room in {domain}: priority "
        "{priority} is lower, and no cheaper set of units frees that room"
    )
    SHRUNK = (
        "gang shrunk to its minCount {min_count} (not preempted) by {preemptor} (priority "
        "{preemptor_priority}) to make room in {domain}: priority {priority} is lower, and its {pods} pod(s) "
        "above minCount, highest completion index first, free that room; the gang keeps running"
    )


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod holding room: where (its placement, devices included), its priority, since when."""

    placement: Placement
    namespace: str
    group_key: str
    priority: int
    started_at: float
    index: int | None = None
    """The pod's completion index (`batch.kubernetes.io/job-completion-index`), if it has one."""

    @property
    def uid(self) -> str:
        return self.placement.pod_uid

    @property
    def node(self) -> str:
        return self.placement.node_name


@dataclass(frozen=True, slots=True)
class UnitOwner:
    """The group a running pod belongs to: a PodGroup, or the one-pod group of a standalone pod."""

    key: str
    namespace: str
    name: str
    uid: str
    priority: int
    mode: DisruptionMode
    min_count: int
    """How many pods must keep running (0 for a basic group): a `Pod`-mode group loses pods down to it, and
    a `PodGroup`-mode gang running more than it (an elastic gang) may be shrunk to it."""
    standalone: bool = False


@dataclass(frozen=True, slots=True)
class Preemptor:
    """The group that does not fit: its scheduling view, its waiting pods, how many already run."""

    group: PodGroup
    pods: Sequence[PodRequest]
    bound_pods: int = 0
    never: bool = False
    spared: frozenset[str] = frozenset()
    """Owners the search may not take whatever their priority: under quotas, the gangs of other queues that
    borrow nothing (Kueue preempts across queues only what they borrow)."""


@dataclass(frozen=True, slots=True)
class Victim:
    """What one owner loses: some of its pods (`Pod` mode above minCount) or all of them (`whole`)."""

    owner: UnitOwner
    pods: tuple[RunningPod, ...]
    whole: bool
    shrunk: bool = False
    """A gang that loses only pods above its minCount and keeps running: shrunk, not preempted."""
    message: str = ""
    """Why it was chosen, when a rule other than the search's chose it (Kueue's words for quota)."""


@dataclass(frozen=True, slots=True, order=True)
class Cost:
    """What a victim set costs, compared in this order: the highest victim priority, pods evicted, seconds
    of run time lost."""

    priority: int
    pods: int
    run_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class PreemptionDecision:
    """The victims to evict (none unless the preemptor then fits), where the preemptor would go, and why.

    `placements` is the placement the search found for the preemptor once the victims are gone: its nodes
    are the ones to nominate; `claims` the allocations of its claims there (as `CycleDecision.claims`)."""

    preemptor: str
    victims: tuple[Victim, ...]
    domain: TopologyDomainRef | None
    placements: tuple[Placement, ...]
    reason: str
    cost: Cost | None = None
    domains_evaluated: int = 0
    claims: Mapping[str, tuple[ClaimAllocation, ...]] = field(default_factory=dict)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({placement.node_name for placement in self.placements}))

    @property
    def evicted_pods(self) -> int:
        return sum(len(victim.pods) for victim in self.victims)


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How far the search looks.

    `max_domains` bounds the domains searched in full, taken in order of a lower bound on their cost (as
    kube-scheduler's DefaultPreemption bounds its candidate nodes); a domain whose bound is already worse
    than the best set found is never searched.
    """

    max_domains: int = 16
