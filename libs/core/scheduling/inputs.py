"""What the scheduler state machine is told: objects stored and removed, pods finishing and being evicted,
claims allocated or refused, nominations. The adapter maps each consumed event onto one of these; time
comes with every call, never from a clock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .lifecycle import PodPhase
from .node_health import NodeCondition
from .objects import ApiObject


@dataclass(frozen=True, slots=True)
class ObjectStored:
    """An object was created or changed (a Node, ResourceSlice, DeviceClass, ResourceClaimTemplate,
    Workload, PodGroup or Pod); a version older than the one held, or of a removed uid, is ignored."""

    obj: ApiObject
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class ObjectRemoved:
    """An object was deleted; its uid is remembered for a while so that a late event cannot bring it back."""

    kind: str
    namespace: str
    name: str
    uid: str
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class PodsFinished:
    """Pods succeeded or failed: their room is free; a gang that broke may restart."""

    uids: tuple[str, ...]
    phase: PodPhase
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class PodsEvicted:
    """Pods are being evicted (preemption, gang restart) or deleted: they hold their room until they end,
    and their failure does not count as their gang breaking."""

    uids: tuple[str, ...]
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class PodsBound:
    """Pods were bound (by the scheduler): what a process that only observes the cluster, the preemptor,
    is told; each entry is a pod uid, its node and the devices it holds per class."""

    placements: tuple[tuple[str, str, Mapping[str, tuple[str, ...]]], ...]
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimsAllocated:
    """The DRA allocator committed the devices of a PodGroup's proposed placement. `devices`, when told,
    are the `(claim, driver/pool/device)` pairs it committed: an answer to an earlier proposal (one the
    scheduler gave up waiting for) does not bind a later one."""

    podgroup_uid: str
    cause: str | None = None
    devices: frozenset[tuple[str, str]] | None = None


@dataclass(frozen=True, slots=True)
class ClaimsHeld:
    """The DRA allocator committed these allocations: what a process that only observes the cluster, the
    preemptor, is told, so that it sees the shares and reached devices that a pod's node and devices do
    not show. Each entry is the pod uid owning the claim (None: the PodGroup's own claim) and the
    allocation as recorded (`{resourceClaimName, devices: [{request, driver, pool, device,
    consumedCapacity?}], shared?}`; `shared`: an existing ResourceClaim the pod names)."""

    podgroup_uid: str
    allocations: tuple[tuple[str | None, Mapping[str, Any]], ...]
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimsAllocationFailed:
    """The DRA allocator refused a PodGroup's proposed placement."""

    podgroup_uid: str
    reason: str
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class Nominated:
    """The preemptor made room for a PodGroup on these nodes: hold it for that group until it expires."""

    podgroup_uid: str
    nodes: tuple[str, ...]
    expires_at: float
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class NominationCleared:
    podgroup_uid: str
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class NodesHeard:
    """The node agents' beat counts, as read now (node name -> count)."""

    beats: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class NodeHealthChanged:
    """Another service decided that a node became NotReady, lost or Ready again (its `node.*` event)."""

    node: str
    condition: NodeCondition
    since: float
    cause: str | None = None


Input = (
    ObjectStored
    | ObjectRemoved
    | PodsFinished
    | PodsEvicted
    | PodsBound
    | ClaimsAllocated
    | ClaimsHeld
    | ClaimsAllocationFailed
    | Nominated
    | NominationCleared
    | NodesHeard
    | NodeHealthChanged
)


@dataclass(frozen=True, slots=True)
class NodeHealthRecord:
    """A watched node as stored, for a new leader: its beat count and its Ready condition."""

    node: str
    beats: int
    condition: NodeCondition
    since: float


@dataclass(frozen=True, slots=True)
class NominationRecord:
    """A nomination as stored, for a new leader."""

    podgroup_uid: str
    nodes: tuple[str, ...]
    expires_at: float


WORLD_KINDS = (
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "DeviceClass",
    "Node",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "Workload",
    "CompositePodGroup",
    "PodGroup",
    "Pod",
    "ResourceClaim",
)
"""The kinds a World is loaded from, in this order: Kueue's quota objects first (flavors, cohorts, then the
queues naming them), allocated ResourceClaims last, their holders known (a
standalone pod's share is recorded nowhere else)."""


@dataclass(frozen=True, slots=True)
class World:
    """What a new leader starts from: every object the scheduler reads (in dependency order), where the
    pods that hold room are bound (pod uid -> node), the pods known to be leaving (evicted or deleted, not
    yet ended), and the nominations in force."""

    objects: list[ApiObject]
    bindings: dict[str, str]
    leaving: frozenset[str] = frozenset()
    nominations: tuple[NominationRecord, ...] = ()
    node_health: tuple[NodeHealthRecord, ...] = ()
    causes: Mapping[str, str] = field(default_factory=dict)
    """Group (or standalone pod) uid -> the latest event of its story: what a waiting group's first cycle
    under a new leader answers."""
