"""The PodGroup scheduling cycle: place a group's pods on one snapshot, all or nothing, topology-aware."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

from .diagnosis import node_reason_counts, unschedulable_message
from .filters import NodeUsage, admits, fit_count
from .model import (
    CPU_DIMENSION,
    DEFAULT_SCHEDULER_NAME,
    CycleDecision,
    CycleResult,
    GangReason,
    Placement,
    PodGroup,
    PodRequest,
    PodShape,
    ResourceTotals,
    TopologyDomainRef,
)
from .snapshot import ClusterSnapshot, NodeState
from .topology import TopologyDomain

_pod_order = attrgetter("name")
_new_tuple = tuple.__new__


@dataclass(slots=True)
class _Batch:
    """Pods of one shape, in the cycle's fixed order; they are placed in bulk, as many per node as fit."""

    shape: PodShape
    pods: list[PodRequest] = field(default_factory=list)
    placed: int = 0


class _Take(NamedTuple):
    """`size` pods of a batch, from position `first` on, placed on one node.

    `offsets[i]` is where the devices of the shape's i-th device class start in the node's free list.
    """

    node: NodeState
    batch: _Batch
    first: int
    size: int
    offsets: tuple[int, ...]


class _Scope(NamedTuple):
    """Where a cycle looks: domains of `key` (None: the whole cluster), optionally only some `values`.

    With `within_key`, every chosen node must also share one value of that (hard) key: a preferred level
    tried inside the hard one.
    """

    key: str | None
    values: tuple[str, ...] | None
    within_key: str | None


@dataclass(slots=True)
class _Demand:
    """What a number of the group's pods ask for in total, and the dimension domains are packed by.

    `primary` is the device class asked for most (ties by name), else CPU cores; `primary_count` the
    amount of it.
    """

    pods: int = 0
    cpu: int = 0
    memory: int = 0
    devices: dict[str, int] = field(default_factory=dict)
    primary: str = CPU_DIMENSION
    primary_count: int = 0

    def settle(self) -> _Demand:
        devices = self.devices
        if len(devices) == 1:
            ((self.primary, self.primary_count),) = devices.items()
        elif devices:
            self.primary, self.primary_count = min(devices.items(), key=lambda item: (-item[1], item[0]))
        else:
            self.primary_count = self.cpu // 1000
        return self

    def totals(self) -> ResourceTotals:
        return ResourceTotals(self.pods, self.cpu, self.memory, self.devices)


class _Found(NamedTuple):
    domain: TopologyDomain
    takes: list[_Take]
    placed: int


def schedule_podgroup(
    snapshot: ClusterSnapshot,
    group: PodGroup,
    pods: Sequence[PodRequest],
    *,
    now: float,
    bound_pods: int = 0,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
) -> CycleDecision:
    """One scheduling cycle for a PodGroup on one snapshot; the snapshot is left unchanged.

    Pods are taken in a fixed order (name, uid); those naming another scheduler are left out. A gang needs
    `gang_min_count - bound_pods` of them placed (at least one), a basic group one; otherwise nothing is
    placed and the decision says why, with per-node reason counts. Assumptions are cycle-local, so a failed
    cycle has nothing to roll back; apply a placed decision with `snapshot.apply(decision)`.

    Scopes are tried in order: preferred levels (`podway.io/topology-preferred`, tightest first, only those
    narrower than the hard key, each tried inside one hard domain), then the hard key, else the whole
    cluster; a group with an `assigned_domain` (pods joining a scheduled gang) tries that domain first.
    Within a scope the score is the least leftover capacity: domains of the key are walked by ascending free
    count of the gang's primary dimension (the device class it asks most of, else CPU cores), ties by domain
    name, so the tightest domain that holds the gang wins and big domains stay whole. A domain is pruned on
    its aggregates before its nodes are looked at; the first domain whose nodes fit every pod wins, else the
    one fitting the most pods above the required count. Inside a domain, nodes are filled tightest first
    (same order, ties by node name), each node taking as many pods of a shape as fit.
    """
    # 1. Fixed order, grouped by shape; pods of other schedulers are not ours.
    batches, foreign = _batches(sorted(pods, key=_pod_order), scheduler_name)
    required = max(1, group.gang_min_count - bound_pods) if group.gang_min_count is not None else 1
    demand = _demand(batches, len(pods) - foreign)
    if demand.pods < required:
        return _too_few_pods(group, batches, demand, required, foreign, scheduler_name, now)
    # 2. Try each scope, tightest first; the first that holds the required pods wins.
    scopes = _scopes(snapshot, group)
    floor = demand if required == demand.pods else _demand(batches, required)
    most = 0
    for scope in scopes:
        found = _search(snapshot, scope, batches, demand, floor, required)
        if found is not None and found.placed >= required:
            return _placed(group, found, batches, demand, required, now)
        if found is not None:
            most = max(most, found.placed)
    # 3. Nothing holds enough: explain it the way kube-scheduler does.
    return _unschedulable(snapshot, group, batches, demand, required, scopes, most, now)


