"""Synthetic GPU fleets: Node and ResourceSlice manifests for a zone / block / rack / node topology."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ZONE_KEY = "topology.kubernetes.io/zone"
BLOCK_KEY = "topology.example.com/block"
RACK_KEY = "topology.example.com/rack"
HOST_KEY = "kubernetes.io/hostname"
RUNTIME_KEY = "podway.io/runtime"
"""The label of a node whose agent runs pods as processes (value `process`); the simulated fleet has none."""
GPU_DRIVER = "gpu.example.com"
FABRIC_DRIVER = "fabric.example.com"


@dataclass(frozen=True)
class ClusterShape:
    """How many of each topology level, and what one node holds."""

    zones: int = 1
    blocks: int = 2
    racks_per_block: int = 4
    nodes_per_rack: int = 8
    gpus_per_node: int = 8
    cpu: int = 64
    memory_gi: int = 512
    max_pods: int = 110
    gpu_model: str = "H200"
    gpu_memory_gi: int = 141
    numa_nodes: int = 2
    rack_fabric: bool = True
    shared_gpus_per_node: int = 0
    """The last GPUs of each node are shareable: consumable `cores` (1) and `memory` (a share asking
    none of it takes none), for fractional GPUs."""

    @property
    def node_count(self) -> int:
        return self.zones * self.blocks * self.racks_per_block * self.nodes_per_rack


def rack_names(shape: ClusterShape) -> list[tuple[str, str, str]]:
    """(zone, block, rack) for every rack, in a fixed order."""
    racks = []
    for z in range(shape.zones):
        zone = f"zone-{z}"
        for b in range(shape.blocks):
            block = f"{zone}-b{b}"
            for r in range(shape.racks_per_block):
                racks.append((zone, block, f"{block}-r{r}"))
    return racks


def node_manifest(name: str, zone: str, block: str, rack: str, shape: ClusterShape) -> dict[str, Any]:
    labels = {ZONE_KEY: zone, BLOCK_KEY: block, RACK_KEY: rack, HOST_KEY: name}
    allocatable = {"cpu": str(shape.cpu), "memory": f"{shape.memory_gi}Gi", "pods": str(shape.max_pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def gpu_slice_manifest(node: str, shape: ClusterShape) -> dict[str, Any]:
    per_numa = max(1, shape.gpus_per_node // max(1, shape.numa_nodes))
    devices: list[dict[str, Any]] = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": shape.gpu_model},
                "numaNode": {"int": i // per_numa},
                "pcieRoot": {"string": f"pci0000:{i // per_numa:02x}"},
            },
            "capacity": {"memory": {"value": f"{shape.gpu_memory_gi}Gi"}},
        }
        for i in range(shape.gpus_per_node)
    ]
    for device in devices[shape.gpus_per_node - min(shape.shared_gpus_per_node, shape.gpus_per_node) :]:
        device["allowMultipleAllocations"] = True
        device["capacity"] = {
            "cores": {"value": "1"},
            "memory": {"value": f"{shape.gpu_memory_gi}Gi", "requestPolicy": {"default": "0"}},
        }
    return gpu_slice(node, devices)


def gpu_slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """The ResourceSlice publishing a node's GPUs, one pool per node."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{GPU_DRIVER}"},
        "spec": {
            "driver": GPU_DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }


def fabric_slice_manifest(rack: str) -> dict[str, Any]:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": RACK_KEY, "operator": "In", "values": [rack]}]}]
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{rack}-{FABRIC_DRIVER}"},
        "spec": {
            "driver": FABRIC_DRIVER,
            "pool": {"name": rack, "generation": 1, "resourceSliceCount": 1},
            "nodeSelector": selector,
            "devices": [
                {"name": "fabric", "attributes": {"rack": {"string": rack}}, "allowMultipleAllocations": True}
            ],
        },
    }


def generate_cluster(shape: ClusterShape) -> list[dict[str, Any]]:
    """Every Node, then every ResourceSlice: GPUs per node and, optionally, one fabric device per rack."""
    nodes: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    for zone, block, rack in rack_names(shape):
        for n in range(shape.nodes_per_rack):
            name = f"{rack}-n{n:02d}"
            nodes.append(node_manifest(name, zone, block, rack, shape))
            if shape.gpus_per_node:
                slices.append(gpu_slice_manifest(name, shape))
        if shape.rack_fabric:
            slices.append(fabric_slice_manifest(rack))
    return nodes + slices
