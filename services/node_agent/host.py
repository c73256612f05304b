"""The host a process-runtime agent runs on, as a Node and a ResourceSlice: its CPUs and memory less a
reserve, labels from the host and from a file, and its GPUs (NVML when a driver answers, else a device file)."""

from __future__ import annotations

import logging
import os
import platform
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from libs.api.models.core import TAINT_EFFECTS
from libs.cluster.generator import HOST_KEY, RUNTIME_KEY, gpu_slice

log = logging.getLogger(__name__)

RESOURCE_LIMITS = "PodwayResourceLimits"
"""The Node condition saying how the agent holds pods to their limits (cgroup v2 or rlimits)."""
MAX_PODS = 110
PROCESS_RUNTIME = "process"


def host_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def host_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def host_labels(node_name: str, labels_file: Path | None) -> dict[str, str]:
    """Kubelet's well-known labels and the runtime's (`podway.io/runtime: process`, what a pod selects to run
    for real in a fleet that also has simulated nodes), then the file's (YAML mapping, or `key=value` lines),
    which win."""
    labels = {
        HOST_KEY: node_name,
        RUNTIME_KEY: PROCESS_RUNTIME,
        "kubernetes.io/os": platform.system().lower(),
        "kubernetes.io/arch": {"x86_64": "amd64", "aarch64": "arm64"}.get(
            platform.machine(), platform.machine()
        ),
    }
    if labels_file is not None:
        labels.update(read_labels(labels_file))
    return labels


def read_labels(path: Path) -> dict[str, str]:
    text = path.read_text()
    loaded = yaml.safe_load(text)
    if isinstance(loaded, dict):
        return {str(k): str(v) for k, v in loaded.items()}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def parse_taint(spec: str) -> dict[str, str]:
    """A taint written as `kubectl taint` takes it, `key[=value]:Effect`; ValueError in kubectl's words."""
    key_value, colon, effect = spec.rpartition(":")
    key, _, value = key_value.partition("=")
    if not colon or not key:
        raise ValueError(f"invalid taint spec: {spec}")
    if effect not in TAINT_EFFECTS:
        raise ValueError(f"invalid taint effect: {effect}, unsupported taint effect")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def gpus_from_nvml() -> list[dict[str, Any]] | None:
    """The host's GPUs as NVML lists them, or None without the library or a driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            gpus.append({"index": index, "model": _text(name), "memory": str(memory), "uuid": _text(uuid)})
        return gpus
    finally:
        pynvml.nvmlShutdown()


def gpus_from_file(path: Path) -> list[dict[str, Any]]:
    """A device file: a YAML list (or `devices:` list) of `{index, model?, memory?, uuid?}`."""
    loaded = yaml.safe_load(path.read_text()) or []
    devices = loaded.get("devices", []) if isinstance(loaded, dict) else loaded
    return [dict(device) for device in devices]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def device_slice(node_name: str, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """One ResourceSlice of the host's GPUs, named `gpu-<index>` as the simulated ones are."""
    devices = []
    for gpu in gpus:
        attributes: dict[str, Any] = {"index": {"int": int(gpu["index"])}}
        if gpu.get("model"):
            attributes["model"] = {"string": str(gpu["model"])}
        if gpu.get("uuid"):
            attributes["uuid"] = {"string": str(gpu["uuid"])}
        device: dict[str, Any] = {"name": f"gpu-{int(gpu['index'])}", "attributes": attributes}
        if gpu.get("memory"):
            device["capacity"] = {"memory": {"value": str(gpu["memory"])}}
        devices.append(device)
    return gpu_slice(node_name, devices)


def host_manifests(
    *,
    node_name: str | None,
    labels_file: Path | None,
    devices_file: Path | None,
    reserved_cpu_m: int,
    reserved_memory_mi: int,
    limits_condition: dict[str, str],
    taints: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The Node (and its GPUs' ResourceSlice, when it has any) this host registers, with `taints`
    (`key[=value]:Effect`) so that only pods tolerating them land here."""
    name = node_name or socket.gethostname().lower()
    cpu_m = max(100, host_cpus() * 1000 - reserved_cpu_m)
    memory_mi = max(128, host_memory_bytes() // 2**20 - reserved_memory_mi)
    capacity = {"cpu": str(host_cpus()), "memory": f"{host_memory_bytes() // 2**20}Mi", "pods": str(MAX_PODS)}
    allocatable = {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi", "pods": str(MAX_PODS)}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": host_labels(name, labels_file)},
        "spec": {"taints": [parse_taint(taint) for taint in taints]} if taints else {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": RESOURCE_LIMITS, "status": "True", **limits_condition}],
            "nodeInfo": {
                "containerRuntimeVersion": "podway-process://1",
                "operatingSystem": platform.system(),
            },
        },
    }
    gpus = gpus_from_nvml()
    if gpus is None and devices_file is not None:
        gpus = gpus_from_file(devices_file)
    if gpus is None:
        log.info("no NVML driver and no device file: %s registers no GPUs", name)
    return [node, device_slice(name, gpus)] if gpus else [node]
