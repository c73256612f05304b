"""The PodGroup scheduling cycle: place a group's pods on one snapshot, all or nothing, topology-aware."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from types import MappingProxyType

from libs.core.dra.allocator import ClaimAllocation

from .claims import exclusive_devices
from .diagnosis import node_reason_counts, unschedulable_message
from .model import (
    DEFAULT_SCHEDULER_NAME,
    CycleDecision,
    GangReason,
    NodeAssignment,
    NodeFilterReason,
    Placement,
    PodGroup,
    PodRequest,
    ResourceTotals,
    TopologyDomainRef,
    Unschedulable,
)
from .packing import Batch, Demand, Found, Reach, Scope, Take, plan, search
from .snapshot import ClusterSnapshot

_name_of = attrgetter("name")
_new_tuple = tuple.__new__
_ANYWHERE: tuple[Reach | None] = (None,)
"""The one reach of a PodGroup without claims of its own (a tuple: no generator to start and drop)."""


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

    Pods are taken in a fixed order (by name); those naming another scheduler are left out. A gang needs
    `gang_min_count - bound_pods` of them placed together (at least one), a basic group one; with fewer,
    nothing is placed and the decision says why, with per-node reason counts. The cycle's assumptions live
    in a cycle-local table, so a failed cycle has nothing to roll back; apply a placed decision with
    `snapshot.apply(decision)` (the snapshot notes the decision, so that applying it before anything else
    changes does not check its nodes again).

    Scopes are tried in order: the preferred levels (`podway.io/topology-preferred`, tightest first; only
    those narrower than the hard key, each tried inside one hard domain), then the hard key, else the
    whole cluster. A group with an `assigned_domain` (pods joining a scheduled gang) tries that domain,
    then the hard domain around it.

    Score, within a scope: least leftover capacity first. Domains of the key are walked by ascending free
    count of the group's primary dimension (the device class it asks most of, else whole CPU cores), ties
    broken by domain name, so the tightest domain that holds the group wins and big domains stay whole.
    A domain is pruned on its aggregates before its nodes are planned; the first domain whose nodes fit
    every pod wins, else the one fitting the most pods (at least the required count). Inside the domain,
    nodes are filled in the same order (ascending free count, then node name), each taking as many pods
    of a shape as fit.
    """
    # 1. Fixed order, grouped by shape; pods of other schedulers are not ours.
    batches, foreign = _batches(sorted(pods, key=_name_of), scheduler_name)
    required = max(1, group.gang_min_count - bound_pods) if group.gang_min_count is not None else 1
    demand = _demand(batches, len(pods) - foreign)
    if demand.pods < required:
        return _too_few_pods(group, batches, demand, required, foreign, scheduler_name, now)
    # 2. Try each scope, tightest first; the first that holds the required pods wins.
    scopes = _scopes(snapshot, group)
    floor = demand if required == demand.pods else _demand(batches, required)
    # How close a failed gang came is only told when it had no topology constraint.
    all_or_none = scopes[-1].key is not None
    most = 0
    if snapshot.claims is not None:
        snapshot.claims.refused.clear()
        snapshot.claims.group_refused = False
    for reach in _reaches(snapshot, group) if group.claims else _ANYWHERE:
        for scope in scopes:
            found = search(
                snapshot, scope, batches, demand, floor, required, all_or_none=all_or_none, reach=reach
            )
            if found is not None:
                if found.placed >= required:
                    decision = _placed(group, found, batches, demand.pods, now, reach)
                    snapshot.decided(decision)
                    return decision
                most = max(most, found.placed)
    # 3. Nothing holds enough: explain it the way kube-scheduler does.
    return _unschedulable(snapshot, group, batches, demand, required, scopes, most, now)


