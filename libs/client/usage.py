"""GPU use of the fleet by node and by rack, from Nodes, ResourceSlices and Pods as `get` returns them
(`podway top nodes`, and the occupancy series of `podway report`).

A node's GPUs are the devices of its ResourceSlices whose driver is a GPU driver (`gpu` in its name). What is
held is what is bound, never a pod's spec as its user wrote it: a pod holds the GPUs its containers request as
an extended resource (`<vendor>/gpu`, which a DeviceClass's `extendedResourceName` backs with those devices)
on the node it is bound to (`status.podway.nodeName`, as `get` reports it) while it is not finished, and an
allocated ResourceClaim reserved for someone holds the node's GPUs its allocation names (a shared GPU once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RACK_LABEL = "topology.example.com/rack"
FINISHED = ("Succeeded", "Failed")


@dataclass
class NodeUsage:
    name: str
    rack: str
    gpus: int = 0
    allocated: int = 0
    pods: list[str] = field(default_factory=list)
    cpu_millis: int = 0
    memory_bytes: int = 0

    @property
    def percent(self) -> float:
        return 100.0 * self.allocated / self.gpus if self.gpus else 0.0


@dataclass
class FleetUsage:
    nodes: list[NodeUsage]

    def racks(self) -> list[tuple[str, int, int, int]]:
        """(rack, nodes, GPUs, allocated) per rack, by name."""
        totals: dict[str, list[int]] = {}
        for node in self.nodes:
            row = totals.setdefault(node.rack, [0, 0, 0])
            row[0] += 1
            row[1] += node.gpus
            row[2] += node.allocated
        return [(rack, *values) for rack, values in sorted(totals.items())]  # type: ignore[misc]

    def as_json(self) -> dict[str, Any]:
        return {
            "nodes": [
                {
                    "name": n.name,
                    "rack": n.rack,
                    "gpus": n.gpus,
                    "allocated": n.allocated,
                    "pods": len(n.pods),
                }
                for n in self.nodes
            ],
            "racks": [
                {"rack": r, "nodes": count, "gpus": gpus, "allocated": allocated}
                for r, count, gpus, allocated in self.racks()
            ],
        }


def gpu_request(pod: Mapping[str, Any]) -> int:
    """GPUs a pod asks for as extended resources (requests, or limits when no request is given)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        total += sum(int(str(v)) for k, v in asked.items() if k.endswith("/gpu") and str(v).isdigit())
    return total


def _quantity(text: str, *, millis: bool) -> int:
    """CPU in millicores or memory in bytes, for the common suffixes (m, Ki..Ti, k..T)."""
    text = str(text)
    units = {
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "k": 10**3,
        "M": 10**6,
        "G": 10**9,
        "T": 10**12,
    }
    if text.endswith("m"):
        return int(float(text[:-1]) * (1 if millis else 0.001))
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(float(text) * (1000 if millis else 1))


