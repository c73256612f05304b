"""Events of a PodGroup's life on the cluster: cycles, placements, bindings, claims, preemption, pods."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from libs.events.catalogue import EventType
from libs.events.envelope import EventPayload
from libs.events.registry import event_model


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PodGroupRef(_Part):
    """Which PodGroup a scheduling event is about."""

    namespace: str = Field(description="Namespace of the PodGroup")
    name: str = Field(description="PodGroup name")
    uid: str = Field(description="PodGroup uid")


class TopologyDomainRef(_Part):
    key: str = Field(description="Topology label key, e.g. topology.example.com/rack")
    value: str = Field(description="The chosen domain, e.g. zone-0-b0-r3")


class PodPlacement(_Part):
    """One pod's node and, when it asked for GPUs or claims, the exact devices."""

    pod: str = Field(description="Pod name")
    pod_uid: str = Field(description="Pod uid")
    node: str = Field(description="Node the pod is placed on")
    devices: dict[str, list[str]] = Field(default_factory=dict, description="Device class -> device names")


class PodRef(_Part):
    namespace: str = Field(description="Namespace")
    name: str = Field(description="Pod name")
    uid: str = Field(description="Pod uid")
    node: str | None = Field(default=None, description="Node, when bound")


class ClaimAllocation(_Part):
    """The devices of one ResourceClaim for one pod or for the whole PodGroup: made from a template, or an
    existing claim the pod names (`shared`)."""

    claim: str = Field(description="ResourceClaim name")
    name: str = Field(default="", description="The claim's name in the pod's or PodGroup's resourceClaims")
    pod: str | None = Field(default=None, description="Pod for per-pod claims; None for PodGroup claims")
    pod_uid: str | None = Field(default=None, description="Uid of that pod")
    devices: list[dict[str, Any]] = Field(
        description="[{request, driver, pool, device, consumedCapacity?}]; consumedCapacity for shares"
    )
    shared: bool = Field(
        default=False,
        description="An existing ResourceClaim the pod names (resourceClaimName), reserved for each pod "
        "naming it; no devices when it was allocated before",
    )


@event_model
class PodGroupCycleStarted(EventPayload):
    """A scheduling cycle began for one PodGroup on one snapshot."""

    TYPE = EventType.PODGROUP_CYCLE_STARTED
    podgroup: PodGroupRef
    attempt: int = Field(description="1 for the first cycle, then counting retries")
    pods: int = Field(description="Pods of the group waiting to be placed")
    min_count: int = Field(description="Gang minCount (1 for basic groups)")


@event_model
class PodGroupCyclePlaced(EventPayload):
    """The cycle found a placement (assumed, not yet bound)."""

    TYPE = EventType.PODGROUP_CYCLE_PLACED
    podgroup: PodGroupRef
    domain: TopologyDomainRef | None = Field(default=None, description="Chosen topology domain")
    placements: list[PodPlacement]
    cycle_ms: float = Field(description="Time inside the cycle")


@event_model
class PodGroupUnschedulable(EventPayload):
    """Fewer than minCount pods fit: nothing was bound."""

    TYPE = EventType.PODGROUP_UNSCHEDULABLE
    podgroup: PodGroupRef
    message: str = Field(description="kube-scheduler wording, e.g. 0/64 nodes are available: ...")
    reasons: dict[str, int] = Field(default_factory=dict, description="Reason -> number of nodes")
    placed: int = Field(description="Pods that would have fit")
    min_count: int
    backoff_s: float = Field(description="Seconds until the next try unless the cluster changes")


@event_model
class PlacementProposed(EventPayload):
    """A placement waits for the DRA allocator to commit devices for its claims."""

    TYPE = EventType.PLACEMENT_PROPOSED
    podgroup: PodGroupRef
    domain: TopologyDomainRef | None = None
    placements: list[PodPlacement]
    claims: list[str] = Field(description="Claims that need devices")
    allocations: list[ClaimAllocation] = Field(
        default_factory=list, description="The exact devices proposed for each claim made from a template"
    )
    proposed_at: str = Field(
        default="", description="Which placement this is (`status.proposal.proposedAt`), to answer it once"
    )


@event_model
class ClaimsAllocated(EventPayload):
    TYPE = EventType.CLAIMS_ALLOCATED
    podgroup: PodGroupRef
    allocations: list[ClaimAllocation]


@event_model
class ClaimsAllocationFailed(EventPayload):
    TYPE = EventType.CLAIMS_ALLOCATION_FAILED
    podgroup: PodGroupRef
    reason: str


@event_model
class ClaimsReleased(EventPayload):
    TYPE = EventType.CLAIMS_RELEASED
    claims: list[str]
    podgroup: PodGroupRef | None = None