def _reaches(snapshot: ClusterSnapshot, group: PodGroup) -> Iterator[Reach | None]:
    """Where the gang may go for its PodGroup claims: one option per allocation of them (nothing when they
    cannot be allocated), or anywhere (None) when it has none."""
    view = snapshot.claims
    if not group.claims or view is None:
        yield None
        return
    offered = False
    for allocations in view.group_options(group.claims, snapshot.node_states()):
        offered = True
        nodes: frozenset[str] | None = None
        for allocation in allocations:
            if allocation.nodes is not None:
                nodes = allocation.nodes if nodes is None else nodes & allocation.nodes
        yield Reach(allocations, nodes)
    if not offered:
        view.group_refused = True


def _batches(pods: list[PodRequest], scheduler_name: str) -> tuple[list[Batch], int]:
    """Pods grouped by shape in order of first appearance, and how many name another scheduler."""
    shapes = [pod.shape for pod in pods]
    if shapes and shapes.count(shapes[0]) == len(shapes) and shapes[0].scheduler_name == scheduler_name:
        return [Batch(shapes[0], pods)], 0
    batches: list[Batch] = []
    foreign = 0
    for pod, shape in zip(pods, shapes, strict=True):
        if shape.scheduler_name != scheduler_name:
            foreign += 1
            continue
        batch = next((batch for batch in batches if batch.shape == shape), None)
        if batch is None:
            batches.append(Batch(shape, [pod]))
        else:
            batch.pods.append(pod)
    return batches, foreign


def _demand(batches: Sequence[Batch], count: int) -> Demand:
    """What `count` pods need at least: exact for all pods, per-dimension cheapest pods for fewer."""
    if len(batches) == 1:
        shape = batches[0].shape
        if len(shape.devices) == 1:
            ((cls, per_pod),) = shape.devices
            return Demand(
                count,
                count * shape.cpu_milli,
                count * shape.memory,
                {cls: count * per_pod},
                cls,
                count * per_pod,
            )
        devices = {cls: count * per_pod for cls, per_pod in shape.devices}
        return Demand(count, count * shape.cpu_milli, count * shape.memory, devices).settle()
    if count >= sum(len(batch.pods) for batch in batches):
        demand = Demand(count, 0, 0)
        for batch in batches:
            size = len(batch.pods)
            demand.cpu += size * batch.shape.cpu_milli
            demand.memory += size * batch.shape.memory
            for cls, per_pod in batch.shape.devices:
                demand.devices[cls] = demand.devices.get(cls, 0) + size * per_pod
        return demand.settle()
    classes = sorted({cls for batch in batches for cls, _ in batch.shape.devices})
    return Demand(
        count,
        _cheapest(batches, count, [batch.shape.cpu_milli for batch in batches]),
        _cheapest(batches, count, [batch.shape.memory for batch in batches]),
        {
            cls: _cheapest(batches, count, [dict(batch.shape.devices).get(cls, 0) for batch in batches])
            for cls in classes
        },
    ).settle()


def _cheapest(batches: Sequence[Batch], count: int, per_pod: Sequence[int]) -> int:
    """The least `count` pods can ask in one dimension, given each batch's per-pod amount."""
    total = 0
    for value, size in sorted(zip(per_pod, (len(batch.pods) for batch in batches), strict=True)):
        taken = min(size, count)
        total += taken * value
        count -= taken
        if count == 0:
            break
    return total


def _scopes(snapshot: ClusterSnapshot, group: PodGroup) -> list[Scope]:
    scopes = _own_scopes(snapshot, group)
    if group.within is None:
        return scopes
    return [_inside(snapshot, scope, group.within) for scope in scopes]


def _inside(snapshot: ClusterSnapshot, scope: Scope, within: TopologyDomainRef) -> Scope:
    """A scope taken inside a composite's domain: its own level's domains in that one, or that one itself
    when its level is not narrower."""
    key = scope.key
    if key is None or key == within.key or snapshot.rank(key) <= snapshot.rank(within.key):
        return Scope(within.key, (within.value,), None)
    values = snapshot.values_inside(within.key, within.value, key)
    chosen = values if scope.values is None else tuple(v for v in values if v in scope.values)
    return Scope(key, chosen, scope.within_key)


