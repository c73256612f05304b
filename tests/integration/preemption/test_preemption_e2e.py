"""Preemption end to end on a real nats-server and PostgreSQL: admission, scheduler, preemptor and node
agent (and the DRA allocator, for claims) on the 64-node cluster of deploy/examples/cluster-small.yaml (8
racks of 8 nodes of 8 GPUs)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.dra_allocator.app import DraAllocatorService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.preemptor.app import PreemptorService
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.dra.test_dra_e2e import SHARED_SLICE
from tests.integration.messaging.conftest import js  # noqa: F401  (a fixture of these tests too)
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.support import eventually

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)

NAMESPACE = "ml"
RACK = "topology.example.com/rack"
SCAVENGER = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: scavenger}
value: 10
description: Work that gives way first.
"""


def batch_job(name: str, priority_class: str) -> dict[str, Any]:
    """A gang Job of 8 pods of 8 GPUs in one rack: it fills a rack."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {"podway.io/topology-key": RACK}},
        "spec": {
            "completionMode": "Indexed",
            "parallelism": 8,
            "completions": 8,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "priorityClassName": priority_class,
                    "restartPolicy": "Never",
                    "containers": [_container()],
                }
            },
        },
    }


def rack_gang(name: str, priority_class: str, *, run_seconds: float) -> list[dict[str, Any]]:
    """A Workload, its PodGroup and 8 pods of 8 GPUs that must share a rack."""
    template = {
        "name": "worker",
        "schedulingPolicy": {"gang": {"minCount": 8}},
        "schedulingConstraints": {"topology": [{"key": RACK}]},
        "priorityClassName": priority_class,
    }
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"podGroupTemplates": [template]},
    }
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "worker"}},
            "schedulingPolicy": {"gang": {"minCount": 8}},
            "schedulingConstraints": {"topology": [{"key": RACK}]},
            "priorityClassName": priority_class,
        },
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": NAMESPACE,
                "annotations": {"podway.io/run-seconds": str(run_seconds)},
            },
            "spec": {
                "schedulingGroup": {"podGroupName": name},
                "priorityClassName": priority_class,
                "containers": [_container()],
            },
        }
        for i in range(8)
    ]
    return [workload, group, *pods]


def _container() -> dict[str, Any]:
    return {
        "name": "trainer",
        "image": "registry.example.com/trainer:v1",
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}},
    }


def gpu_share(cores: str) -> dict[str, Any]:
    """A ResourceClaimTemplate for a share of a shareable GPU."""
    exactly = {
        "deviceClassName": "gpu.example.com",
        "selectors": [{"cel": {"expression": "device.allowMultipleAllocations"}}],
        "capacity": {"requests": {"cores": cores}},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"gpu-share-{cores}", "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def sharing_pod(name: str, priority_class: str, cores: str) -> dict[str, Any]:
    """A pod without a PodGroup on the node of the shareable GPU, with a share of it."""
    container = {
        "name": "server",
        "image": "registry.example.com/server:v1",
        "resources": {"requests": {"cpu": "2", "memory": "16Gi"}, "claims": [{"name": "gpu"}]},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {"podway.io/run-seconds": "600"}},
        "spec": {
            "priorityClassName": priority_class,
            "nodeSelector": {"kubernetes.io/hostname": SHARED_SLICE["spec"]["nodeName"]},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"gpu-share-{cores}"}],
            "containers": [container],
        },
    }


class Stack:
    def __init__(self, client: PodwayClient, agent: NodeAgentService, clock: FakeClock) -> None:
        self.client, self.agent, self.clock = client, agent, clock
        self.settings: PodwaySettings | None = None

    async def pods(self, group: str) -> list[dict[str, Any]]:
        pods = await self.client.get("Pod", namespace=NAMESPACE)
        return [p for p in pods if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group]

    async def running(self, group: str, count: int = 8) -> list[dict[str, Any]]:
        return await eventually(
            lambda: self.pods(group),
            lambda pods: sum(_phase(p) == "Running" for p in pods) == count,
            timeout_s=30,
        )

    async def story(self, group: str) -> list[dict[str, Any]]:
        return (await self.client.events(podgroup=f"{NAMESPACE}/{group}")).events


def _phase(pod: dict[str, Any]) -> str | None:
    return pod.get("status", {}).get("phase")


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


@pytest.fixture
async def stack(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=5
    )
    clock = FakeClock()
    admission = AdmissionService(settings)
    await admission.start()
    agent = NodeAgentService(
        NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL), clock=clock
    )
    scheduler = SchedulerService(settings)
    preemptor = PreemptorService(settings)
    async with PodwayClient(nats_url, timeout_s=30) as client:
        await client.apply(example("01-priorityclasses.yaml") + load_documents(SCAVENGER))
        await client.apply(example("02-dra.yaml"))
        await agent.start()
        await scheduler.start()
        await preemptor.start()
        await eventually(lambda: _ready(scheduler, preemptor), bool, timeout_s=20)
        running = Stack(client, agent, clock)
        running.settings = settings
        try:
            yield running
        finally:
            await preemptor.stop()
            await scheduler.stop()
            await agent.stop()
            await admission.stop()


async def _ready(scheduler: SchedulerService, preemptor: PreemptorService) -> bool:
    return (
        scheduler.world is not None
        and len(scheduler.world.snapshot) == 64
        and preemptor.world is not None
        and len(preemptor.world.cluster.snapshot) == 64
    )


async def test_a_high_priority_rack_gang_preempts_exactly_the_cheapest_rack_and_binds_there(stack: Stack):
    # 1. Every rack full of low-priority Job gangs; batch-5 is the cheapest (scavenger, priority 10).
    jobs = [f"batch-{i}" for i in range(8)]
    await stack.client.apply(
        [batch_job(name, "scavenger" if name == "batch-5" else "batch") for name in jobs]
    )
    for name in jobs:
        await stack.running(f"{name}-worker-0")
    victim_pods = await stack.pods("batch-5-worker-0")
    victim_nodes = {p["spec"]["nodeName"] for p in victim_pods}
    victim_uids = {p["metadata"]["uid"] for p in victim_pods}
    (victim_group,) = await stack.client.get("PodGroup", "batch-5-worker-0", namespace=NAMESPACE)

    # 2. A high-priority rack gang arrives, and a batch-priority pod that would take any free node.
    await stack.client.apply(rack_gang("urgent", "high-priority", run_seconds=30))
    thief = rack_gang("thief", "batch", run_seconds=30)
    await stack.client.apply(thief)

    # 3. Exactly batch-5 is evicted, urgent binds on its nodes, the thief takes nothing.
    urgent = await stack.running("urgent")
    assert {p["spec"]["nodeName"] for p in urgent} == victim_nodes
    story = await stack.story("urgent")
    kinds = _types(story)
    for expected in (
        "preemption.requested",
        "preemption.victims_selected",
        "podgroup.nominated",
        "pods.bound",
        "podgroup.scheduled",
    ):
        assert expected in kinds, kinds
    assert kinds.index("preemption.victims_selected") < kinds.index("pods.bound")
    assert kinds.count("preemption.victims_selected") == 1
    (selected,) = [e for e in story if e["type"] == "preemption.victims_selected"]
    assert {v["uid"] for v in selected["payload"]["victims"]} == victim_uids
    assert [g["name"] for g in selected["payload"]["victim_groups"]] == ["batch-5-worker-0"]
    assert (
        selected["causation_id"] == next(e for e in story if e["type"] == "preemption.requested")["event_id"]
    )
    for name in jobs:
        if name != "batch-5":
            assert {_phase(p) for p in await stack.pods(f"{name}-worker-0")} == {"Running"}
    assert not any(p["spec"].get("nodeName") for p in await stack.pods("thief"))

    # 4. The victim's story says why; once its pods stopped its Job recreated the gang as a new PodGroup,
    # which waits (never reading PodGroupScheduled True while queued), and its failures do not count
    # against backoffLimit 0.
    victim_story = (await stack.client.events(correlation_id=victim_group["metadata"]["uid"])).events
    (evicted,) = [e for e in victim_story if e["type"] == "pods.evicted"]
    assert evicted["payload"]["reason"] == "PreemptionByScheduler"
    assert "preempted by ml/urgent (priority 1000)" in evicted["payload"]["message"]
    assert _types(victim_story).index("pods.failed") < _types(victim_story).index("object.deleted")
    recreated = await eventually(
        lambda: stack.pods("batch-5-worker-0"),
        lambda pods: len(pods) == 8 and not {p["metadata"]["uid"] for p in pods} & victim_uids,
    )
    assert {_phase(p) for p in recreated} <= {"Pending", None}
    (group,) = await stack.client.get("PodGroup", "batch-5-worker-0", namespace=NAMESPACE)
    assert group["metadata"]["uid"] != victim_group["metadata"]["uid"]
    scheduled = {c["type"]: c for c in (group.get("status") or {}).get("conditions") or []}
    assert scheduled.get("PodGroupScheduled", {}).get("status") != "True"
    assert not (group.get("status") or {}).get("placement", {}).get("domain")
    (job,) = await stack.client.get("Job", "batch-5", namespace=NAMESPACE)
    assert not any(c.get("type") == "Failed" for c in job.get("status", {}).get("conditions", []))

    # 5. Once urgent finishes and the thief is gone, the recreated gang binds.
    for obj in reversed(thief):
        await stack.client.delete(obj["kind"], obj["metadata"]["name"], namespace=NAMESPACE)
    stack.clock.advance(timedelta(seconds=31))
    stack.agent.wake()
    rebound = await stack.running("batch-5-worker-0")
    assert {p["spec"]["nodeName"] for p in rebound} == victim_nodes


@pytest.fixture
async def dra_stack(stack: Stack) -> AsyncIterator[Stack]:
    """The stack with the DRA allocator leading too."""
    assert stack.settings is not None
    allocator = DraAllocatorService(stack.settings)
    await allocator.start()
    await eventually(lambda: _allocating(allocator), bool, timeout_s=20)
    try:
        yield stack
    finally:
        await allocator.stop()


async def _allocating(allocator: DraAllocatorService) -> bool:
    return allocator.world is not None


async def test_a_standalone_pod_preempts_the_cheapest_share_of_a_gpu_and_binds_on_it(dra_stack: Stack):
    stack = dra_stack
    # 1. Two shares of one GPU's core: 400m (scavenger) and 300m (batch); 600m more would exceed it.
    await stack.client.apply([SHARED_SLICE, gpu_share("400m"), gpu_share("300m"), gpu_share("600m")])
    await stack.client.apply(
        [sharing_pod("cheap", "scavenger", "400m"), sharing_pod("dear", "batch", "300m")]
    )
    await eventually(lambda: _standalone(stack), lambda pods: _phases(pods, "cheap", "dear") == {"Running"})
    cheap = {p["metadata"]["name"]: p for p in await _standalone(stack)}["cheap"]

    # 2. A high-priority pod asks 600m of the same GPU: only cheap's share is to go.
    await stack.client.apply([sharing_pod("urgent", "high-priority", "600m")])

    pods = await eventually(
        lambda: _standalone(stack), lambda pods: _phases(pods, "urgent") == {"Running"}, timeout_s=30
    )
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert _phase(by_name["dear"]) == "Running"
    assert _phase(by_name.get("cheap") or {}) != "Running"
    story = (await stack.client.events(correlation_id=by_name["urgent"]["metadata"]["uid"])).events
    kinds = _types(story)
    assert kinds.index("preemption.requested") < kinds.index("preemption.victims_selected")
    assert kinds.index("podgroup.nominated") < kinds.index("pods.bound")
    (selected,) = [e for e in story if e["type"] == "preemption.victims_selected"]
    assert [v["uid"] for v in selected["payload"]["victims"]] == [cheap["metadata"]["uid"]]
    claims = {c["metadata"]["name"]: c for c in await stack.client.get("ResourceClaim", namespace=NAMESPACE)}
    (share,) = claims["urgent-gpu"]["status"]["allocation"]["devices"]["results"]
    assert share["device"] == "gpu-shared-0"


async def _standalone(stack: Stack) -> list[dict[str, Any]]:
    return [
        p for p in await stack.client.get("Pod", namespace=NAMESPACE) if not p["spec"].get("schedulingGroup")
    ]


def _phases(pods: list[dict[str, Any]], *names: str) -> set[str | None]:
    by_name = {p["metadata"]["name"]: p for p in pods}
    return {_phase(by_name[name]) if name in by_name else None for name in names}
