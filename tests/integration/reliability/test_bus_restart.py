"""The bus restarting under the services: nats-server killed (SIGKILL) mid-load and started again on the same
port with the same JetStream store. Every service reconnects without a restart of its own, the relays publish
what accumulated meanwhile, and every gang admitted before, during and after the outage runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from libs.client.client import PodwayClient
from libs.events.catalogue import EVENTS_STREAM
from libs.messaging.broker import provision_streams
from libs.messaging.rpc import RpcUnavailable
from libs.runtime.nats_server import EmbeddedNatsServer
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually


@dataclass
class Bus:
    server: EmbeddedNatsServer

    def kill(self) -> None:
        assert self.server.process is not None
        self.server.process.kill()
        self.server.process.wait()

    def start_again(self) -> None:
        self.server.start()


@dataclass
class Services:
    client: PodwayClient
    bus: Bus
    admission: AdmissionService
    scheduler: SchedulerService
    agent: NodeAgentService


@pytest.fixture
async def services(database_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    server = EmbeddedNatsServer(data_dir=tmp_path / "nats").start()
    await provision_streams(server.url)
    settings = PodwaySettings(
        nats_url=server.url, database_url=database_url, data_dir=tmp_path, lease_seconds=5
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
            yield Services(client, Bus(server), admission, scheduler, agent)
    finally:
        await scheduler.stop()
        await agent.stop()
        await admission.stop()
        server.stop()


async def running_pods(client: PodwayClient) -> list[dict[str, Any]]:
    pods = await client.get("Pod", namespace=NAMESPACE)
    return [pod for pod in pods if (pod.get("status") or {}).get("phase") == "Running"]


async def apply_retrying(client: PodwayClient, manifests: list[dict[str, Any]]) -> None:
    """A user applying while the bus is down gets a retryable error and tries again."""
    for _ in range(200):
        try:
            reply = await client.apply(manifests)
        except Exception:
            await asyncio.sleep(0.1)
            continue
        assert all(result.outcome != "rejected" for result in reply.results)
        return
    raise AssertionError("apply never succeeded")


async def bus_down(services: Services) -> bool:
    return not services.client.broker.connection.is_connected


async def test_every_gang_runs_when_the_bus_is_killed_and_started_again_mid_load(services: Services):
    before = [m for i in range(4) for m in gang(f"before-{i}", 4, gpus=2)]
    await services.client.apply(before)

    services.bus.kill()
    assert await eventually(lambda: bus_down(services), bool)
    # A request while the bus is away is refused at once, with an error that says to retry: never a hang.
    with pytest.raises(RpcUnavailable, match="retry"):
        await services.client.apply(gang("refused", 2))
    # The services are reconnecting, not gone: they keep beating.
    assert services.admission.connected()
    assert services.scheduler.connected()
    assert services.agent.connected()
    services.bus.start_again()

    await apply_retrying(services.client, [m for i in range(4) for m in gang(f"after-{i}", 4, gpus=2)])

    pods = await eventually(lambda: running_pods(services.client), lambda p: len(p) == 32, timeout_s=60)
    assert len(pods) == 32


async def test_a_service_whose_bus_connection_is_closed_for_good_says_it_is_not_alive(services: Services):
    assert services.admission.connected()

    await services.admission.broker.connection.close()

    assert not services.admission.connected()


async def test_every_gang_is_decided_when_the_events_stream_is_deleted_mid_run(services: Services):
    """JetStream is transport and PostgreSQL the truth: events lost with the stream are re-derived."""
    await services.client.apply([m for i in range(3) for m in gang(f"early-{i}", 4, gpus=2)])
    js = services.client.broker.connection.jetstream()

    await js.delete_stream(EVENTS_STREAM)
    await services.client.apply([m for i in range(3) for m in gang(f"lost-{i}", 4, gpus=2)])
    await provision_streams(services.bus.server.url)  # what `podway up` (or `podway migrate`) does
    await services.client.apply([m for i in range(2) for m in gang(f"late-{i}", 4, gpus=2)])

    pods = await eventually(lambda: running_pods(services.client), lambda p: len(p) == 32, timeout_s=60)
    assert len(pods) == 32