def fleet_usage(
    nodes: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]] = (),
) -> FleetUsage:
    usage: dict[str, NodeUsage] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        name = str(meta.get("name"))
        usage[name] = NodeUsage(name, (meta.get("labels") or {}).get(RACK_LABEL, "-"))
    gpu_nodes: dict[str, str] = {}
    """GPU device (`driver/pool/device`) -> its node."""
    for piece in slices:
        spec = piece.get("spec") or {}
        node_usage = usage.get(str(spec.get("nodeName")))
        if node_usage is not None and "gpu" in str(spec.get("driver", "")):
            node_usage.gpus += len(spec.get("devices") or [])
            pool = (spec.get("pool") or {}).get("name")
            for device in spec.get("devices") or []:
                gpu_nodes[f"{spec.get('driver')}/{pool}/{device.get('name')}"] = node_usage.name
    for device in sorted(_claimed(claims) & gpu_nodes.keys()):
        usage[gpu_nodes[device]].allocated += 1
    for pod in pods:
        node_name = ((pod.get("status") or {}).get("podway") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        node_usage = usage.get(str(node_name))
        if node_usage is None or phase in FINISHED:
            continue
        meta = pod.get("metadata") or {}
        node_usage.pods.append(f"{meta.get('namespace')}/{meta.get('name')}")
        node_usage.allocated += gpu_request(pod)
        for container in (pod.get("spec") or {}).get("containers") or []:
            requests = (container.get("resources") or {}).get("requests") or {}
            if "cpu" in requests:
                node_usage.cpu_millis += _quantity(requests["cpu"], millis=True)
            if "memory" in requests:
                node_usage.memory_bytes += _quantity(requests["memory"], millis=False)
    return FleetUsage(sorted(usage.values(), key=lambda n: n.name))


def _claimed(claims: Iterable[Mapping[str, Any]]) -> set[str]:
    """Devices allocated to claims that someone reserves."""
    held: set[str] = set()
    for claim in claims:
        status = claim.get("status") or {}
        if not status.get("reservedFor"):
            continue
        for result in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
            held.add(f"{result.get('driver')}/{result.get('pool')}/{result.get('device')}")
    return held


def _bar(allocated: int, total: int, width: int = 16) -> str:
    filled = round(width * allocated / total) if total else 0
    return "[" + "#" * filled + "." * (width - filled) + "]"


def render_usage(usage: FleetUsage, *, by: str = "both") -> str:
    """`top nodes` tables: one row per node, then one per rack."""
    lines: list[str] = []
    if by in ("node", "both"):
        lines.append(f"{'NODE':<24} {'RACK':<16} {'GPUS':>5} {'USED':>5} {'GPU%':>5}  {'':<18} {'PODS':>4}")
        for n in usage.nodes:
            lines.append(
                f"{n.name:<24} {n.rack:<16} {n.gpus:>5} {n.allocated:>5} {n.percent:>4.0f}%  "
                f"{_bar(n.allocated, n.gpus):<18} {len(n.pods):>4}"
            )
    if by in ("rack", "both"):
        if lines:
            lines.append("")
        lines.append(f"{'RACK':<24} {'NODES':>5} {'GPUS':>5} {'USED':>5} {'GPU%':>5}  {'':<18}")
        for rack, count, gpus, allocated in usage.racks():
            percent = 100.0 * allocated / gpus if gpus else 0.0
            lines.append(
                f"{rack:<24} {count:>5} {gpus:>5} {allocated:>5} {percent:>4.0f}%  {_bar(allocated, gpus):<18}"
            )
    return "\n".join(lines) if lines else "No resources found."


def _cores(millis: int) -> str:
    return f"{millis / 1000:g}" if millis % 1000 == 0 else f"{millis}m"


def node_allocation(node: Mapping[str, Any], usage: NodeUsage) -> list[str]:
    """`describe node`'s allocated resources and non-finished pods, as kubectl prints them."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    cpu = _quantity(allocatable.get("cpu", "0"), millis=True)
    memory = _quantity(allocatable.get("memory", "0"), millis=False)

    def share(used: int, total: int) -> str:
        return f"({100 * used // total}%)" if total else ""

    lines = [
        "Allocated resources:",
        f"  {'Resource':<16} {'Requests':<20} {'Allocatable':<12}",
        f"  {'cpu':<16} {_cores(usage.cpu_millis) + ' ' + share(usage.cpu_millis, cpu):<20} {_cores(cpu):<12}",
        f"  {'memory':<16} {f'{usage.memory_bytes // 2**30}Gi ' + share(usage.memory_bytes, memory):<20} "
        f"{memory // 2**30}Gi",
        f"  {'GPUs':<16} {f'{usage.allocated} ' + share(usage.allocated, usage.gpus):<20} {usage.gpus}",
        f"Non-terminated Pods: ({len(usage.pods)} in total)",
    ]
    lines += [f"  {pod}" for pod in usage.pods] or ["  <none>"]
    return lines
