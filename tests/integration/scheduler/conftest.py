"""The scheduling stack in-process: admission, scheduler and node agent on a real nats-server and database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.messaging.conftest import js  # noqa: F401  (a fixture of these tests too)
from tests.support import eventually

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
CLUSTER_SMALL = EXAMPLES / "cluster-small.yaml"


def example(name: str) -> list[dict[str, Any]]:
    return load_documents((EXAMPLES / name).read_text())


@dataclass
class Stack:
    client: PodwayClient
    admission: AdmissionService
    scheduler: SchedulerService
    agent: NodeAgentService
    agent_clock: FakeClock
    settings: PodwaySettings


@pytest.fixture
async def stack(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    """The 64-node cluster of cluster-small.yaml registered by the node agent, the GPU DeviceClass applied,
    and the scheduler leading. The node agent runs on a clock the test moves."""
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=5
    )
    agent_clock = FakeClock()
    admission = AdmissionService(settings)
    await admission.start()
    agent = NodeAgentService(
        NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL), clock=agent_clock
    )
    scheduler = SchedulerService(settings)
    async with PodwayClient(nats_url, timeout_s=30) as client:
        await client.apply(example("02-dra.yaml"))
        await agent.start()
        await scheduler.start()
        await eventually(lambda: _nodes_known(scheduler), bool, timeout_s=20)
        try:
            yield Stack(client, admission, scheduler, agent, agent_clock, settings)
        finally:
            await scheduler.stop()
            await agent.stop()
            await admission.stop()


async def _nodes_known(scheduler: SchedulerService) -> bool:
    world = scheduler.world
    return world is not None and len(world.snapshot) == 64
