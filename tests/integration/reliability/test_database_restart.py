"""The database restarting under the services: the test's own PostgreSQL cluster killed (SIGKILL, as a crash)
mid-load and started again. The services reconnect without a restart of their own, the leased scheduler
keeps or retakes its lease, and every gang admitted before and after the crash runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from libs.client.client import PodwayClient
from libs.db import migrate
from libs.messaging.broker import provision_streams
from libs.runtime.nats_server import EmbeddedNatsServer
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.reliability.private_postgres import PrivatePostgres, postgres_bin
from tests.integration.reliability.test_bus_restart import apply_retrying, running_pods
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.integration.scheduler.manifests import gang
from tests.support import eventually

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(postgres_bin() is None, reason="no PostgreSQL binaries to start a private cluster"),
]


@pytest.fixture
def cluster() -> Iterator[PrivatePostgres]:
    database = PrivatePostgres.create()
    try:
        yield database
    finally:
        database.remove()


@pytest.fixture
async def stack(
    cluster: PrivatePostgres, tmp_path: Path
) -> AsyncIterator[tuple[PodwayClient, SchedulerService]]:
    await migrate.upgrade(cluster.url)
    server = EmbeddedNatsServer(data_dir=tmp_path / "nats").start()
    await provision_streams(server.url)
    settings = PodwaySettings(
        nats_url=server.url, database_url=cluster.url, data_dir=tmp_path, lease_seconds=5
    )
    admission = AdmissionService(settings)
    agent = NodeAgentService(
        NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL), clock=FakeClock()
    )
    scheduler = SchedulerService(settings)
    try:
        await admission.start()
        async with PodwayClient(server.url, timeout_s=30) as client:
            await client.apply(example("02-dra.yaml"))
            await agent.start()
            await scheduler.start()
            yield client, scheduler
    finally:
        await scheduler.stop()
        await agent.stop()
        await admission.stop()
        server.stop()


async def bound_count(client: PodwayClient) -> int:
    try:
        return len(await running_pods(client))
    except Exception:
        return -1


async def test_every_gang_runs_when_the_database_crashes_and_comes_back_mid_load(
    cluster: PrivatePostgres, stack: tuple[PodwayClient, SchedulerService]
):
    client, scheduler = stack
    await client.apply([m for i in range(3) for m in gang(f"before-{i}", 4, gpus=2)])

    cluster.kill()
    await asyncio.to_thread(cluster.start)

    await apply_retrying(client, [m for i in range(3) for m in gang(f"after-{i}", 4, gpus=2)])
    running = await eventually(lambda: bound_count(client), lambda n: n == 24, timeout_s=90)
    assert running == 24
    assert scheduler.connected()
    assert await eventually(lambda: _leading(scheduler), bool, timeout_s=30)


async def _leading(scheduler: SchedulerService) -> Any:
    return scheduler.leading
