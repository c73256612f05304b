"""Capacity bookkeeping: what is free on each node and in each topology domain, and the indexes over them.

Every change of a node's free capacity moves its domains' aggregates and, where an index exists, the node
and the domains between index buckets; these functions do that without looking at any other node.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from .model import CPU_DIMENSION, Node, NodeAssignment, Placement, ResourceTotals, TaintEffect
from .topology import TopologyDomain, TopologyLevel


class NodeState:
    """One node in the snapshot: what is still free on it and the topology domains it belongs to.

    `free_devices` lists the free device names per class in the node's own order, so a placement names
    exact devices (`gpu-0`, `gpu-1`) and released devices go back where they were.
    """

    __slots__ = (
        "blocking_taints",
        "device_rank",
        "domains",
        "free_cpu",
        "free_devices",
        "free_memory",
        "free_pods",
        "labels",
        "name",
        "node",
        "pod_uids",
        "unschedulable",
    )

    def __init__(self, node: Node, ranks: dict[tuple[str, ...], dict[str, int]]) -> None:
        self.node = node
        self.name = node.name
        self.labels = node.labels
        self.blocking_taints = tuple(t for t in node.taints if t.effect != TaintEffect.PREFER_NO_SCHEDULE)
        self.unschedulable = node.unschedulable
        self.free_cpu = node.cpu_milli
        self.free_memory = node.memory
        self.free_pods = node.pods
        self.free_devices = {cls: list(names) for cls, names in node.devices.items()}
        self.device_rank = {cls: _rank(names, ranks) for cls, names in node.devices.items()}
        self.domains: list[TopologyDomain] = []
        self.pod_uids: set[str] = set()

    def count(self, dimension: str) -> int:
        if dimension == CPU_DIMENSION:
            return self.free_cpu // 1000
        free = self.free_devices.get(dimension)
        return 0 if free is None else len(free)

    def free(self) -> ResourceTotals:
        devices = {cls: len(names) for cls, names in self.free_devices.items()}
        return ResourceTotals(self.free_pods, self.free_cpu, self.free_memory, devices)


def _rank(names: tuple[str, ...], ranks: dict[tuple[str, ...], dict[str, int]]) -> dict[str, int]:
    """Position of each device on its node; nodes with identical device lists share one table."""
    rank = ranks.get(names)
    if rank is None:
        rank = ranks[names] = {name: position for position, name in enumerate(names)}
    return rank


def take(states: Sequence[NodeState], assignments: Sequence[NodeAssignment]) -> None:
    """Take checked assignments from their nodes; nodes in a row that share their domains (a gang in one
    rack) update those domains once, together."""
    if len(states) == 1:
        _, count, cpu, memory, devices = assignments[0]
        shift(states[0], cpu, memory, count, _remove_devices(states[0], devices))
        return
    run: list[TopologyDomain] | None = None
    cpu_total = memory_total = pods_total = 0
    taken: dict[str, int] = {}
    for state, (_, count, cpu, memory, devices) in zip(states, assignments, strict=True):
        changes = _remove_devices(state, devices)
        _shift_node(state, cpu, memory, count, changes)
        if state.domains != run:
            if run is not None:
                _shift_domains(run, cpu_total, memory_total, pods_total, taken)
            run, cpu_total, memory_total, pods_total, taken = state.domains, 0, 0, 0, {}
        cpu_total += cpu
        memory_total += memory
        pods_total += count
        for cls, old, new in changes:
            taken[cls] = taken.get(cls, 0) + old - new
    if run is not None:
        _shift_domains(run, cpu_total, memory_total, pods_total, taken)


def give_back(state: NodeState, placement: Placement) -> None:
    """Return a placement's capacity to its node and the node's domains; its devices go back in order."""
    changes: list[tuple[str, int, int]] = []
    for cls, names in placement.devices.items():
        free = state.free_devices.get(cls)
        if free is None or not names:
            continue
        old = len(free)
        rank = state.device_rank[cls]
        free.extend(name for name in names if name in rank)
        free.sort(key=rank.__getitem__)
        changes.append((cls, old, len(free)))
    shift(state, -placement.cpu_milli, -placement.memory, -1, changes)


def _remove_devices(state: NodeState, devices: Mapping[str, Sequence[str]]) -> list[tuple[str, int, int]]:
    """Remove checked device names from the node's free lists: `(class, free before, free after)`."""
    changes: list[tuple[str, int, int]] = []
    for cls, names in devices.items():
        if not names:
            continue
        free = state.free_devices[cls]
        old = len(free)
        if free[: len(names)] == [*names]:
            del free[: len(names)]
        else:
            gone = set(names)
            free[:] = [name for name in free if name not in gone]
        changes.append((cls, old, len(free)))
    return changes


def shift(state: NodeState, cpu: int, memory: int, pods: int, changes: list[tuple[str, int, int]]) -> None:
    """Take (negative: give back) capacity on one node and every domain it is in, moving the node and the
    domains in their indexes (what `_shift_node` and `_shift_domains` do for a run, in one pass)."""
    old_cores = state.free_cpu // 1000
    state.free_cpu -= cpu
    state.free_memory -= memory
    state.free_pods -= pods
    for domain in state.domains:
        indexed = domain.node_index or domain.level.index
        old_domain_cores = domain.free_cpu // 1000 if indexed else 0
        domain.free_cpu -= cpu
        domain.free_memory -= memory
        domain.free_pods -= pods
        free_devices = domain.free_devices
        for cls, old, new in changes:
            free_devices[cls] += new - old
        if indexed:
            _reindex(domain, state, changes, old_cores, old_domain_cores)


