"""Why a PodGroup could not be placed, counted per node and worded the way kube-scheduler words it."""

from __future__ import annotations

from collections.abc import Mapping

from .filters import static_rejection
from .model import GangReason, NodeFilterReason, PodShape
from .snapshot import ClusterSnapshot


def node_reason_counts(snapshot: ClusterSnapshot, shape: PodShape) -> dict[str, int]:
    """How many nodes reject one pod of the shape for each reason, the way kube-scheduler counts them.

    Each node stops at the first non-resource filter it fails; past those, it counts once for every
    resource it is short of. This runs over every node on each unschedulable cycle, so the resource checks
    are plain counters and the filters run only for cordoned or tainted nodes or a pod with a selector.
    """
    counts: dict[str, int] = {}
    cpu, memory, devices = shape.cpu_milli, shape.memory, shape.devices
    short_pods = short_cpu = short_memory = 0
    short_devices = dict.fromkeys([cls for cls, _ in devices], 0)
    selective = bool(shape.node_selector)
    for node in snapshot.node_states():
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