@event_model
class PodsBound(EventPayload):
    """One event per gang: every pod bound in the same transaction."""

    TYPE = EventType.PODS_BOUND
    podgroup: PodGroupRef | None = Field(default=None, description="None for pods without a group")
    pods: list[PodPlacement]
    epoch: int = Field(description="Scheduler lease epoch that wrote the bindings")


@event_model
class PodGroupScheduled(EventPayload):
    TYPE = EventType.PODGROUP_SCHEDULED
    podgroup: PodGroupRef
    domain: TopologyDomainRef | None = None
    bound: int = Field(description="Pods bound")


@event_model
class CompositePodGroupScheduled(EventPayload):
    """At least minGroupCount child PodGroups of a CompositePodGroup were placed together."""

    TYPE = EventType.COMPOSITEPODGROUP_SCHEDULED
    composite: PodGroupRef
    domain: TopologyDomainRef | None = None
    groups: list[str] = Field(description="The child PodGroups placed in this cycle")


@event_model
class CompositePodGroupUnschedulable(EventPayload):
    """Fewer than minGroupCount child PodGroups fit together: none was bound."""

    TYPE = EventType.COMPOSITEPODGROUP_UNSCHEDULABLE
    composite: PodGroupRef
    message: str
    groups: list[str] = Field(description="The child PodGroups tried together")


@event_model
class PreemptionRequested(EventPayload):
    TYPE = EventType.PREEMPTION_REQUESTED
    podgroup: PodGroupRef
    priority: int
    message: str = Field(description="Why the group is unschedulable")


@event_model
class PreemptionVictimsSelected(EventPayload):
    TYPE = EventType.PREEMPTION_VICTIMS_SELECTED
    preemptor: PodGroupRef
    victims: list[PodRef]
    victim_groups: list[PodGroupRef] = Field(default_factory=list)
    domain: TopologyDomainRef | None = None
    nodes: list[str] = Field(default_factory=list, description="Nodes the preemptor is nominated to")
    reason: str = Field(default="", description="Why these victims, or why none")


@event_model
class PodsEvicted(EventPayload):
    TYPE = EventType.PODS_EVICTED
    pods: list[PodRef]
    reason: str = Field(description="PreemptionByScheduler, GangRestart, NodeLost, ...")
    podgroup: PodGroupRef | None = None
    message: str = Field(default="", description="Why these pods, e.g. which preemptor they make room for")
    grace_seconds: int | None = Field(
        default=None,
        description="How long each pod has to stop before it is killed (a delete's gracePeriodSeconds); "
        "None: its own terminationGracePeriodSeconds",
    )


@event_model
class PodGroupNominated(EventPayload):
    TYPE = EventType.PODGROUP_NOMINATED
    podgroup: PodGroupRef
    nodes: list[str]
    expires_at: float = Field(description="Unix seconds")


@event_model
class PodGroupNominationCleared(EventPayload):
    TYPE = EventType.PODGROUP_NOMINATION_CLEARED
    podgroup: PodGroupRef
    reason: str


@event_model
class PodGroupTimedOut(EventPayload):
    TYPE = EventType.PODGROUP_TIMED_OUT
    podgroup: PodGroupRef
    pending_s: float
    message: str


@event_model
class PodsRunning(EventPayload):
    TYPE = EventType.PODS_RUNNING
    pods: list[PodRef]


@event_model
class PodsSucceeded(EventPayload):
    TYPE = EventType.PODS_SUCCEEDED
    pods: list[PodRef]


@event_model
class PodsFailed(EventPayload):
    TYPE = EventType.PODS_FAILED
    pods: list[PodRef]
    reason: str


@event_model
class PodGroupRestarted(EventPayload):
    TYPE = EventType.PODGROUP_RESTARTED
    podgroup: PodGroupRef
    reason: str
    evicted: list[PodRef] = Field(default_factory=list)


@event_model
class NodeNotReady(EventPayload):
    """A watched node went unheard past the grace period: Ready is Unknown, nothing new is placed there."""

    TYPE = EventType.NODE_NOT_READY
    node: str = Field(description="Node name")
    since: float = Field(description="When it became NotReady (Unix seconds)")
    message: str


@event_model
class NodeReady(EventPayload):
    """A node that was NotReady or lost beats again: Ready is True."""

    TYPE = EventType.NODE_READY
    node: str = Field(description="Node name")
    since: float = Field(description="When it was heard again (Unix seconds)")


@event_model
class NodeLost(EventPayload):
    """A node is gone (unheard past the eviction timeout, or deleted): the pods that held room on it failed
    (`NodeLost`), their bindings released; a `pods.failed` per PodGroup follows."""

    TYPE = EventType.NODE_LOST
    node: str = Field(description="Node name")
    pods: list[PodRef] = Field(default_factory=list, description="The pods that failed with it")
    deleted: bool = Field(description="The Node object was deleted (else: unheard past the eviction timeout)")
    message: str
