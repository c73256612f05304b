"""The DeviceClasses of the simulated drivers, which the node agent installs as a DRA driver installs its
class: one per driver, selecting the driver's devices; GPUs also serve the `nvidia.com/gpu` extended resource."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from libs.cluster.generator import GPU_DRIVER

GPU_EXTENDED_RESOURCE = "nvidia.com/gpu"


def device_class(driver: str) -> dict[str, Any]:
    """The DeviceClass named after `driver`, selecting its devices."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if driver == GPU_DRIVER:
        spec["extendedResourceName"] = GPU_EXTENDED_RESOURCE
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": spec,
    }


def device_classes_of(slices: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One DeviceClass for each driver that publishes devices in these ResourceSlices, in driver order."""
    drivers = {
        str(doc["spec"]["driver"])
        for doc in slices
        if doc.get("kind") == "ResourceSlice" and isinstance((doc.get("spec") or {}).get("driver"), str)
    }
    return [device_class(driver) for driver in sorted(drivers)]
