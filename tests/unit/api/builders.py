"""Builders of manifest documents (plain dicts, as a user writes them) for the API tests."""

from __future__ import annotations

import copy
from typing import Any

from libs.api.manifests import validate_document


def merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of `base` with `changes` merged in (nested dicts merged, anything else replaced)."""
    result = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def make_workload(name: str = "llm-train", namespace: str = "ml", **spec: Any) -> dict[str, Any]:
    templates = spec.pop(
        "podGroupTemplates", [{"name": "worker", "schedulingPolicy": {"gang": {"minCount": 16}}}]
    )
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podGroupTemplates": templates, **spec},
    }


def make_template(name: str = "worker", **fields: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": 2}}, **fields}


def make_pod_group(name: str = "llm-train-worker-0", namespace: str = "ml", **spec: Any) -> dict[str, Any]:
    base_spec: dict[str, Any] = {
        "podGroupTemplateRef": {"workload": {"workloadName": "llm-train", "podGroupTemplateName": "worker"}},
        "schedulingPolicy": {"gang": {"minCount": 16}},
    }
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {**base_spec, **spec},
    }


def make_container(name: str = "trainer", **resources: Any) -> dict[str, Any]:
    return {"name": name, "image": "registry.example.com/trainer:v1", "resources": resources}


def make_pod(name: str = "llm-train-worker-0-3", namespace: str = "ml", **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [make_container(requests={"cpu": "16", "memory": "64Gi"})])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": containers, **spec},
    }


def make_job(
    name: str = "llm-train",
    namespace: str = "ml",
    *,
    parallelism: int | None = 4,
    completions: int | None = 4,
    completion_mode: str | None = "Indexed",
    annotations: dict[str, str] | None = None,
    template_spec: dict[str, Any] | None = None,
    template_metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": template_metadata or {"labels": {"app": "llm-train"}},
            "spec": template_spec
            or {"restartPolicy": "Never", "containers": [make_container(requests={"cpu": "16"})]},
        }
    }
    for key, value in (
        ("parallelism", parallelism),
        ("completions", completions),
        ("completionMode", completion_mode),
    ):
        if value is not None:
            spec[key] = value
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def make_priority_class(name: str = "high-priority", value: int = 1000, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def make_node(name: str = "node-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.example.com/rack": "r07"}},
        "spec": spec,
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi"}},
    }


def make_device_class(name: str = "gpu.example.com", *expressions: str, **spec: Any) -> dict[str, Any]:
    selectors = [
        {"cel": {"expression": expression}} for expression in expressions or (f'device.driver == "{name}"',)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors, **spec},
    }


def make_request(name: str = "gpus", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.example.com", **exactly}}


def make_claim_template(
    name: str = "two-gpus-same-numa",
    namespace: str = "ml",
    requests: list[dict[str, Any]] | None = None,
    constraints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests if requests is not None else [make_request(count=2)]}
    if constraints is not None:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": devices}},
    }


def make_device(name: str = "gpu-0", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": "H200"}, "numaNode": {"int": 0}},
        "capacity": {"memory": {"value": "141Gi"}},
        **fields,
    }


def make_slice(
    name: str = "node-a-gpu.example.com", devices: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    base: dict[str, Any] = {
        "driver": "gpu.example.com",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": devices if devices is not None else [make_device()],
    }
    if not {"nodeName", "nodeSelector", "allNodes"} & spec.keys():
        base["nodeName"] = "node-a"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {**base, **spec},
    }


def error_lines(doc: dict[str, Any], **kwargs: Any) -> list[str]:
    """The `path: error` lines validate_document reports for a document."""
    return [str(error) for error in validate_document(doc, **kwargs).errors]
