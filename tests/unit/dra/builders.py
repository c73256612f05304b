"""Builders for DRA core tests: GPU slices, a rack fabric, classes and claims."""

from __future__ import annotations

from typing import Any

from libs.core.dra import ClaimSpec, DeviceClassInfo, DeviceInventory, claim_spec

GPU_DRIVER = "gpu.example.com"
FABRIC_DRIVER = "fabric.example.com"
RACK_KEY = "topology.example.com/rack"


def gpu(
    name: str,
    *,
    model: str = "H200",
    numa: int = 0,
    pcie: str = "pci0",
    memory: str = "141Gi",
    shared: bool = False,
) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": name,
        "attributes": {"model": {"string": model}, "numaNode": {"int": numa}, "pcieRoot": {"string": pcie}},
        "capacity": {"memory": {"value": memory}},
    }
    if shared:
        device["allowMultipleAllocations"] = True
        device["capacity"]["cores"] = {"value": "1"}
        device["capacity"]["memory"]["requestPolicy"] = {"default": "0"}
    return device


def node_slice(node: str, devices: list[dict[str, Any]], *, generation: int = 1) -> dict[str, Any]:
    return {
        "driver": GPU_DRIVER,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
        "nodeName": node,
        "devices": devices,
    }


def fabric_slice(rack: str) -> dict[str, Any]:
    return {
        "driver": FABRIC_DRIVER,
        "pool": {"name": f"rack-{rack}", "generation": 1, "resourceSliceCount": 1},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": RACK_KEY, "operator": "In", "values": [rack]}]}
            ]
        },
        "devices": [
            {"name": "fabric", "attributes": {"rack": {"string": rack}}, "allowMultipleAllocations": True}
        ],
    }


def eight_gpus(numa_split: int = 4) -> list[dict[str, Any]]:
    return [gpu(f"gpu-{i}", numa=i // numa_split, pcie=f"pci{i // 2}") for i in range(8)]


def inventory(
    slices: dict[str, dict[str, Any]], labels: dict[str, dict[str, str]] | None = None
) -> DeviceInventory:
    found = DeviceInventory()
    found.put_class(
        DeviceClassInfo("gpu.example.com", (f'device.driver == "{GPU_DRIVER}"',), "nvidia.com/gpu")
    )
    found.put_class(DeviceClassInfo("fabric.example.com", (f'device.driver == "{FABRIC_DRIVER}"',), None))
    for name, spec in slices.items():
        found.put_slice(name, spec)
    for node, node_labels in (labels or {}).items():
        found.put_node(node, node_labels)
    return found


def exactly(
    name: str = "gpus",
    *,
    count: int | None = 1,
    device_class: str = "gpu.example.com",
    selectors: tuple[str, ...] = (),
    mode: str | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    ask: dict[str, Any] = {"deviceClassName": device_class}
    if count is not None:
        ask["count"] = count
    if mode:
        ask["allocationMode"] = mode
    if selectors:
        ask["selectors"] = [{"cel": {"expression": expression}} for expression in selectors]
    if capacity:
        ask["capacity"] = {"requests": capacity}
    return {"name": name, "exactly": ask}


def claim(key: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> ClaimSpec:
    return claim_spec(key, {"devices": {"requests": list(requests), "constraints": constraints or []}})