def _own_scopes(snapshot: ClusterSnapshot, group: PodGroup) -> list[Scope]:
    hard = group.topology_key
    if group.assigned_domain is not None:
        return _joining_scopes(snapshot, group.assigned_domain, hard)
    scopes = (
        [
            Scope(key, None, hard)
            for key in group.preferred_topology
            if hard is None or (key != hard and snapshot.rank(key) > snapshot.rank(hard))
        ]
        if group.preferred_topology
        else []
    )
    scopes.append(_new_tuple(Scope, (hard, None, None)))
    return scopes


def _joining_scopes(snapshot: ClusterSnapshot, assigned: TopologyDomainRef, hard: str | None) -> list[Scope]:
    """Pods joining a scheduled gang: its domain first; if that was a preferred level, its hard domain."""
    scopes = [Scope(assigned.key, (assigned.value,), None)]
    if assigned.key == hard:
        return scopes
    if hard is None:
        scopes.append(Scope(None, None, None))
        return scopes
    for node in snapshot.node_states():
        if node.labels.get(assigned.key) == assigned.value and hard in node.labels:
            scopes.append(Scope(hard, (node.labels[hard],), None))
            break
    return scopes


def _placed(
    group: PodGroup, found: Found, batches: Sequence[Batch], total: int, now: float, reach: Reach | None
) -> CycleDecision:
    placements: list[Placement] = []
    claims: dict[str, tuple[ClaimAllocation, ...]] | None = None
    if reach is not None or any(take.claims is not None for take in found.takes):
        claims = {"": reach.allocations} if reach is not None else {}
    assignments = [
        _assign(take, placements) if take.claims is None else _assign_claims(take, placements, claims)
        for take in found.takes
    ]
    return CycleDecision(
        group.key,
        tuple(placements),
        tuple(assignments),
        found.domain.ref,
        () if found.placed == total else _unplaced(batches),
        None,
        now,
        claims,
    )


def _assign_claims(
    take: Take, placements: list[Placement], claims: dict[str, tuple[ClaimAllocation, ...]] | None
) -> NodeAssignment:
    """The take's pods with claims as placements, each naming the exact devices its allocations hold."""
    node, batch, first, size, _, allocations = take
    assert allocations is not None
    assert claims is not None
    batch.placed += size
    shape = batch.shape
    added: list[Placement] = []
    for pod, allocated in zip(batch.pods[first : first + size], allocations, strict=True):
        devices = exclusive_devices(allocated, node)
        added.append(Placement(pod.uid, pod.name, node.name, shape.cpu_milli, shape.memory, devices))
        claims[pod.uid] = allocated
    placements += added
    return NodeAssignment.of(added)


