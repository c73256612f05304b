"""Builders for scheduler-service tests: manifests as admission stores them, turned into `ApiObject`s."""

from __future__ import annotations

import uuid
from typing import Any

from libs.api.manifests import load_documents
from libs.cluster.generator import ClusterShape, generate_cluster
from libs.core.scheduling.objects import ApiObject

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "extendedResourceName": "nvidia.com/gpu",
    },
}


FABRIC_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "fabric.example.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "fabric.example.com"'}}]},
}
RACK_FABRIC_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "rack-fabric", "namespace": "ml"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "fabric", "exactly": {"deviceClassName": "fabric.example.com"}}]
            }
        }
    },
}


def stored(manifest: dict[str, Any], *, uid: str | None = None) -> ApiObject:
    """An object as admission would store it: with a uid and a creation time."""
    metadata = {"uid": uid or str(uuid.uuid4()), "creationTimestamp": "2026-11-30T12:00:00Z"}
    metadata.update(manifest.get("metadata") or {})
    return ApiObject.from_manifest({**manifest, "metadata": metadata})


def cluster(shape: ClusterShape | None = None) -> list[ApiObject]:
    """The GPU and fabric DeviceClasses, then every Node and ResourceSlice of a generated cluster (a
    fabric device per rack), and the `rack-fabric` ResourceClaimTemplate of namespace `ml`."""
    docs = [
        GPU_CLASS,
        FABRIC_CLASS,
        *generate_cluster(shape or ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2)),
        RACK_FABRIC_TEMPLATE,
    ]
    return [stored(doc) for doc in docs]


def workload(
    name: str = "train",
    *,
    namespace: str = "ml",
    annotations: dict[str, str] | None = None,
    job_owned: bool = False,
) -> ApiObject:
    spec: dict[str, Any] = {
        "podGroupTemplates": [{"name": "worker", "schedulingPolicy": {"gang": {"minCount": 1}}}]
    }
    if job_owned:
        spec["controllerRef"] = {"apiGroup": "batch", "kind": "Job", "name": name}
    return stored(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": spec,
        }
    )


def podgroup(
    name: str,
    *,
    min_count: int | None = 4,
    namespace: str = "ml",
    workload_name: str | None = "train",
    topology_key: str | None = None,
    priority: int = 0,
    annotations: dict[str, str] | None = None,
    claims: list[dict[str, str]] | None = None,
    status: dict[str, Any] | None = None,
    parent: str | None = None,
) -> ApiObject:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}},
        "priority": priority,
    }
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if workload_name:
        spec["podGroupTemplateRef"] = {
            "workload": {"workloadName": workload_name, "podGroupTemplateName": "worker"}
        }
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if claims:
        spec["resourceClaims"] = claims
    manifest: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": spec,
    }
    if status:
        manifest["status"] = status
    return stored(manifest)


def composite(
    name: str,
    *,
    min_group_count: int | None = 2,
    topology_key: str | None = None,
    priority: int = 0,
    disruption: str | None = None,
    namespace: str = "ml",
) -> ApiObject:
    """A CompositePodGroup (v1alpha3) of a Workload `train`'s composite template `job`."""
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": "train", "templateName": "job"},
        "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}}
        if min_group_count is not None
        else {"basic": {}},
        "priority": priority,
    }
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if disruption:
        spec["disruptionMode"] = {disruption: {}}
    return stored(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def pod(
    name: str,
    *,
    group: str | None = None,
    namespace: str = "ml",
    gpus: int = 1,
    cpu: str = "8",
    memory: str = "64Gi",
    node_selector: dict[str, str] | None = None,
    priority: int = 0,
    phase: str = "Pending",
    claims: list[dict[str, str]] | None = None,
    run_seconds: float | None = None,
) -> ApiObject:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "priority": priority,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if claims:
        spec["resourceClaims"] = claims
    annotations = {"podway.io/run-seconds": str(run_seconds)} if run_seconds is not None else {}
    return stored(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def gang(name: str, size: int, **pod_args: Any) -> list[ApiObject]:
    return [pod(f"{name}-{index}", group=name, **pod_args) for index in range(size)]


def documents(text: str) -> list[ApiObject]:
    return [stored(doc) for doc in load_documents(text)]


def two_gpus_template() -> ApiObject:
    """A ResourceClaimTemplate for two whole GPUs."""
    request = {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}
    return stored(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two-gpus", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        }
    )


def flavor(name: str = "h200", labels: dict[str, str] | None = None) -> dict[str, Any]:
    labels = labels if labels is not None else {"topology.kubernetes.io/zone": "zone-0"}
    return {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels}}


def cluster_queue(
    name: str,
    gpus: int,
    *,
    cohort: str | None = None,
    reclaim: str | None = None,
    flavor_name: str = "h200",
    strategy: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor_name,
                        "resources": [
                            {"name": "cpu", "nominalQuota": "1000"},
                            {"name": "memory", "nominalQuota": "100Ti"},
                            {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
                        ],
                    }
                ],
            }
        ]
    }
    if cohort:
        spec["cohortName"] = cohort
    if reclaim:
        spec["preemption"] = {"reclaimWithinCohort": reclaim}
    if strategy:
        spec["queueingStrategy"] = strategy
    return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, queue: str) -> dict[str, Any]:
    return {
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {"clusterQueue": queue},
    }


def quota_objects(*docs: dict[str, Any]) -> list:
    return [stored({"apiVersion": "kueue.x-k8s.io/v1beta2", **doc}) for doc in docs]


def team_gang(name: str, namespace: str, pods: int, *, gpus: int = 8, priority: int = 0) -> list:
    group = podgroup(name, min_count=pods, namespace=namespace, workload_name=None, priority=priority)
    return [group, *gang(name, pods, namespace=namespace, gpus=gpus, priority=priority)]
