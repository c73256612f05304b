"""Capacity bookkeeping: what is free on each node and in each topology domain, and the indexes over them.

Every change of a node's free capacity moves its domains' aggregates at once and notes the node (and its
domains) for the indexes, which are settled when next read; these functions do that without looking at
any other node. `NodeTally` counts nodes by free amount for the diagnosis of failed cycles.
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
        "stale",
        "tallied",
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
        self.stale: list[set[NodeState]] = []
        """The stale sets of every node index of the node's domains (see `note_stale`)."""
        self.tallied: list[int] | None = None
        """What the node contributes to the snapshot's `NodeTally`: free pods, cpu, memory, then devices
        per class in the node's order; None when the node is not counted there."""

    def note_stale(self) -> None:
        """Gather the stale sets of the node indexes of the node's domains, into which every change of
        its capacity puts it; called when its domains or their indexes change."""
        self.stale = [stale for domain in self.domains for stale in domain.stale]

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
    rack) update those domains' aggregates once, together."""
    taken: dict[str, int] = {}
    if len(states) == 1:
        _, count, cpu, memory, devices = assignments[0]
        _remove_devices(states[0], devices, taken)
        shift(states[0], cpu, memory, count, list(taken.items()))
        return
    run: list[TopologyDomain] | None = None
    cpu_total = memory_total = pods_total = 0
    for state, (_, count, cpu, memory, devices) in zip(states, assignments, strict=True):
        domains = state.domains
        if domains != run:
            if run is not None:
                _shift_domains(run, cpu_total, memory_total, pods_total, taken)
            run, cpu_total, memory_total, pods_total, taken = domains, 0, 0, 0, {}
        _remove_devices(state, devices, taken)
        state.free_cpu -= cpu
        state.free_memory -= memory
        state.free_pods -= count
        for stale in state.stale:
            stale.add(state)
        cpu_total += cpu
        memory_total += memory
        pods_total += count
    if run is not None:
        _shift_domains(run, cpu_total, memory_total, pods_total, taken)


def give_back(state: NodeState, placement: Placement) -> None:
    """Return a placement's capacity to its node and the node's domains; its devices go back in order."""
    changes: list[tuple[str, int]] = []
    for cls, names in placement.devices.items():
        free = state.free_devices.get(cls)
        if free is None or not names:
            continue
        old = len(free)
        rank = state.device_rank[cls]
        free.extend(name for name in names if name in rank)
        free.sort(key=rank.__getitem__)
        changes.append((cls, old - len(free)))
    shift(state, -placement.cpu_milli, -placement.memory, -1, changes)


def give_back_many(state: NodeState, placements: Sequence[Placement]) -> None:
    """`give_back` for several placements on one node, its domains changed once."""
    changes: list[tuple[str, int]] = []
    returned: dict[str, list[str]] = {}
    for placement in placements:
        for cls, held in placement.devices.items():
            if held:
                returned.setdefault(cls, []).extend(held)
    for cls, names in returned.items():
        free = state.free_devices.get(cls)
        if free is None:
            continue
        old = len(free)
        rank = state.device_rank[cls]
        free.extend(name for name in names if name in rank)
        free.sort(key=rank.__getitem__)
        changes.append((cls, old - len(free)))
    cpu = sum(placement.cpu_milli for placement in placements)
    memory = sum(placement.memory for placement in placements)
    shift(state, -cpu, -memory, -len(placements), changes)


def _remove_devices(state: NodeState, devices: Mapping[str, Sequence[str]], taken: dict[str, int]) -> None:
    """Remove checked device names from the node's free lists, adding how many were removed per class to
    `taken`."""
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
        taken[cls] = taken.get(cls, 0) + old - len(free)


def shift(state: NodeState, cpu: int, memory: int, pods: int, changes: list[tuple[str, int]]) -> None:
    """Take (negative: give back) capacity on one node and every domain it is in; `changes` counts the
    devices taken per class. The node goes into the stale sets of its domains' node indexes, and each
    domain into those of its level's domain indexes, to be placed again when next read."""
    state.free_cpu -= cpu
    state.free_memory -= memory
    state.free_pods -= pods
    for stale in state.stale:
        stale.add(state)
    for domain in state.domains:
        domain.free_cpu -= cpu
        domain.free_memory -= memory
        domain.free_pods -= pods
        if changes:
            free_devices = domain.free_devices
            for cls, taken in changes:
                free_devices[cls] -= taken
        for domains_stale in domain.level.stale:
            domains_stale.add(domain)