def _assign(take: Take, placements: list[Placement]) -> NodeAssignment:
    """The take's pods as placements (appended), each naming its own devices, and the node's total.

    This runs for every placed pod: placements are built with `tuple.__new__`, which skips the named
    tuple's Python-level constructor, and the common one-device-class shape has its own comprehension.
    """
    node, batch, first, size, offsets, _ = take
    shape = batch.shape
    batch.placed += size
    name, cpu, memory = node.name, shape.cpu_milli, shape.memory
    free = node.free_devices
    if len(shape.devices) == 1:
        ((cls, per_pod),) = shape.devices
        start = offsets[0]
        names = tuple(free[cls][start : start + size * per_pod])
        if size == 1:  # one pod on the node (most pods of several devices): it and the node share a table
            pod = batch.pods[first]
            taken = {cls: names}
            placements.append(_new_tuple(Placement, (pod.uid, pod.name, name, cpu, memory, taken)))
            return _new_tuple(NodeAssignment, (name, 1, cpu, memory, taken))
        pods = batch.pods[first : first + size]
        if per_pod == 1:
            placements += [
                _new_tuple(Placement, (pod.uid, pod.name, name, cpu, memory, {cls: (device,)}))
                for pod, device in zip(pods, names, strict=True)
            ]
        else:
            # Consecutive runs of `per_pod` names, grouped in C by zipping one iterator with itself.
            runs = zip(*[iter(names)] * per_pod, strict=True)
            placements += [
                _new_tuple(Placement, (pod.uid, pod.name, name, cpu, memory, {cls: devices}))
                for pod, devices in zip(pods, runs, strict=True)
            ]
        return _new_tuple(NodeAssignment, (name, size, size * cpu, size * memory, {cls: names}))
    if not shape.devices:
        placements += [
            _new_tuple(Placement, (pod.uid, pod.name, name, cpu, memory, {}))
            for pod in batch.pods[first : first + size]
        ]
        return _new_tuple(NodeAssignment, (name, size, size * cpu, size * memory, {}))
    taken = {
        cls: tuple(free[cls][offset : offset + size * per_pod])
        for (cls, per_pod), offset in zip(shape.devices, offsets, strict=True)
    }
    for position, pod in enumerate(batch.pods[first : first + size]):
        devices = {cls: taken[cls][position * count : (position + 1) * count] for cls, count in shape.devices}
        placements.append(_new_tuple(Placement, (pod.uid, pod.name, name, cpu, memory, devices)))
    return _new_tuple(NodeAssignment, (name, size, size * cpu, size * memory, taken))


def _unplaced(batches: Sequence[Batch]) -> tuple[str, ...]:
    return tuple(pod.uid for batch in batches for pod in batch.pods[batch.placed :])


def _unschedulable(
    snapshot: ClusterSnapshot,
    group: PodGroup,
    batches: Sequence[Batch],
    demand: Demand,
    required: int,
    scopes: Sequence[Scope],
    most: int,
    now: float,
) -> CycleDecision:
    shape = batches[0].shape if batches else None
    counts = (
        snapshot.memoized(shape, lambda: node_reason_counts(snapshot, shape)) if shape is not None else {}
    )
    if most == 0 and group.is_gang and scopes[-1].key is None and not group.claims:
        most = plan(snapshot, snapshot.cluster, batches)[1]
    view = snapshot.claims
    if view is not None and (view.group_refused or view.refused):
        counts = _with_claims_reason(len(snapshot), counts, None if view.group_refused else len(view.refused))
    reason = _group_reason(group, scopes[-1], required, most)
    message = unschedulable_message(len(snapshot), counts, reason)
    return _failed(group, batches, demand, required, message, counts, now)


def _with_claims_reason(total: int, counts: Mapping[str, int], refused: int | None) -> dict[str, int]:
    """The nodes the allocation search turned away (`refused`; all the nodes no resource filter turned away
    when the PodGroup's own claims found no devices) counted as `cannot allocate all claims`."""
    counted = dict(counts)
    if refused is None:
        refused = total - sum(counts.values())
    if refused > 0:
        counted[NodeFilterReason.CLAIMS] = refused
    return counted


def _group_reason(group: PodGroup, widest: Scope, required: int, most: int) -> str | None:
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
    batches: Sequence[Batch],
    demand: Demand,
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
    batches: Sequence[Batch],
    demand: Demand,
    required: int,
    message: str,
    counts: Mapping[str, int],
    now: float,
) -> CycleDecision:
    requested = ResourceTotals(demand.pods, demand.cpu, demand.memory, demand.devices)
    floor = demand if required >= demand.pods else _demand(batches, required)
    why = Unschedulable(
        message,
        MappingProxyType(dict(counts)),
        requested,
        required,
        group.topology_key,
        required_totals=ResourceTotals(floor.pods, floor.cpu, floor.memory, floor.devices),
        shapes=tuple(batch.shape for batch in batches),
    )
    return CycleDecision(group.key, (), (), None, _unplaced(batches), why, now)
