"""Queueing hints: which parked PodGroups a release of capacity could help, as kube-scheduler's
`QueueingHintFn`s decide which unschedulable pods a cluster event requeues.

A group parked after an unschedulable cycle could fit in no domain of its topology key. Capacity freed on
some nodes changes only the domains of those nodes, and only by what the freed room holds. So a release
could help a group only if, on at least one freed node, (1) the node passes the group's node filters,
(2) it now holds more pods of one of the group's shapes than it did before the release, and (3) the
node's domain (at the group's hard key, its assigned domain, or the whole cluster) now has at least the
room the group's required pods ask for in total. Each is a necessary condition for the group to fit, so
a "no" is never wrong; a "yes" may still end in an unschedulable cycle.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from .filters import NodeUsage, admits, fit_count
from .model import Placement, PodGroup, ResourceTotals, Unschedulable
from .queue import MayHelp
from .snapshot import ClusterSnapshot


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


def capacity_hint(snapshot: ClusterSnapshot, freed: Mapping[str, NodeUsage]) -> MayHelp:
    """The hint for capacity freed on these nodes (see the module docstring). Groups alike (same shapes,
    constraint and demand) share one answer."""
    answers: dict[Hashable, bool] = {}

    def may_help(group: PodGroup, need: Unschedulable) -> bool:
        if not need.shapes or need.required_totals is None:
            return True
        key = (group.topology_key, group.assigned_domain, need.shapes, _totals_key(need.required_totals))
        answer = answers.get(key)
        if answer is None:
            answer = answers[key] = _could_fit(snapshot, freed, group, need, need.required_totals)
        return answer

    return may_help


def _could_fit(
    snapshot: ClusterSnapshot,
    freed: Mapping[str, NodeUsage],
    group: PodGroup,
    need: Unschedulable,
    required: ResourceTotals,
) -> bool:
    nodes = snapshot.nodes_by_name
    assigned = group.assigned_domain if group.assigned_domain and group.assigned_domain.key else None
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
        if _covers(_domain_free(snapshot, group, state.labels), required):
            return True
    return False


def _domain_free(
    snapshot: ClusterSnapshot, group: PodGroup, labels: Mapping[str, str]
) -> ResourceTotals | None:
    assigned = group.assigned_domain
    if assigned is not None and assigned.key:
        return snapshot.domain_free(assigned.key, assigned.value)
    key = group.topology_key
    if key is None:
        return snapshot.cluster.free()
    value = labels.get(key)
    return None if value is None else snapshot.domain_free(key, value)


def _covers(free: ResourceTotals | None, required: ResourceTotals) -> bool:
    if free is None:
        return False
    if free.pods < required.pods or free.cpu_milli < required.cpu_milli or free.memory < required.memory:
        return False
    return all(free.devices.get(cls, 0) >= count for cls, count in required.devices.items())


def _totals_key(totals: ResourceTotals) -> tuple[int, int, int, tuple[tuple[str, int], ...]]:
    return (totals.pods, totals.cpu_milli, totals.memory, tuple(sorted(totals.devices.items())))
