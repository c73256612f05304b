"""The two teams of deploy/examples/11-two-teams.yaml on the 64 nodes of cluster-small.yaml (512 GPUs), with
admission, scheduler, preemptor and node agent on a real nats-server and database: gangs to apply and what
to read of them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from libs.client.client import PodwayClient
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.preemptor.app import PreemptorService
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.support import eventually


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
            lambda pods: sum(phase(p) == "Running" for p in pods) == count,
            timeout_s=60,
        )
        assert sum(phase(p) == "Running" for p in pods) == count, f"{namespace}/{group} is not running"
        return pods

    async def story(self, uid: str) -> list[dict[str, Any]]:
        return (await self.client.events(correlation_id=uid)).events

    async def conditions(self, namespace: str, group: str) -> dict[str, dict[str, Any]]:
        (found,) = await self.client.get("PodGroup", group, namespace=namespace)
        return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}


def phase(pod: dict[str, Any]) -> str | None:
    return (pod.get("status") or {}).get("phase")


@asynccontextmanager
async def running_teams(
    nats_url: str, database_url: str, tmp_path: Path, **overrides: Any
) -> AsyncIterator[Teams]:
    """The services started (`overrides`: settings), the example applied, until every service sees the 64
    nodes."""
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=5, **overrides
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
