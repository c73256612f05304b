"""Queueing hints: which parked PodGroups a release of capacity could help, as kube-scheduler's
`QueueingHintFn`s decide which unschedulable pods a cluster event requeues.

A group parked after an unschedulable cycle could fit in no domain of its topology key. Capacity freed on
some nodes changes only the domains of those nodes, and only by what the freed room holds. So a release
could help a group only if, on at least one freed node, (1) the node passes the group's node filters,
(2) it now holds more pods of one of the group's shapes than it did before the release, and (3) the
node's domain (at the group's hard key, its assigned domain, or the whole cluster) now has at least the
room the group's required pods ask for in total. Each is a necessary condition for the group to fit.

Groups alike (same pod shape, constraint and demand) compete for the same room: for a group of one
shape, the changed domains' nodes hold at most `sum(pods per node) // required` of them, so only that
many of them are woken, most important first (the queue asks in its own order). A "no" is never wrong;
a "yes" may still end in an unschedulable cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

from .filters import NodeUsage, admits, fit_count
from .model import Placement, PodGroup, PodShape, ResourceTotals, Unschedulable
from .queue import RoomFor
from .snapshot import ClusterSnapshot
from .topology import TopologyDomain

UNBOUNDED = 1 << 30


class FreedCapacity:
    """Capacity given back per node since the parked groups were last told about it."""

    def __init__(self) -> None:
        self.by_node: dict[str, NodeUsage] = {}

    def __bool__(self) -> bool:
        return bool(self.by_node)

    def add(self, placement: Placement) -> None:
        """A pod's placement was given back to the snapshot."""
        usage = self.by_node.get(placement.node_name)
        if usage is None:
            usage = self.by_node[placement.node_name] = NodeUsage()
        usage.cpu += placement.cpu_milli
        usage.memory += placement.memory
        usage.pods += 1
        for device_class, names in placement.devices.items():
            usage.devices[device_class] = usage.devices.get(device_class, 0) + len(names)

    def clear(self) -> None:
        self.by_node = {}


def capacity_hint(snapshot: ClusterSnapshot, freed: Mapping[str, NodeUsage]) -> RoomFor:
    """The hint for capacity freed on these nodes (see the module docstring): for one kind of parked group,
    how many of them the changed domains could hold at most."""

    def room_for(group: PodGroup, need: Unschedulable) -> int:
        if need.required_totals is None or not need.shapes:
            return UNBOUNDED
        return _room_for(snapshot, freed, group, need, need.required_totals)

    return room_for


def _room_for(
    snapshot: ClusterSnapshot,
    freed: Mapping[str, NodeUsage],
    group: PodGroup,
    need: Unschedulable,
    required: ResourceTotals,
) -> int:
    """How many groups like this one the changed domains could hold at most (0: none)."""
    nodes = snapshot.nodes_by_name
    assigned = group.assigned_domain if group.assigned_domain and group.assigned_domain.key else None
    changed: dict[tuple[str, str], TopologyDomain] = {}
    for name, usage in freed.items():
        state = nodes.get(name)
        if state is None:
            continue
        if assigned is not None and state.labels.get(assigned.key) != assigned.value:
            continue
        if not any(
            admits(shape, state) and fit_count(shape, state) > fit_count(shape, state, usage)
            for shape in need.shapes
        ):
            continue
        domain = _domain(snapshot, group, state.labels)
        if domain is not None and _covers(domain.free(), required):
            changed[(domain.key, domain.value)] = domain
    if len(need.shapes) > 1:
        return UNBOUNDED if changed else 0
    shape, count = need.shapes[0], max(1, need.required_count)
    return sum(_pods_held(snapshot, domain, shape) // count for domain in changed.values())


def _domain(snapshot: ClusterSnapshot, group: PodGroup, labels: Mapping[str, str]) -> TopologyDomain | None:
    """The domain of a node the group would have to fit in: its assigned domain, the node's domain at its
    hard key, or the whole cluster."""
    assigned = group.assigned_domain
    if assigned is not None and assigned.key:
        return snapshot.level(assigned.key).domains.get(assigned.value)
    key = group.topology_key
    if key is None:
        return snapshot.cluster
    value = labels.get(key)
    return None if value is None else snapshot.level(key).domains.get(value)


def _pods_held(snapshot: ClusterSnapshot, domain: TopologyDomain, shape: PodShape) -> int:
    """How many pods of the shape the domain's nodes hold, each node counted on its own."""
    index = snapshot.node_index(domain, shape.primary)
    if index is None:
        return 0
    nodes = snapshot.nodes_by_name
    held = 0
    for name in index.at_least(max(1, shape.primary_request)):
        state = nodes[name]
        if admits(shape, state):
            held += fit_count(shape, state)
    return held


def _covers(free: ResourceTotals, required: ResourceTotals) -> bool:
    if free.pods < required.pods or free.cpu_milli < required.cpu_milli or free.memory < required.memory:
        return False
    return all(free.devices.get(cls, 0) >= count for cls, count in required.devices.items())
