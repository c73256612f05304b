"""Builders of the records `podway check` reads: objects, audit events chained by cause, device rows."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from libs.core.invariants import RecordedEvent, Records, check
from libs.core.scheduling.objects import ApiObject
from libs.events.envelope import uuid7

GPU_DRIVER = "gpu.example.com"
_clock = itertools.count(1_700_000_000_000)


def node(
    name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", extended: dict[str, str] | None = None
) -> ApiObject:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extended or {})}
    return ApiObject("Node", "", name, f"uid-{name}", {}, {}, {"allocatable": allocatable})


def pod(
    name: str,
    *,
    group: str | None = None,
    cpu: str = "1",
    phase: str = "Pending",
    ran_on: str = "",
    gpus: int = 0,
    priority: int = 0,
) -> ApiObject:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if priority:
        spec["priority"] = priority
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    status: dict[str, Any] = {"phase": phase}
    if ran_on:
        status["podway"] = {"nodeName": ran_on}
    return ApiObject("Pod", "ml", name, f"uid-{name}", {}, spec, status)


def gang(name: str, min_count: int, *, parent: str | None = None) -> ApiObject:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return ApiObject("PodGroup", "ml", name, f"uid-{name}", {}, spec, {})


def composite(name: str, min_group_count: int) -> ApiObject:
    spec = {"schedulingPolicy": {"gang": {"minGroupCount": min_group_count}}}
    return ApiObject("CompositePodGroup", "ml", name, f"uid-{name}", {}, spec, {})


def gpu_class() -> ApiObject:
    spec = {
        "selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}],
        "extendedResourceName": "nvidia.com/gpu",
    }
    return ApiObject("DeviceClass", "", GPU_DRIVER, "uid-class-gpu", {}, spec, {})


def gpu_slice(node_name: str, count: int, *, shared_memory: str = "") -> ApiObject:
    """`count` GPUs on a node (`gpu.example.com/<node>/gpu-<i>`); shareable ones with `shared_memory`."""
    devices: list[dict[str, Any]] = []
    for i in range(count):
        device: dict[str, Any] = {"name": f"gpu-{i}"}
        if shared_memory:
            device["allowMultipleAllocations"] = True
            device["capacity"] = {"memory": {"value": shared_memory}}
        devices.append(device)
    spec = {"driver": GPU_DRIVER, "pool": {"name": node_name}, "nodeName": node_name, "devices": devices}
    return ApiObject("ResourceSlice", "", f"{node_name}-gpus", f"uid-slice-{node_name}", {}, spec, {})


def gpu(node_name: str, index: int) -> str:
    return f"{GPU_DRIVER}/{node_name}/gpu-{index}"


def claim(name: str, *devices: str, reserved_for: tuple[str, ...] = (), memory: str = "") -> ApiObject:
    """An allocated claim holding `devices` (ids from `gpu`), reserved for the pods named."""
    results = []
    for device in devices:
        driver, pool, device_name = device.split("/")
        result: dict[str, Any] = {"request": "gpu", "driver": driver, "pool": pool, "device": device_name}
        if memory:
            result["consumedCapacity"] = {f"{GPU_DRIVER}/memory": memory}
        results.append(result)
    status = {
        "allocation": {"devices": {"results": results}},
        "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved_for],
    }
    return ApiObject("ResourceClaim", "ml", name, f"uid-claim-{name}", {}, {}, status)


def event(kind: str, story: str = "c", **payload: Any) -> RecordedEvent:
    return RecordedEvent(kind, story, payload)


def bound(*pods: tuple[str, str], story: str = "c") -> RecordedEvent:
    return RecordedEvent("pods.bound", story, {"pods": [{"pod_uid": f"uid-{p}", "node": n} for p, n in pods]})


def ended(kind: str, *pods: str, story: str = "c") -> RecordedEvent:
    return RecordedEvent(kind, story, {"pods": [{"uid": f"uid-{p}"} for p in pods]})


def logged(*events: RecordedEvent) -> list[RecordedEvent]:
    """The events as the log keeps them: each with a UUIDv7 id, later ones made later; causes as given."""
    return [dataclasses.replace(e, event_id=str(uuid7(next(_clock)))) for e in events]


def chain(
    *events: RecordedEvent, story: str = "c", after: RecordedEvent | None = None
) -> list[RecordedEvent]:
    """A PodGroup's story: admitted (or going on `after`), then each event caused by the one before it."""
    if after is None:
        first, *rest = logged(RecordedEvent("podgroup.admitted", story, {}), *events)
    else:
        first, rest = after, logged(*events)
    found = [first]
    for e in rest:
        found.append(dataclasses.replace(e, correlation_id=story, causation_id=found[-1].event_id))
    return found if after is None else found[1:]


def names(records: Records) -> list[str]:
    return [violation.invariant for violation in check(records)]
