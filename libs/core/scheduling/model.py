"""The scheduler's own view of the world: nodes, pod requests, PodGroups, and the decisions a cycle makes.

Frozen dataclasses (named tuples for the per-pod records a cycle creates by the thousand), independent of
the API models: the services map API objects onto them. Reasons are `StrEnum` constants next to the types,
worded the way kube-scheduler words them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from libs.core.dra.allocator import ClaimAllocation
    from libs.core.dra.claims import ClaimSpec

ZONE_KEY = "topology.kubernetes.io/zone"
BLOCK_KEY = "topology.example.com/block"
RACK_KEY = "topology.example.com/rack"
HOSTNAME_KEY = "kubernetes.io/hostname"
DEFAULT_TOPOLOGY_KEYS = (ZONE_KEY, BLOCK_KEY, RACK_KEY)
"""Topology keys a snapshot aggregates from the start, broadest first; their order says which level is
narrower. Any other key (the hostname too: a hostname domain is one node, whose free capacity the node
already carries) is aggregated from the first cycle that asks for it on, and ranks narrowest."""

DEFAULT_SCHEDULER_NAME = "default-scheduler"
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
CPU_DIMENSION = "cpu:cores"
"""Index dimension for pods that ask for no device: free whole CPU cores (a colon is never in a class name)."""


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class TolerationOperator(StrEnum):
    EQUAL = "Equal"
    EXISTS = "Exists"


class GangRestartPolicy(StrEnum):
    """`podway.io/gang-restart`: what happens when a running gang drops below its minCount."""

    ALWAYS = "Always"
    NEVER = "Never"


class CycleResult(StrEnum):
    PLACED = "Placed"
    UNSCHEDULABLE = "Unschedulable"


class NodeFilterReason(StrEnum):
    """Why a node cannot take a pod, in kube-scheduler wording (templates take `str.format` arguments)."""

    UNSCHEDULABLE = "node(s) were unschedulable"
    UNTOLERATED_TAINT = "node(s) had untolerated taint {{{key}: {value}}}"
    SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
    INSUFFICIENT = "Insufficient {resource}"
    TOO_MANY_PODS = "Too many pods"
    CLAIMS = "cannot allocate all claims"


class GangReason(StrEnum):
    """Why a PodGroup as a whole could not be placed (templates take `str.format` arguments)."""

    NODES_UNAVAILABLE = "0/{total} nodes are available"
    NO_NODES = "no nodes available to schedule pods"
    NO_TOPOLOGY_DOMAIN = "no {key} domain can hold all {count} pods of the gang"
    NO_TOPOLOGY_DOMAIN_FOR_ANY = "no {key} domain can hold a pod of the group"
    DOMAIN_FULL = "the gang's {key} domain {value} cannot hold {count} more pod(s)"
    BELOW_MIN_COUNT = "only {placed} of the {count} pods the gang needs fit"
    TOO_FEW_PODS = "the gang needs {count} pods, {present} exist"
    OTHER_SCHEDULER = "{count} pod(s) name a scheduler other than {scheduler}"
    COMPOSITE_BELOW_MIN = (
        "CompositePodGroup {composite}: only {placed} of the {count} child group(s) it needs fit together"
    )
    COMPOSITE_NO_DOMAIN = (
        "CompositePodGroup {composite}: no {key} domain can hold {count} of its child groups together"
    )
    COMPOSITE_MISSING = "waiting for CompositePodGroup {composite}, which does not exist"
    COMPOSITE_WAITING = (
        "CompositePodGroup {composite}: waiting for its child groups: {ready} of the {count} it needs "
        "together have their pods"
    )


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; an empty key with `Exists` tolerates every taint, `effect=None` every effect."""

    key: str = ""
    operator: TolerationOperator = TolerationOperator.EQUAL
    value: str = ""
    effect: TaintEffect | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration matches the taint (Kubernetes `ToleratesTaint`)."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return self.operator == TolerationOperator.EXISTS or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Node:
    """A node as the scheduler sees it: allocatable resources and every device it publishes per class.

    `devices` maps a DeviceClass name to the names of the node's devices of that class (`gpu-0` ...): GPUs
    are DRA devices, counted once. Which of them are free is the snapshot's business.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    cpu_milli: int = 0
    memory: int = 0
    pods: int = 110
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class PodShape:
    """What decides where (and by whom) a pod is placed; pods of one gang template share an equal shape
    and are placed in bulk.

    `primary` is the dimension nodes and domains are packed by: the device class the pod asks most of
    (ties by name), or free CPU cores for a pod that asks for no device. `claims` are the pod's own
    ResourceClaims (from templates): `devices` then counts the whole devices they surely need (a screen),
    and the DRA allocation search decides the exact devices.
    """

    cpu_milli: int
    memory: int
    devices: tuple[tuple[str, int], ...]
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]
    scheduler_name: str
    primary: str = field(compare=False)
    primary_request: int = field(compare=False)
    claims: tuple[ClaimSpec, ...] = ()

    @classmethod
    def of(
        cls,
        cpu_milli: int,
        memory: int,
        devices: Mapping[str, int],
        node_selector: Mapping[str, str],
        tolerations: tuple[Toleration, ...],
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        claims: tuple[ClaimSpec, ...] = (),
    ) -> PodShape:
        """The shape of a pod with these requests (zero device counts dropped, mappings sorted).

        Equal shapes are usually the same object, so a cycle groups a gang's pods by identity.
        """
        wanted = tuple(sorted((name, count) for name, count in devices.items() if count > 0))
        selector = tuple(sorted(node_selector.items()))
        return _interned_shape(cpu_milli, memory, wanted, selector, tolerations, scheduler_name, claims)


@lru_cache(maxsize=4096)
def _interned_shape(
    cpu_milli: int,
    memory: int,
    devices: tuple[tuple[str, int], ...],
    node_selector: tuple[tuple[str, str], ...],
    tolerations: tuple[Toleration, ...],
    scheduler_name: str,
    claims: tuple[ClaimSpec, ...] = (),
) -> PodShape:
    if devices:
        primary, primary_request = min(devices, key=lambda item: (-item[1], item[0]))
    else:
        primary, primary_request = CPU_DIMENSION, cpu_milli // 1000
    return PodShape(
        cpu_milli,
        memory,
        devices,
        node_selector,
        tolerations,
        scheduler_name,
        primary,
        primary_request,
        claims,
    )


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod to place: its requests, node selector, tolerations and scheduler name.

    `devices` counts whole devices per DeviceClass (`nvidia.com/gpu: 2` arrives as the class whose
    `extendedResourceName` is `nvidia.com/gpu`); `claims` are its own ResourceClaims (see `PodShape`).
    """

    uid: str
    name: str
    cpu_milli: int = 0
    memory: int = 0
    devices: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    claims: tuple[ClaimSpec, ...] = ()
    shape: PodShape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = PodShape.of(
            self.cpu_milli,
            self.memory,
            self.devices,
            self.node_selector,
            self.tolerations,
            self.scheduler_name,
            self.claims,
        )
        object.__setattr__(self, "shape", shape)