def _reindex(
    domain: TopologyDomain,
    state: NodeState,
    changes: list[tuple[str, int, int]],
    old_cores: int,
    old_domain_cores: int,
) -> None:
    """Move a node within its domain's node indexes, and the domain within its level's indexes."""
    node_index = domain.node_index
    level_index = domain.level.index
    for cls, old, new in changes:
        index = node_index.get(cls)
        if index is not None:
            index.move(state.name, old, new)
        index = level_index.get(cls)
        if index is not None:
            domain_new = domain.free_devices[cls]
            index.move(domain.value, domain_new - new + old, domain_new)
    index = node_index.get(CPU_DIMENSION)
    if index is not None:
        index.move(state.name, old_cores, state.free_cpu // 1000)
    index = level_index.get(CPU_DIMENSION)
    if index is not None:
        index.move(domain.value, old_domain_cores, domain.free_cpu // 1000)


def _shift_node(
    state: NodeState, cpu: int, memory: int, pods: int, changes: list[tuple[str, int, int]]
) -> None:
    """Take (negative: give back) capacity on a node, and move it in the node indexes of its domains."""
    old_cores = state.free_cpu // 1000
    state.free_cpu -= cpu
    state.free_memory -= memory
    state.free_pods -= pods
    name = state.name
    for domain in state.domains:
        node_index = domain.node_index
        if node_index:
            for cls, old, new in changes:
                index = node_index.get(cls)
                if index is not None:
                    index.move(name, old, new)
            index = node_index.get(CPU_DIMENSION)
            if index is not None:
                index.move(name, old_cores, state.free_cpu // 1000)


def _shift_domains(
    domains: Sequence[TopologyDomain], cpu: int, memory: int, pods: int, devices: Mapping[str, int]
) -> None:
    """Take (negative: give back) capacity from domains' aggregates, and move them in their level index."""
    for domain in domains:
        old_cores = domain.free_cpu // 1000
        domain.free_cpu -= cpu
        domain.free_memory -= memory
        domain.free_pods -= pods
        free_devices = domain.free_devices
        level_index = domain.level.index
        for cls, count in devices.items():
            old = free_devices[cls]
            free_devices[cls] = old - count
            if level_index:
                index = level_index.get(cls)
                if index is not None:
                    index.move(domain.value, old, old - count)
        if level_index:
            index = level_index.get(CPU_DIMENSION)
            if index is not None:
                index.move(domain.value, old_cores, domain.free_cpu // 1000)


def build_level(key: str, states: Iterable[NodeState]) -> TopologyLevel:
    level = TopologyLevel(key)
    members: dict[str, list[NodeState]] = {}
    for state in states:
        value = state.labels.get(key)
        if value is not None:
            group = members.get(value)
            if group is None:
                members[value] = [state]
            else:
                group.append(state)
    domains = level.domains
    for value, group in members.items():
        fill_domain(domains.setdefault(value, TopologyDomain(key, value, level)), group)
    return level


def fill_domain(domain: TopologyDomain, states: list[NodeState]) -> None:
    domain.node_count = len(states)
    free_devices = domain.free_devices
    for state in states:
        domain.free_cpu += state.free_cpu
        domain.free_memory += state.free_memory
        domain.free_pods += state.free_pods
        state.domains.append(domain)
        for cls, names in state.free_devices.items():
            free_devices[cls] = free_devices.get(cls, 0) + len(names)


def move_domain(domain: TopologyDomain, state: NodeState, sign: int) -> None:
    """Add (sign +1) or take away (-1) a node's free capacity from a domain's aggregates and level index."""
    level_index = domain.level.index
    old_counts = {dimension: domain.count(dimension) for dimension in level_index}
    domain.node_count += sign
    domain.free_cpu += sign * state.free_cpu
    domain.free_memory += sign * state.free_memory
    domain.free_pods += sign * state.free_pods
    for cls, names in state.free_devices.items():
        domain.free_devices[cls] = domain.free_devices.get(cls, 0) + sign * len(names)
    for dimension, old in old_counts.items():
        level_index[dimension].move(domain.value, old, domain.count(dimension))


def charge_existing(state: NodeState, placement: Placement) -> None:
    """Count a pod already on a node against the node's new free capacity (after `update_node`)."""
    state.free_cpu -= placement.cpu_milli
    state.free_memory -= placement.memory
    state.free_pods -= 1
    state.pod_uids.add(placement.pod_uid)
    for cls, names in placement.devices.items():
        free = state.free_devices.get(cls)
        if free is not None:
            taken = set(names)
            free[:] = [name for name in free if name not in taken]


def node_counts(states: Iterable[NodeState], dimension: str) -> Iterator[tuple[str, int]]:
    for state in states:
        if dimension == CPU_DIMENSION or dimension in state.free_devices:
            yield state.name, state.count(dimension)
