"""Node filters (cordon, taints, node selector, resources) and how many pods of a shape fit on a node."""

from __future__ import annotations

from collections.abc import Callable

from .capacity import NodeState
from .model import UNSCHEDULABLE_TAINT_KEY, NodeFilterReason, PodShape, Taint, TaintEffect

_CORDON_TAINT = Taint(UNSCHEDULABLE_TAINT_KEY, "", TaintEffect.NO_SCHEDULE)


class NodeUsage:
    """Capacity a cycle has tentatively taken on one node (its own assumptions, not yet in the snapshot)."""

    __slots__ = ("cpu", "devices", "memory", "pods")

    def __init__(self) -> None:
        self.cpu = 0
        self.memory = 0
        self.pods = 0
        self.devices: dict[str, int] = {}


def admits(shape: PodShape, node: NodeState) -> bool:
    """Whether the node passes the non-resource filters for the shape: cordon, taints, node selector."""
    if node.unschedulable and not _tolerates(shape, _CORDON_TAINT):
        return False
    if any(not _tolerates(shape, taint) for taint in node.blocking_taints):
        return False
    labels = node.labels
    return all(labels.get(key) == value for key, value in shape.node_selector)


def fit_count(shape: PodShape, node: NodeState, used: NodeUsage | None = None) -> int:
    """How many more pods of the shape fit on the node: the minimum over resources of floor(free / request).

    `used` is what the current cycle already took there. The non-resource filters are `admits`'s job.
    """
    free_cpu, free_memory, fit = node.free_cpu, node.free_memory, node.free_pods
    if used is not None:
        free_cpu -= used.cpu
        free_memory -= used.memory
        fit -= used.pods
    request = shape.cpu_milli
    if request and free_cpu // request < fit:
        fit = free_cpu // request
    request = shape.memory
    if request and free_memory // request < fit:
        fit = free_memory // request
    free_devices = node.free_devices
    for cls, count in shape.devices:
        names = free_devices.get(cls)
        if names is None:
            return 0
        free = len(names) if used is None else len(names) - used.devices.get(cls, 0)
        if free // count < fit:
            fit = free // count
    return fit if fit > 0 else 0


def rejection_reasons(shape: PodShape, node: NodeState, resource_name: Callable[[str], str]) -> list[str]:
    """Why the node cannot take one pod of the shape, as kube-scheduler counts it; empty if it can.

    Filters run in kube-scheduler's order and stop at the first that fails; the resource filter reports
    every resource that is short. `resource_name` turns a device class into its extended resource name.
    """
    reason = static_rejection(shape, node)
    if reason is not None:
        return [reason]
    reasons: list[str] = []
    if node.free_pods < 1:
        reasons.append(NodeFilterReason.TOO_MANY_PODS)
    if node.free_cpu < shape.cpu_milli:
        reasons.append(NodeFilterReason.INSUFFICIENT.format(resource="cpu"))
    if node.free_memory < shape.memory:
        reasons.append(NodeFilterReason.INSUFFICIENT.format(resource="memory"))
    for cls, count in shape.devices:
        if node.count(cls) < count:
            reasons.append(NodeFilterReason.INSUFFICIENT.format(resource=resource_name(cls)))
    return reasons


def static_rejection(shape: PodShape, node: NodeState) -> str | None:
    """The first non-resource filter (cordon, taints, node selector) the node fails for the shape, if any."""
    if node.unschedulable and not _tolerates(shape, _CORDON_TAINT):
        return NodeFilterReason.UNSCHEDULABLE
    for taint in node.blocking_taints:
        if not _tolerates(shape, taint):
            return NodeFilterReason.UNTOLERATED_TAINT.format(key=taint.key, value=taint.value)
    labels = node.labels
    if any(labels.get(key) != value for key, value in shape.node_selector):
        return NodeFilterReason.SELECTOR_MISMATCH
    return None


def _tolerates(shape: PodShape, taint: Taint) -> bool:
    return any(toleration.tolerates(taint) for toleration in shape.tolerations)