def _shift_domains(
    domains: Sequence[TopologyDomain], cpu: int, memory: int, pods: int, devices: Mapping[str, int]
) -> None:
    """Take (negative: give back) capacity from domains' aggregates; each goes into its level's stale sets."""
    for domain in domains:
        domain.free_cpu -= cpu
        domain.free_memory -= memory
        domain.free_pods -= pods
        free_devices = domain.free_devices
        for cls, count in devices.items():
            free_devices[cls] -= count
        for stale in domain.level.stale:
            stale.add(domain)


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
    """Add (sign +1) or take away (-1) a node's free capacity from a domain's aggregates."""
    domain.node_count += sign
    domain.free_cpu += sign * state.free_cpu
    domain.free_memory += sign * state.free_memory
    domain.free_pods += sign * state.free_pods
    for cls, names in state.free_devices.items():
        domain.free_devices[cls] = domain.free_devices.get(cls, 0) + sign * len(names)
    for stale in domain.level.stale:
        stale.add(domain)


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


class NodeTally:
    """The nodes counted by free amount of each resource: how many nodes have exactly `n` free milli-CPU,
    memory bytes or devices of a class, and how many have no free pod slot (`full`: a pod asks for one
    slot, so no other amount is ever asked about). A failed cycle reads from it how many nodes are short
    of what without visiting them; the snapshot moves each node whose capacity changed as it changes.

    Only nodes that every pod may use are counted (not cordoned, no NoSchedule or NoExecute taint); the
    others wait in `screened`, to be judged one by one against each pod's tolerations. Each counted node
    remembers what it contributes (`NodeState.tallied`), so that it moves from its old counts to its new.
    """

    __slots__ = ("counted", "cpu", "devices", "full", "memory", "screened")

    def __init__(self, states: Iterable[NodeState]) -> None:
        self.full = 0
        self.cpu: dict[int, int] = {}
        self.memory: dict[int, int] = {}
        self.devices: dict[str, dict[int, int]] = {}
        self.screened: dict[str, NodeState] = {}
        self.counted = 0
        """How many nodes are counted (the rest are screened)."""
        for state in states:
            self.add(state)

    def add(self, state: NodeState) -> None:
        if state.unschedulable or state.blocking_taints:
            self.screened[state.name] = state
            return
        record = state.tallied = [state.free_pods, state.free_cpu, state.free_memory]
        self.counted += 1
        self.full += state.free_pods < 1
        _bump(self.cpu, state.free_cpu, 1)
        _bump(self.memory, state.free_memory, 1)
        for cls, free in state.free_devices.items():
            record.append(len(free))
            _bump(self.devices.setdefault(cls, {}), len(free), 1)

    def remove(self, state: NodeState) -> None:
        record = state.tallied
        if record is None:
            self.screened.pop(state.name, None)
            return
        state.tallied = None
        self.counted -= 1
        self.full -= record[0] < 1
        _bump(self.cpu, record[1], -1)
        _bump(self.memory, record[2], -1)
        for cls, free in zip(state.free_devices, record[3:], strict=True):
            _bump(self.devices[cls], free, -1)

    def update(self, state: NodeState) -> None:
        """Move a counted node from what it contributed to what it has free now."""
        record = state.tallied
        if record is None:
            return
        # Unrolled, without a call per column: this runs for every node a decision or a finished pod changes.
        old, new = record[0], state.free_pods
        if new != old:
            record[0] = new
            self.full += (new < 1) - (old < 1)
        old, new = record[1], state.free_cpu
        if new != old:
            record[1] = new
            counts = self.cpu
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
            counts[new] = counts.get(new, 0) + 1
        old, new = record[2], state.free_memory
        if new != old:
            record[2] = new
            counts = self.memory
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
            counts[new] = counts.get(new, 0) + 1
        position = 3
        for cls, free in state.free_devices.items():
            old, new = record[position], len(free)
            if new != old:
                record[position] = new
                counts = self.devices[cls]
                left = counts[old] - 1
                if left:
                    counts[old] = left
                else:
                    del counts[old]
                counts[new] = counts.get(new, 0) + 1
            position += 1


def _bump(counts: dict[int, int], value: int, delta: int) -> None:
    total = counts.get(value, 0) + delta
    if total:
        counts[value] = total
    else:
        del counts[value]


def fewer_than(counts: Mapping[int, int], amount: int) -> int:
    """How many nodes a tally's counts hold with less than `amount` free."""
    return sum([number for value, number in counts.items() if value < amount])
