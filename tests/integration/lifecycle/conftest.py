"""Admission, scheduler and node agent in-process on a real nats-server and database, on the 64-node cluster
of cluster-small.yaml; the node agent runs on a clock the test moves."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
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
from tests.integration.scheduler.conftest import CLUSTER_SMALL, Stack
from tests.support import eventually

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"


def example(name: str) -> list[dict[str, Any]]:
    return load_documents((EXAMPLES / name).read_text())


@contextlib.asynccontextmanager
async def running_stack(
    nats_url: str, database_url: str, data_dir: Path, *, first: list[dict[str, Any]]
) -> AsyncIterator[Stack]:
    """The stack with `first` applied before the node agent registers its cluster."""
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=data_dir, lease_seconds=5
    )
    agent_clock = FakeClock()
    admission = AdmissionService(settings)
    await admission.start()
    agent = NodeAgentService(
        NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL), clock=agent_clock
    )
    scheduler = SchedulerService(settings)
    try:
        async with PodwayClient(nats_url, timeout_s=30) as client:
            if first:
                await client.apply(first)
            await agent.start()
            await scheduler.start()
            await eventually(lambda: _nodes_known(scheduler), bool, timeout_s=20)
            try:
                yield Stack(client, admission, scheduler, agent, agent_clock, settings)
            finally:
                await scheduler.stop()
                await agent.stop()
    finally:
        await admission.stop()


async def _nodes_known(scheduler: SchedulerService) -> bool:
    world = scheduler.world
    return world is not None and len(world.snapshot) == 64


@pytest.fixture
async def stack(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    """The stack with the example PriorityClasses applied."""
    async with running_stack(
        nats_url, database_url, tmp_path, first=example("01-priorityclasses.yaml") + example("02-dra.yaml")
    ) as stack:
        yield stack


@pytest.fixture
async def fresh_stack(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    """The stack as a new user starts it: nothing applied before the node agent registers."""
    async with running_stack(nats_url, database_url, tmp_path, first=[]) as stack:
        yield stack
