"""Why a PodGroup could not be placed, counted per node and worded the way kube-scheduler words it."""

from __future__ import annotations

from collections.abc import Mapping

from .filters import rejection_reasons
from .model import GangReason, PodShape
from .snapshot import ClusterSnapshot


def node_reason_counts(snapshot: ClusterSnapshot, shape: PodShape) -> dict[str, int]:
    """How many nodes reject one pod of the shape for each reason (a node may count for several resources)."""
    counts: dict[str, int] = {}
    resource_name = snapshot.extended_resource_name
    for node in snapshot.node_states():
        for reason in rejection_reasons(shape, node, resource_name):
            counts[reason] = counts.get(reason, 0) + 1
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