@dataclass(frozen=True, slots=True)
class TopologyDomainRef:
    """One topology domain: the nodes whose label `key` has `value`."""

    key: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A PodGroup as the scheduler and its queue need it.

    `gang_min_count` is None for a `basic` group. `topology_key` is the hard constraint
    (`schedulingConstraints.topology[0].key`); `preferred_topology` the `podway.io/topology-preferred`
    levels, tightest first. `assigned_domain` is the domain chosen by the cycle that placed the gang: pods
    added later join it. `claims` are the PodGroup's own ResourceClaims, shared by all its pods: their
    devices must be reachable from every node of the gang (a rack fabric keeps it in the rack). `within` is
    the domain of the CompositePodGroup the group belongs to: every scope is taken inside it.
    """

    namespace: str
    name: str
    uid: str = ""
    gang_min_count: int | None = None
    topology_key: str | None = None
    preferred_topology: tuple[str, ...] = ()
    priority: int = 0
    created_at: float = 0.0
    workload_name: str | None = None
    max_pending_seconds: float | None = None
    gang_restart: GangRestartPolicy = GangRestartPolicy.NEVER
    assigned_domain: TopologyDomainRef | None = None
    claims: tuple[ClaimSpec, ...] = ()
    within: TopologyDomainRef | None = None
    key: str = field(init=False, repr=False, compare=False)
    """`namespace/name`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def is_gang(self) -> bool:
        return self.gang_min_count is not None