def _batches(pods: Iterable[PodRequest], scheduler_name: str) -> tuple[list[_Batch], int]:
    """Pods grouped by shape in order of first appearance, and how many name another scheduler."""
    batches: list[_Batch] = []
    last: _Batch | None = None
    foreign = 0
    for pod in pods:
        if pod.scheduler_name != scheduler_name:
            foreign += 1
            continue
        shape = pod.shape
        if last is None or not (shape is last.shape or shape == last.shape):
            last = next((batch for batch in batches if batch.shape == shape), None)
            if last is None:
                last = _Batch(shape)
                batches.append(last)
        last.pods.append(pod)
    return batches, foreign


def _demand(batches: Sequence[_Batch], count: int) -> _Demand:
    """What `count` pods need at least: exact for all pods, per-dimension cheapest pods for fewer."""
    if len(batches) == 1 or count >= sum(len(batch.pods) for batch in batches):
        demand = _Demand(pods=count)
        for batch in batches:
            taken = min(count, len(batch.pods))
            shape = batch.shape
            demand.cpu += taken * shape.cpu_milli
            demand.memory += taken * shape.memory
            for cls, per_pod in shape.devices:
                demand.devices[cls] = demand.devices.get(cls, 0) + taken * per_pod
        return demand.settle()
    classes = sorted({cls for batch in batches for cls, _ in batch.shape.devices})
    return _Demand(
        pods=count,
        cpu=_cheapest(batches, count, [batch.shape.cpu_milli for batch in batches]),
        memory=_cheapest(batches, count, [batch.shape.memory for batch in batches]),
        devices={
            cls: _cheapest(batches, count, [dict(batch.shape.devices).get(cls, 0) for batch in batches])
            for cls in classes
        },
    ).settle()


def _cheapest(batches: Sequence[_Batch], count: int, per_pod: Sequence[int]) -> int:
    """The least `count` pods can ask in one dimension, given each batch's per-pod amount."""
    total = 0
    for value, size in sorted(zip(per_pod, (len(batch.pods) for batch in batches), strict=True)):
        taken = min(size, count)
        total += taken * value
        count -= taken
        if count == 0:
            break
    return total


def _scopes(snapshot: ClusterSnapshot, group: PodGroup) -> list[_Scope]:
    hard = group.topology_key
    if group.assigned_domain is not None:
        return _joining_scopes(snapshot, group.assigned_domain, hard)
    scopes: list[_Scope] = []
    for key in group.preferred_topology:
        if hard is None or (key != hard and snapshot.rank(key) > snapshot.rank(hard)):
            scopes.append(_Scope(key, None, hard))
    scopes.append(_Scope(hard, None, None))
    return scopes


def _joining_scopes(snapshot: ClusterSnapshot, assigned: TopologyDomainRef, hard: str | None) -> list[_Scope]:
    """Pods joining a scheduled gang: its domain first; if that was a preferred level, its hard domain."""
    scopes = [_Scope(assigned.key, (assigned.value,), None)]
    if assigned.key == hard:
        return scopes
    if hard is None:
        scopes.append(_Scope(None, None, None))
        return scopes
    for node in snapshot.node_states():
        if node.labels.get(assigned.key) == assigned.value and hard in node.labels:
            scopes.append(_Scope(hard, (node.labels[hard],), None))
            break
    return scopes


def _search(
    snapshot: ClusterSnapshot,
    scope: _Scope,
    batches: Sequence[_Batch],
    demand: _Demand,
    floor: _Demand,
    required: int,
) -> _Found | None:
    """The tightest domain of the scope whose nodes fit every pod, else the one fitting the most.

    The answer may fit fewer than `required` pods (the caller then knows how close it came); None when no
    domain passed the aggregate check.
    """
    total = demand.pods
    best: _Found | None = None
    # 1. Domains that could hold every pod, tightest first.
    for domain in _candidates(snapshot, scope, batches, demand):
        if _holds(domain, demand):
            takes, placed = _plan(snapshot, domain, batches)
            if not _within(scope, takes):
                continue
            if placed == total:
                return _Found(domain, takes, placed)
            if best is None or placed > best.placed:
                best = _Found(domain, takes, placed)
    if required == total:
        return best
    # 2. Otherwise the domain fitting the most pods, tightest first among equals.
    for domain in _candidates(snapshot, scope, batches, floor):
        if _holds(domain, floor):
            takes, placed = _plan(snapshot, domain, batches)
            if _within(scope, takes) and (best is None or placed > best.placed):
                best = _Found(domain, takes, placed)
    return best


