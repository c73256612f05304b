"""Topology-aware bin-packing for one cycle: choose the tightest domain, then the tightest nodes in it.

Nothing here changes the snapshot: capacity a cycle takes is tracked in a cycle-local usage table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from libs.core.dra.allocator import ClaimAllocation

from .capacity import NodeState
from .claims import ClaimOverlay
from .filters import NodeUsage, admits, fit_count
from .model import CPU_DIMENSION, PodRequest, PodShape
from .snapshot import ClusterSnapshot
from .topology import TopologyDomain

_new_tuple = tuple.__new__


@dataclass(slots=True)
class Batch:
    """Pods of one shape, in the cycle's fixed order; they are placed in bulk, as many per node as fit."""

    shape: PodShape
    pods: list[PodRequest]
    placed: int = 0


@dataclass(slots=True)
class Demand:
    """What a number of a group's pods ask for in total, and the dimension domains are packed by.

    `primary` is the device class asked for most (ties by name), else CPU cores; `primary_count` is how
    much of it (whole cores for CPU).
    """

    pods: int
    cpu: int
    memory: int
    devices: dict[str, int] = field(default_factory=dict)
    primary: str = CPU_DIMENSION
    primary_count: int = 0

    def settle(self) -> Demand:
        devices = self.devices
        if len(devices) == 1:
            ((self.primary, self.primary_count),) = devices.items()
        elif devices:
            self.primary, self.primary_count = min(devices.items(), key=lambda item: (-item[1], item[0]))
        else:
            self.primary_count = self.cpu // 1000
        return self


class Scope(NamedTuple):
    """Where a cycle looks: domains of `key` (None: the whole cluster), optionally only some `values`.

    With `within_key`, every chosen node must also share one value of that (hard) key: a preferred level
    tried inside the hard one.
    """

    key: str | None
    values: tuple[str, ...] | None
    within_key: str | None


class Take(NamedTuple):
    """`size` pods of a batch, from position `first` on, placed on one node.

    `offsets[i]` is where the devices of the shape's i-th device class start in the node's free list;
    for a shape with claims, `claims` holds each pod's allocations instead.
    """

    node: NodeState
    batch: Batch
    first: int
    size: int
    offsets: tuple[int, ...]
    claims: list[tuple[ClaimAllocation, ...]] | None = None


class Found(NamedTuple):
    domain: TopologyDomain
    takes: list[Take]
    placed: int


def search(
    snapshot: ClusterSnapshot,
    scope: Scope,
    batches: Sequence[Batch],
    demand: Demand,
    floor: Demand,
    required: int,
    *,
    all_or_none: bool = False,
    reach: Reach | None = None,
) -> Found | None:
    """The tightest domain of the scope whose nodes fit every pod, else the one fitting the most.

    Domains come least free first (the bin-packing score, see `schedule_podgroup`); each is pruned on its
    aggregates before its nodes are planned. The answer may fit fewer than `required` pods (the caller
    then knows how close it came); None when no domain passed the aggregate check.

    `all_or_none` says the caller only wants a domain fitting every pod (how close the others came does
    not matter to it): a domain whose nodes cannot hold every pod by their free count of the primary
    dimension is then passed over without planning its nodes, so a partial answer may not be the closest.
    `reach` limits the nodes to those reaching the PodGroup's claim devices, taken before any pod's.
    """
    total = demand.pods
    best: Found | None = None
    prune = _pruning(batches) if all_or_none and required == total else None
    # 1. Domains that could hold every pod, tightest first: the first that does wins.
    for domain in _candidates(snapshot, scope, batches, demand):
        if _holds(domain, demand):
            if prune is not None and _too_few_slots(snapshot, domain, prune, total):
                continue
            takes, placed = plan(snapshot, domain, batches, reach)
            if scope.within_key is not None and not _within(scope.within_key, takes):
                continue
            if placed == total:
                return _new_tuple(Found, (domain, takes, placed))
            if best is None or placed > best.placed:
                best = _new_tuple(Found, (domain, takes, placed))
    if required == total:
        return best
    # 2. Otherwise the domain fitting the most pods, tightest first among equals.
    for domain in _candidates(snapshot, scope, batches, floor):
        if _holds(domain, floor):
            takes, placed = plan(snapshot, domain, batches, reach)
            if (scope.within_key is None or _within(scope.within_key, takes)) and (
                best is None or placed > best.placed
            ):
                best = Found(domain, takes, placed)
    return best


def _pruning(batches: Sequence[Batch]) -> PodShape | None:
    """The shape whose node index bounds how many pods a domain holds: one shape asking some of its primary
    dimension (a pod asking less than one whole core cannot be bounded by whole cores)."""
    if len(batches) != 1 or batches[0].shape.primary_request <= 0:
        return None
    return batches[0].shape


def _too_few_slots(snapshot: ClusterSnapshot, domain: TopologyDomain, shape: PodShape, count: int) -> bool:
    """Whether the domain's nodes cannot hold `count` pods of the shape even by their free primary count
    alone (each node holding `free // request`; whole cores bound milli-CPU from above just as well)."""
    index = domain.node_index.get(shape.primary)
    if index is None:
        index = snapshot.node_index(domain, shape.primary)
        if index is None:
            return True
    return index.units(shape.primary_request, count) < count


_ORDERED_WHEN_READ = 16
"""A level of at most this many domains (blocks, zones) is put in order when a cycle reads it rather than
indexed: sorting a few domains costs less than moving them in an index at every change of a node."""