class Placement(NamedTuple):
    """One pod on one node, with the exact devices chosen per class (the DRA allocator commits them).

    A named tuple rather than a frozen dataclass: a cycle creates one per pod, and a tuple is several times
    cheaper to build while just as immutable.
    """

    pod_uid: str
    pod_name: str
    node_name: str
    cpu_milli: int
    memory: int
    devices: Mapping[str, tuple[str, ...]]


class NodeAssignment(NamedTuple):
    """What a decision takes on one node in total: `pod_count` consecutive placements of the decision,
    their summed cpu and memory, and every device they name per class. The snapshot applies a decision
    node by node from these, without going through its pods one by one."""

    node_name: str
    pod_count: int
    cpu_milli: int
    memory: int
    devices: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, placements: Sequence[Placement]) -> NodeAssignment:
        """The assignment of placements that are all on one node."""
        devices: dict[str, tuple[str, ...]] = {}
        for placement in placements:
            for device_class, names in placement.devices.items():
                devices[device_class] = devices.get(device_class, ()) + tuple(names)
        return cls(
            placements[0].node_name,
            len(placements),
            sum(placement.cpu_milli for placement in placements),
            sum(placement.memory for placement in placements),
            devices,
        )


@dataclass(frozen=True, slots=True)
class ResourceTotals:
    """An amount of every resource the scheduler tracks: requested by pods, or free on a node or domain."""

    pods: int = 0
    cpu_milli: int = 0
    memory: int = 0
    devices: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """Why a PodGroup could not be placed, in kube-scheduler wording, and what it asks for.

    `reason_counts` holds the node count per filter reason; `requested` (the totals of the group's pods),
    `required_count` (how many must fit together) and `topology_key` (the hard key they must share) tell a
    preemptor how much room to look for, and where.
    """

    message: str
    reason_counts: Mapping[str, int]
    requested: ResourceTotals
    required_count: int
    topology_key: str | None
    required_totals: ResourceTotals | None = None
    """The least that `required_count` pods of the group ask for (cheapest pods per resource)."""
    shapes: tuple[PodShape, ...] = ()
    """The distinct shapes of the group's pods, for queueing hints."""


@dataclass(frozen=True, slots=True)
class CycleDecision:
    """The outcome of one PodGroup scheduling cycle, computed on a snapshot and not yet applied to it.

    Placed, it lists every placement (grouped by node, in the order of `assignments`), the domain it
    chose, and the pods left over (`unplaced`: a basic group, or a gang above its minCount);
    `snapshot.apply(decision)` assumes it and `snapshot.forget(decision)` rolls it back. Unschedulable, it
    places nothing and `unschedulable` says why.
    """

    podgroup: str
    placements: tuple[Placement, ...]
    assignments: tuple[NodeAssignment, ...]
    domain: TopologyDomainRef | None
    unplaced: tuple[str, ...]
    unschedulable: Unschedulable | None
    decided_at: float
    claims: Mapping[str, tuple[ClaimAllocation, ...]] | None = None
    """Exact devices of the claims, by pod uid for a pod's own claims and by `""` for the PodGroup's."""

    @property
    def result(self) -> CycleResult:
        return CycleResult.PLACED if self.placements else CycleResult.UNSCHEDULABLE

    @property
    def placed(self) -> bool:
        return bool(self.placements)

    @property
    def message(self) -> str:
        """Why the group is unschedulable (`PodGroupScheduled=False` message); empty when placed."""
        return "" if self.unschedulable is None else self.unschedulable.message

    @property
    def reason_counts(self) -> Mapping[str, int]:
        return _NO_REASONS if self.unschedulable is None else self.unschedulable.reason_counts


_NO_REASONS: Mapping[str, int] = MappingProxyType({})