def _candidates(
    snapshot: ClusterSnapshot, scope: _Scope, batches: Sequence[_Batch], demand: _Demand
) -> Iterator[TopologyDomain]:
    """Domains of the scope that may hold the demand, least free of its primary dimension first."""
    if scope.key is None:
        yield snapshot.cluster
        return
    level = snapshot.level(scope.key)
    dimension, minimum = demand.primary, demand.primary_count
    values = scope.values
    if values is None and any(batch.shape.node_selector for batch in batches):
        values = _selected_values(scope.key, batches)
    if values is not None:
        chosen = [level.domains[value] for value in values if value in level.domains]
        chosen.sort(key=lambda domain: (domain.count(dimension), domain.value))
        yield from (domain for domain in chosen if domain.count(dimension) >= minimum)
        return
    domains = level.domains
    for value in snapshot.domain_index(level, dimension).at_least(minimum):
        yield domains[value]


def _selected_values(key: str, batches: Sequence[_Batch]) -> tuple[str, ...] | None:
    """The one domain every pod's node selector names for the key, if they all name the same."""
    values = {dict(batch.shape.node_selector).get(key) for batch in batches}
    value = values.pop() if len(values) == 1 else None
    return None if value is None else (value,)


def _holds(domain: TopologyDomain, demand: _Demand) -> bool:
    if domain.free_pods < demand.pods or domain.free_cpu < demand.cpu or domain.free_memory < demand.memory:
        return False
    free_devices = domain.free_devices
    for cls, count in demand.devices.items():  # noqa: SIM110 - a loop is faster than all() on one class
        if free_devices.get(cls, 0) < count:
            return False
    return True


def _within(scope: _Scope, takes: Sequence[_Take]) -> bool:
    if scope.within_key is None:
        return True
    values = {take.node.labels.get(scope.within_key) for take in takes}
    return len(values) == 1 and None not in values


def _plan(
    snapshot: ClusterSnapshot, domain: TopologyDomain, batches: Sequence[_Batch]
) -> tuple[list[_Take], int]:
    """Exact per-node fit inside a domain: each batch fills nodes tightest first, in bulk per node.

    Capacity taken by earlier batches is tracked in a cycle-local usage table; with a single batch each
    node is visited once and no table is needed.
    """
    nodes = snapshot.nodes_by_name
    usage: dict[str, NodeUsage] | None = {} if len(batches) > 1 else None
    takes: list[_Take] = []
    placed = 0
    for batch in batches:
        shape = batch.shape
        need = len(batch.pods)
        index = snapshot.node_index(domain, shape.primary)
        first = 0
        if index is not None:
            filtered = bool(shape.node_selector)
            for name in index.at_least(shape.primary_request):
                node = nodes[name]
                if (filtered or node.unschedulable or node.blocking_taints) and not admits(shape, node):
                    continue
                used = usage.get(name) if usage is not None else None
                fit = fit_count(shape, node, used)
                if fit <= 0:
                    continue
                count = fit if fit < need - first else need - first
                takes.append(_Take(node, batch, first, count, _offsets(shape, used)))
                if usage is not None:
                    _charge(usage, name, shape, count)
                first += count
                if first == need:
                    break
        placed += first
    return takes, placed


def _offsets(shape: PodShape, used: NodeUsage | None) -> tuple[int, ...]:
    if used is None:
        return (0,) * len(shape.devices)
    return tuple(used.devices.get(cls, 0) for cls, _ in shape.devices)


def _charge(usage: dict[str, NodeUsage], name: str, shape: PodShape, count: int) -> None:
    used = usage.get(name)
    if used is None:
        used = usage[name] = NodeUsage()
    used.cpu += count * shape.cpu_milli
    used.memory += count * shape.memory
    used.pods += count
    for cls, per_pod in shape.devices:
        used.devices[cls] = used.devices.get(cls, 0) + count * per_pod