def _candidates(
    snapshot: ClusterSnapshot, scope: Scope, batches: Sequence[Batch], demand: Demand
) -> Iterator[TopologyDomain]:
    """Domains of the scope that may hold the demand, least free of its primary dimension first."""
    key = scope.key
    if key is None:
        return iter((snapshot.cluster,))
    level = snapshot.level(key)
    dimension, minimum = demand.primary, demand.primary_count
    values = scope.values
    if values is None:
        values = _selected_values(key, batches)
    if values is None and (len(level.domains) > _ORDERED_WHEN_READ or dimension in level.index):
        return map(level.domains.__getitem__, snapshot.domain_index(level, dimension).at_least(minimum))
    domains = level.domains
    chosen = domains.values() if values is None else [domains[value] for value in values if value in domains]
    return iter(_tightest_first(chosen, dimension, minimum))


def _tightest_first(domains: Iterable[TopologyDomain], dimension: str, minimum: int) -> list[TopologyDomain]:
    """The domains holding at least `minimum` of the dimension, in a domain index's order."""
    held = [domain for domain in domains if domain.count(dimension) >= minimum]
    held.sort(key=lambda domain: (domain.count(dimension), domain.value))
    return held


def _selected_values(key: str, batches: Sequence[Batch]) -> tuple[str, ...] | None:
    """The one domain every pod's node selector names for the key, if they all name the same."""
    value: str | None = None
    for batch in batches:
        selector = batch.shape.node_selector
        if not selector:
            return None
        named = dict(selector).get(key)
        if named is None or (value is not None and named != value):
            return None
        value = named
    return None if value is None else (value,)


def _holds(domain: TopologyDomain, demand: Demand) -> bool:
    if domain.free_pods < demand.pods or domain.free_cpu < demand.cpu or domain.free_memory < demand.memory:
        return False
    free_devices = domain.free_devices
    for cls, count in demand.devices.items():  # noqa: SIM110 - a loop is faster than all() on one class
        if free_devices.get(cls, 0) < count:
            return False
    return True


def _within(key: str, takes: Sequence[Take]) -> bool:
    values = {take.node.labels.get(key) for take in takes}
    return len(values) == 1 and None not in values


class Reach(NamedTuple):
    """The PodGroup's claim allocations and the nodes that reach their devices (None: every node)."""

    allocations: tuple[ClaimAllocation, ...]
    nodes: frozenset[str] | None


def plan(
    snapshot: ClusterSnapshot, domain: TopologyDomain, batches: Sequence[Batch], reach: Reach | None = None
) -> tuple[list[Take], int]:
    """Exact per-node fit inside a domain: each batch fills nodes tightest first, in bulk per node.

    Nodes come by ascending free count of the shape's primary dimension, then by name; each takes as many
    pods as fit (`fit_count`). Capacity taken by earlier batches is tracked in a cycle-local usage table;
    with a single batch each node is visited once and no table is needed. Pods with claims fit as many as
    the allocation search finds devices for, one after the other, in an overlay of the plan's own.
    """
    nodes = snapshot.nodes_by_name
    usage: dict[str, NodeUsage] | None = {} if len(batches) > 1 else None
    takes: list[Take] = []
    placed = 0
    view = snapshot.claims
    overlay: ClaimOverlay | None = None
    if view is not None and (reach is not None or any(batch.shape.claims for batch in batches)):
        overlay = ClaimOverlay()
        if reach is not None:
            overlay.take(reach.allocations)
    allowed = reach.nodes if reach is not None else None
    for batch in batches:
        shape = batch.shape
        claims = shape.claims if view is not None else ()
        order = (
            view.room_order(claims, shape, snapshot)
            if claims and view is not None and domain is snapshot.cluster
            else None
        )
        # Every domain has a cpu index once asked for: shares in their own order do not need it built.
        if order is None or shape.primary != CPU_DIMENSION:
            index = domain.node_index.get(shape.primary)
            if index is None:
                index = snapshot.node_index(domain, shape.primary)
                if index is None:
                    continue
            if order is None:
                order = index.at_least(shape.primary_request)
        need = len(batch.pods)
        first = 0
        filtered = bool(shape.node_selector)
        no_offsets = (0,) * len(shape.devices)
        for name in order:
            if allowed is not None and name not in allowed:
                continue
            node = nodes[name]
            if (filtered or node.unschedulable or node.blocking_taints) and not admits(shape, node):
                continue
            used = usage.get(name) if usage is not None else None
            fit = fit_count(shape, node, used)
            if fit <= 0:
                continue
            size = fit if fit < need - first else need - first
            offsets = (
                no_offsets if used is None else tuple(used.devices.get(cls, 0) for cls, _ in shape.devices)
            )
            if claims:
                assert view is not None
                found = view.fit(claims, node, overlay, size)
                if not found:
                    continue
                size = len(found)
                takes.append(_new_tuple(Take, (node, batch, first, size, offsets, found)))
            else:
                takes.append(_new_tuple(Take, (node, batch, first, size, offsets, None)))
            if usage is not None:
                _charge(usage, name, shape, size)
            first += size
            if first == need:
                break
        placed += first
    return takes, placed


def _charge(usage: dict[str, NodeUsage], name: str, shape: PodShape, count: int) -> None:
    used = usage.get(name)
    if used is None:
        used = usage[name] = NodeUsage()
    used.cpu += count * shape.cpu_milli
    used.memory += count * shape.memory
    used.pods += count
    for cls, per_pod in shape.devices:
        used.devices[cls] = used.devices.get(cls, 0) + count * per_pod
