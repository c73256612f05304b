"""Why a PodGroup could not be placed, counted per node and worded the way kube-scheduler words it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .capacity import NodeState, fewer_than
from .filters import static_rejection
from .model import GangReason, NodeFilterReason, PodShape
from .snapshot import ClusterSnapshot


def node_reason_counts(snapshot: ClusterSnapshot, shape: PodShape) -> dict[str, int]:
    """How many nodes reject one pod of the shape for each reason, the way kube-scheduler counts them.

    Each node stops at the first non-resource filter it fails; past those, it counts once for every
    resource it is short of. A failed cycle asks this of a snapshot that changed since the last one, so
    the nodes are not visited: the snapshot's tally counts them by free amount, and only cordoned or
    tainted nodes are judged one by one. A pod with a node selector is judged against every node.
    """
    if shape.node_selector:
        return _walk(snapshot, shape, snapshot.node_states())
    tally = snapshot.node_tally()
    cpu, memory, devices = shape.cpu_milli, shape.memory, shape.devices
    counts, short_pods, short_cpu, short_memory, short_devices = _judge(shape, tally.screened.values())
    short_pods += tally.full
    short_cpu += fewer_than(tally.cpu, cpu)
    short_memory += fewer_than(tally.memory, memory)
    for cls, count in devices:
        free = tally.devices.get(cls, {})
        # Nodes without the class are short of it too.
        short_devices[cls] += tally.counted - sum([nodes for value, nodes in free.items() if value >= count])
    return _with_shortfalls(snapshot, counts, short_pods, short_cpu, short_memory, short_devices)


def _walk(snapshot: ClusterSnapshot, shape: PodShape, nodes: Iterable[NodeState]) -> dict[str, int]:
    counts, short_pods, short_cpu, short_memory, short_devices = _judge(shape, nodes)
    return _with_shortfalls(snapshot, counts, short_pods, short_cpu, short_memory, short_devices)


def _judge(
    shape: PodShape, nodes: Iterable[NodeState]
) -> tuple[dict[str, int], int, int, int, dict[str, int]]:
    """Nodes judged one by one: counts per filter reason, then how many are short of pods, cpu, memory and
    each device class."""
    counts: dict[str, int] = {}
    cpu, memory, devices = shape.cpu_milli, shape.memory, shape.devices
    short_pods = short_cpu = short_memory = 0
    short_devices = dict.fromkeys([cls for cls, _ in devices], 0)
    selective = bool(shape.node_selector)
    for node in nodes:
        if selective or node.unschedulable or node.blocking_taints:
            reason = static_rejection(shape, node)
            if reason is not None:
                counts[reason] = counts.get(reason, 0) + 1
                continue
        if node.free_pods < 1:
            short_pods += 1
        if node.free_cpu < cpu:
            short_cpu += 1
        if node.free_memory < memory:
            short_memory += 1
        free_devices = node.free_devices
        for cls, count in devices:
            free = free_devices.get(cls)
            if free is None or len(free) < count:
                short_devices[cls] += 1
    return counts, short_pods, short_cpu, short_memory, short_devices


def _with_shortfalls(
    snapshot: ClusterSnapshot,
    counts: dict[str, int],
    short_pods: int,
    short_cpu: int,
    short_memory: int,
    short_devices: dict[str, int],
) -> dict[str, int]:
    shortfalls = {
        NodeFilterReason.TOO_MANY_PODS.value: short_pods,
        NodeFilterReason.INSUFFICIENT.format(resource="cpu"): short_cpu,
        NodeFilterReason.INSUFFICIENT.format(resource="memory"): short_memory,
    }
    for cls, short in short_devices.items():
        shortfalls[NodeFilterReason.INSUFFICIENT.format(resource=snapshot.extended_resource_name(cls))] = (
            short
        )
    counts.update((reason, count) for reason, count in shortfalls.items() if count)
    return counts


def unschedulable_message(node_total: int, reason_counts: Mapping[str, int], group_reason: str | None) -> str:
    """`0/N nodes are available: <count> <reason>, ... <group reason>.`, most frequent reason first."""
    if node_total == 0:
        message = f"{GangReason.NO_NODES}."
    else:
        message = GangReason.NODES_UNAVAILABLE.format(total=node_total)
        ranked = sorted(reason_counts.items(), key=lambda item: (-item[1], item[0]))
        if ranked:
            message += ": " + ", ".join(f"{count} {reason}" for reason, count in ranked)
        message += "."
    if group_reason:
        message += f" {group_reason}."
    return message
