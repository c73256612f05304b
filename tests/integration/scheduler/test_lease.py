"""One active scheduler: a standby takes over when the leader stops renewing, and a deposed leader's
writes are refused by the database."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient
from libs.db.errors import StaleEpochError
from libs.db.records import Fence, PodBinding
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually

LEASE_SECONDS = 3.0


async def bound_epochs(client: PodwayClient, group: str) -> list[int]:
    story = (await client.events(podgroup=f"{NAMESPACE}/{group}")).events
    return [e["payload"]["epoch"] for e in story if e["type"] == "pods.bound"]


async def test_a_standby_takes_over_when_the_leader_stops_renewing_and_the_old_epoch_is_refused(
    nats_url, database_url, tmp_path
):
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=LEASE_SECONDS
    )
    clock = FakeClock()
    admission = AdmissionService(settings)
    await admission.start()
    first = SchedulerService(settings, clock=clock, holder="first")
    standby = SchedulerService(settings.model_copy(update={"instance": "1"}), clock=clock, holder="standby")
    try:
        async with PodwayClient(nats_url, timeout_s=30) as client:
            await client.apply(example("02-dra.yaml") + load_documents(CLUSTER_SMALL.read_text()))
            await first.start()
            await eventually(lambda: _true(first.leading), bool)
            await standby.start()
            await client.apply(gang("before", 4))
            assert await eventually(lambda: bound_epochs(client, "before"), bool) == [1]

            # Time moves, but less than a lease: the leader renews and the standby waits.
            for _ in range(2):
                clock.advance(timedelta(seconds=LEASE_SECONDS / 2))
                await asyncio.sleep(first.elector.renew_every_s * 1.5)
            assert first.leading
            assert not standby.leading

            # The leader stops renewing (as if its process froze or died) and its lease lapses.
            stale = first.elector.fence
            await first.stop(release_lease=False)
            clock.advance(timedelta(seconds=LEASE_SECONDS + 0.1))
            started = time.monotonic()
            await eventually(lambda: _true(standby.leading), bool, timeout_s=10)
            takeover_s = time.monotonic() - started

            await client.apply(gang("after", 4))
            assert await eventually(lambda: bound_epochs(client, "after"), bool) == [2]
            print(f"standby took over {takeover_s * 1000:.0f} ms (wall) after the lease lapsed")

            assert stale is not None
            await _assert_stale_epoch_is_refused(standby, stale)
    finally:
        await standby.stop()
        await first.stop()
        await admission.stop()


async def _assert_stale_epoch_is_refused(service: SchedulerService, stale: Fence) -> None:
    binding = PodBinding("a-pod-uid", "zone-0-b0-r0-n00", None, service.clock())
    async with service.plain_uow() as uow:
        with pytest.raises(StaleEpochError):
            await uow.bindings.bind(binding, fence=stale)
    async with service.plain_uow() as uow:
        assert await uow.bindings.get("a-pod-uid") is None


async def _true(value: bool) -> bool:
    return value
