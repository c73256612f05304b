"""Builders for scheduling tests: small clusters, pods and gangs with readable defaults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from libs.core.scheduling import (
    BLOCK_KEY,
    DEFAULT_SCHEDULER_NAME,
    HOSTNAME_KEY,
    RACK_KEY,
    ZONE_KEY,
    ClusterSnapshot,
    Node,
    PodGroup,
    PodRequest,
    Taint,
    Toleration,
)
from libs.core.scheduling.capacity import NodeTally
from libs.core.scheduling.model import CPU_DIMENSION

GPU = "gpu.example.com"
GPU_RESOURCE = "nvidia.com/gpu"
GIB = 1024**3


def make_node(
    name: str,
    *,
    gpus: int = 8,
    cpu: int = 64,
    memory_gib: int = 512,
    pods: int = 110,
    rack: str | None = None,
    block: str | None = None,
    zone: str | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    unschedulable: bool = False,
    device_class: str = GPU,
) -> Node:
    """A node with `gpus` devices `gpu-0..`, CPU in cores, memory in GiB, and topology labels."""
    all_labels = {HOSTNAME_KEY: name, **(labels or {})}
    for key, value in ((RACK_KEY, rack), (BLOCK_KEY, block), (ZONE_KEY, zone)):
        if value is not None:
            all_labels[key] = value
    devices = {device_class: tuple(f"gpu-{index}" for index in range(gpus))} if gpus else {}
    return Node(
        name,
        all_labels,
        cpu_milli=cpu * 1000,
        memory=memory_gib * GIB,
        pods=pods,
        devices=devices,
        taints=tuple(taints),
        unschedulable=unschedulable,
    )


def make_pod(
    name: str,
    *,
    gpus: int = 1,
    cpu: float = 8,
    memory_gib: int = 64,
    selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Toleration] = (),
    scheduler: str = DEFAULT_SCHEDULER_NAME,
    device_class: str = GPU,
) -> PodRequest:
    return PodRequest(
        uid=f"uid-{name}",
        name=name,
        cpu_milli=int(cpu * 1000),
        memory=memory_gib * GIB,
        devices={device_class: gpus} if gpus else {},
        node_selector=dict(selector or {}),
        tolerations=tuple(tolerations),
        scheduler_name=scheduler,
    )


def make_gang(
    name: str,
    size: int,
    *,
    min_count: int | None = None,
    basic: bool = False,
    topology_key: str | None = None,
    preferred: Sequence[str] = (),
    priority: int = 0,
    created_at: float = 0.0,
    **pod_options: Any,
) -> tuple[PodGroup, list[PodRequest]]:
    """A PodGroup `name` (gang of minCount `min_count`, default `size`) and its `size` identical pods."""
    group = PodGroup(
        namespace="ml",
        name=name,
        uid=f"uid-{name}",
        gang_min_count=None if basic else (min_count if min_count is not None else size),
        topology_key=topology_key,
        preferred_topology=tuple(preferred),
        priority=priority,
        created_at=created_at,
    )
    pods = [make_pod(f"{name}-{index:02d}", **pod_options) for index in range(size)]
    return group, pods


def make_racks(racks: Mapping[str, int], *, block: str | None = None, **node_options: Any) -> list[Node]:
    """Nodes `<rack>-n<i>` for each rack and node count."""
    return [
        make_node(f"{rack}-n{index}", rack=rack, block=block, **node_options)
        for rack, count in racks.items()
        for index in range(count)
    ]


def make_snapshot(nodes: Sequence[Node]) -> ClusterSnapshot:
    return ClusterSnapshot(nodes, extended_resource_names={GPU: GPU_RESOURCE})


def assert_consistent(snapshot: ClusterSnapshot) -> None:
    """Every domain aggregate, index entry and tally count equals what recomputing from the nodes gives."""
    tally, recounted = snapshot.node_tally(), NodeTally(snapshot.node_states())
    assert (tally.counted, tally.full, tally.cpu, tally.memory) == (
        recounted.counted,
        recounted.full,
        recounted.cpu,
        recounted.memory,
    )
    assert {cls: counts for cls, counts in tally.devices.items() if counts} == recounted.devices
    assert tally.screened.keys() == recounted.screened.keys()
    levels = [snapshot.cluster.level, *(snapshot.level(key) for key in snapshot.topology_keys)]
    for level in levels:
        for value, domain in level.domains.items():
            members = [node for node in snapshot.node_states() if domain in node.domains]
            assert domain.node_count == len(members), domain
            assert domain.free_cpu == sum(node.free_cpu for node in members), domain
            assert domain.free_memory == sum(node.free_memory for node in members), domain
            assert domain.free_pods == sum(node.free_pods for node in members), domain
            for cls, free in domain.free_devices.items():
                assert free == sum(len(node.free_devices.get(cls, ())) for node in members), (domain, cls)
            for dimension, index in domain.node_index.items():
                indexed = [
                    node for node in members if dimension == CPU_DIMENSION or dimension in node.free_devices
                ]
                tightest_first = sorted(indexed, key=lambda node: (node.count(dimension), node.name))
                assert list(index.at_least(0)) == [node.name for node in tightest_first], (domain, dimension)
                for size in (1, 2, 3):
                    held = sum(node.count(dimension) // size for node in indexed)
                    assert index.units(size, 10**9) == held, (domain, dimension, size)
            for dimension, index in level.index.items():
                assert index.count_of(value) == domain.count(dimension), (domain, dimension)
    for node in snapshot.node_states():
        used_cpu = used_memory = 0
        used_devices: dict[str, list[str]] = {}
        pods = [placement for placement in snapshot.placements() if placement.node_name == node.name]
        for placement in pods:
            used_cpu += placement.cpu_milli
            used_memory += placement.memory
            for cls, names in placement.devices.items():
                used_devices.setdefault(cls, []).extend(names)
        assert node.free_cpu == node.node.cpu_milli - used_cpu
        assert node.free_memory == node.node.memory - used_memory
        assert node.free_pods == node.node.pods - len(pods)
        for cls, names in node.node.devices.items():
            used = used_devices.get(cls, [])
            assert len(used) == len(set(used)), f"device double-allocated on {node.name}"
            assert sorted(node.free_devices[cls] + used) == sorted(names)