def _placements(takes: Sequence[_Take]) -> list[Placement]:
    """One placement per pod, naming its devices; built with `tuple.__new__`, which skips the named
    tuple's Python-level constructor (this runs once per placed pod)."""
    placements: list[Placement] = []
    append = placements.append
    for node, batch, first, count, offsets in takes:
        shape = batch.shape
        pods = batch.pods
        node_name = node.name
        cpu, memory = shape.cpu_milli, shape.memory
        batch.placed += count
        if not shape.devices:
            for pod in pods[first : first + count]:
                append(_new_tuple(Placement, (pod.uid, pod.name, node_name, cpu, memory, {})))
            continue
        free = node.free_devices
        if len(shape.devices) == 1:
            ((cls, per_pod),) = shape.devices
            names = free[cls]
            start = offsets[0]
            for pod in pods[first : first + count]:
                end = start + per_pod
                devices = {cls: tuple(names[start:end])}
                append(_new_tuple(Placement, (pod.uid, pod.name, node_name, cpu, memory, devices)))
                start = end
            continue
        for position, pod in enumerate(pods[first : first + count]):
            devices = {
                cls: tuple(free[cls][offset + position * per_pod : offset + (position + 1) * per_pod])
                for (cls, per_pod), offset in zip(shape.devices, offsets, strict=True)
            }
            append(_new_tuple(Placement, (pod.uid, pod.name, node_name, cpu, memory, devices)))
    return placements


def _placed(
    group: PodGroup, found: _Found, batches: Sequence[_Batch], demand: _Demand, required: int, now: float
) -> CycleDecision:
    domain = found.domain
    placements = _placements(found.takes)
    unplaced = tuple(pod.uid for batch in batches for pod in batch.pods[batch.placed :])
    where = f" in {domain.key}={domain.value}" if domain.key else ""
    return CycleDecision(
        podgroup=group.key,
        podgroup_uid=group.uid,
        result=CycleResult.PLACED,
        placements=tuple(placements),
        domain=domain.ref,
        message=f"placed {len(placements)} of {demand.pods} pod(s){where}",
        reason_counts={},
        requested=demand.totals(),
        required_count=required,
        topology_key=group.topology_key,
        unplaced=unplaced,
        decided_at=now,
    )


def _unschedulable(
    snapshot: ClusterSnapshot,
    group: PodGroup,
    batches: Sequence[_Batch],
    demand: _Demand,
    required: int,
    scopes: Sequence[_Scope],
    most: int,
    now: float,
) -> CycleDecision:
    counts = node_reason_counts(snapshot, batches[0].shape) if batches else {}
    if most == 0 and group.is_gang and scopes[-1].key is None:
        most = _plan(snapshot, snapshot.cluster, batches)[1]
    reason = _group_reason(group, scopes[-1], required, most)
    message = unschedulable_message(len(snapshot), counts, reason)
    return _failed(group, batches, demand, required, message, counts, now)


def _group_reason(group: PodGroup, widest: _Scope, required: int, most: int) -> str | None:
    assigned = group.assigned_domain
    if assigned is not None and widest.key == assigned.key:
        return GangReason.DOMAIN_FULL.format(key=assigned.key, value=assigned.value, count=required)
    if widest.key is not None:
        if not group.is_gang:
            return GangReason.NO_TOPOLOGY_DOMAIN_FOR_ANY.format(key=widest.key)
        return GangReason.NO_TOPOLOGY_DOMAIN.format(key=widest.key, count=required)
    if group.is_gang and most > 0:
        return GangReason.BELOW_MIN_COUNT.format(placed=most, count=required)
    return None


def _too_few_pods(
    group: PodGroup,
    batches: Sequence[_Batch],
    demand: _Demand,
    required: int,
    foreign: int,
    scheduler_name: str,
    now: float,
) -> CycleDecision:
    message = GangReason.TOO_FEW_PODS.format(count=required, present=demand.pods) + "."
    if foreign:
        message += " " + GangReason.OTHER_SCHEDULER.format(count=foreign, scheduler=scheduler_name) + "."
    return _failed(group, batches, demand, required, message, {}, now)


def _failed(
    group: PodGroup,
    batches: Sequence[_Batch],
    demand: _Demand,
    required: int,
    message: str,
    counts: dict[str, int],
    now: float,
) -> CycleDecision:
    return CycleDecision(
        podgroup=group.key,
        podgroup_uid=group.uid,
        result=CycleResult.UNSCHEDULABLE,
        placements=(),
        domain=None,
        message=message,
        reason_counts=counts,
        requested=demand.totals(),
        required_count=required,
        topology_key=group.topology_key,
        unplaced=tuple(pod.uid for batch in batches for pod in batch.pods),
        decided_at=now,
    )
