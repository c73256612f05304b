"""Manifests for the scheduling tests, the way a user writes them."""

from __future__ import annotations

from typing import Any

NAMESPACE = "ml"


def gang(
    name: str,
    size: int,
    *,
    gpus: int = 1,
    topology_key: str | None = None,
    run_seconds: float | None = None,
    claims: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """A Workload and one PodGroup run of it with minCount `size`, and its `size` pods, each asking `gpus`
    GPUs, 8 CPUs and 64 Gi (the PodGroup takes its policy from the Workload's template at admission)."""
    policy: dict[str, Any] = {"name": "worker", "schedulingPolicy": {"gang": {"minCount": size}}}
    if topology_key:
        policy["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if claims:
        policy["resourceClaims"] = claims
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}},
        "spec": {"podGroupTemplates": [policy]},
    }
    spec = {
        "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "worker"}},
        **{key: value for key, value in policy.items() if key != "name"},
    }
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}},
        "spec": spec,
    }
    return [
        workload,
        group,
        *(pod(f"{name}-{i}", group=name, gpus=gpus, run_seconds=run_seconds) for i in range(size)),
    ]


def pod(
    name: str,
    *,
    group: str | None = None,
    gpus: int = 1,
    run_seconds: float | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    annotations = {"podway.io/run-seconds": str(run_seconds)} if run_seconds is not None else {}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "trainer",
                "image": "registry.example.com/trainer:v1",
                "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}},
            }
        ]
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": spec,
    }
