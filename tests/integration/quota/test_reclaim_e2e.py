"""Quotas end to end on a real nats-server and database (SQLite and PostgreSQL): admission, scheduler,
preemptor and node agent on the 64-node cluster of cluster-small.yaml (512 GPUs), shared by the two teams of
deploy/examples/11-two-teams.yaml. Team llm borrows all vision lends; vision takes its share back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from libs.client.client import PodwayClient
from libs.core.invariants.quotas import gangs_hold_their_quota, queues_within_their_limits, quota_holdings
from libs.db.run_records import load_records
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.preemptor.app import PreemptorService
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.support import eventually

LLM_GANGS = [f"llm-{i}" for i in range(7)]
"""7 gangs of 64 GPUs: llm's 320 nominal and the 128 vision lends, every GPU the cohort lets it use."""
NOT_ENOUGH = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200"
)


def gang(name: str, namespace: str, pods: int, priority_class: str) -> list[dict[str, Any]]:
    """A Workload, its PodGroup and `pods` pods of 8 GPUs, running until evicted."""
    template = {
        "name": "worker",
        "schedulingPolicy": {"gang": {"minCount": pods}},
        "priorityClassName": priority_class,
    }
    group_spec = {
        "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "worker"}},
        "schedulingPolicy": {"gang": {"minCount": pods}},
        "priorityClassName": priority_class,
    }
    container = {
        "name": "trainer",
        "image": "registry.example.com/trainer:v1",
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}},
    }
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"podGroupTemplates": [template]},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": group_spec,
        },
        *(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "namespace": namespace},
                "spec": {
                    "schedulingGroup": {"podGroupName": name},
                    "priorityClassName": priority_class,
                    "containers": [container],
                },
            }
            for i in range(pods)
        ),
    ]


class Teams:
    def __init__(self, client: PodwayClient) -> None:
        self.client = client

    async def pods(self, namespace: str, group: str) -> list[dict[str, Any]]:
        pods = await self.client.get("Pod", namespace=namespace)
        return [p for p in pods if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group]

    async def running(self, namespace: str, group: str, count: int) -> list[dict[str, Any]]:
        pods = await eventually(
            lambda: self.pods(namespace, group),
            lambda pods: sum(_phase(p) == "Running" for p in pods) == count,
            timeout_s=60,
        )
        assert sum(_phase(p) == "Running" for p in pods) == count, f"{namespace}/{group} is not running"
        return pods

    async def story(self, uid: str) -> list[dict[str, Any]]:
        return (await self.client.events(correlation_id=uid)).events

    async def conditions(self, namespace: str, group: str) -> dict[str, dict[str, Any]]:
        (found,) = await self.client.get("PodGroup", group, namespace=namespace)
        return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}


def _phase(pod: dict[str, Any]) -> str | None:
    return (pod.get("status") or {}).get("phase")


@pytest.fixture
async def teams(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Teams]:
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=5
    )
    admission = AdmissionService(settings)
    await admission.start()
    agent = NodeAgentService(
        NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL), clock=FakeClock()
    )
    scheduler, preemptor = SchedulerService(settings), PreemptorService(settings)
    try:
        async with PodwayClient(nats_url, timeout_s=30) as client:
            await client.apply(example("01-priorityclasses.yaml") + example("11-two-teams.yaml"))
            await agent.start()
            await scheduler.start()
            await preemptor.start()
            await eventually(lambda: _ready(scheduler, preemptor), bool, timeout_s=20)
            try:
                yield Teams(client)
            finally:
                await preemptor.stop()
                await scheduler.stop()
                await agent.stop()
    finally:
        await admission.stop()


async def _ready(scheduler: SchedulerService, preemptor: PreemptorService) -> bool:
    return (
        scheduler.world is not None
        and len(scheduler.world.snapshot) == 64
        and preemptor.world is not None
        and len(preemptor.world.cluster.snapshot) == 64
    )


async def test_vision_reclaims_what_llm_borrowed_and_only_a_borrowed_gang_is_evicted(
    teams: Teams, database_url: str
) -> None:
    # 1. llm fills what the cohort lets it use with low-priority gangs; one more waits for quota, saying why.
    for name in LLM_GANGS:
        await teams.client.apply(gang(name, "llm", 8, "batch"))
    for name in LLM_GANGS:
        await teams.running("llm", name, 8)
    await teams.client.apply(gang("llm-extra", "llm", 8, "batch"))
    waiting = await eventually(
        lambda: teams.conditions("llm", "llm-extra"), lambda found: "QuotaReserved" in found, timeout_s=30
    )
    assert waiting["QuotaReserved"]["status"] == "False"
    assert waiting["QuotaReserved"]["reason"] == "Pending"
    assert waiting["QuotaReserved"]["message"].startswith(NOT_ENOUGH)
    assert waiting["PodGroupScheduled"]["reason"] == "SchedulingGated"
    assert "waiting for quota in ClusterQueue team-llm" in waiting["PodGroupScheduled"]["message"]
    running = {name: {p["metadata"]["uid"] for p in await teams.pods("llm", name)} for name in LLM_GANGS}

    # 2. vision asks for 128 GPUs within its nominal quota: 64 are its own, 64 llm borrowed.
    await teams.client.apply(gang("vision-train", "vision", 16, "high-priority"))

    # 3. vision's gang binds; exactly one llm gang was evicted, whole: 64 of the GPUs llm borrowed are enough
    # (which one: the most recently admitted, then the first name; creation times are in seconds here).
    await teams.running("vision", "vision-train", 16)
    reserved = await eventually(
        lambda: teams.conditions("vision", "vision-train"),
        lambda found: found.get("QuotaReserved", {}).get("status") == "True",
        timeout_s=30,
    )
    assert reserved["QuotaReserved"]["status"] == "True"
    assert reserved["QuotaReserved"]["message"] == "Quota reserved in ClusterQueue team-vision"
    evicted = []
    for name in LLM_GANGS:
        phases = {_phase(p) for p in await teams.pods("llm", name) if p["metadata"]["uid"] in running[name]}
        if phases != {"Running"}:
            evicted.append(name)
    assert len(evicted) == 1
    (group,) = await teams.client.get("PodGroup", evicted[0], namespace="llm")
    story = await eventually(
        lambda: teams.story(group["metadata"]["uid"]),
        lambda events: any(e["type"] == "pods.evicted" for e in events),
        timeout_s=30,
    )
    (eviction,) = [e for e in story if e["type"] == "pods.evicted"]
    assert eviction["payload"]["message"].startswith("Preempted to accommodate a workload (UID: ")
    assert eviction["payload"]["message"].endswith("due to reclamation within the cohort")
    assert len(eviction["payload"]["pods"]) == 8
    assert not any(_phase(p) == "Running" for p in await teams.pods("llm", "llm-extra"))

    # 4. podway check's quota promises hold over what the run stored.
    records = await load_records(database_url)
    holds = {binding.pod_uid: binding.node_name for binding in records.bindings}
    ledger, holdings, labels = quota_holdings(records.objects, holds)
    keys = {holding.key for holding in holdings}
    assert "vision/vision-train" in keys
    assert len({key for key in keys if key.startswith("llm/")}) >= len(LLM_GANGS) - 1
    assert queues_within_their_limits(ledger, holdings, labels) == []
    assert gangs_hold_their_quota(ledger, holdings, labels) == []
