"""On PostgreSQL, fencing holds under real concurrency: the lease row lock orders a takeover and a binding."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import text

from libs.db.errors import StaleEpochError
from libs.db.records import Fence, PodBinding
from libs.db.uow import SqlAlchemyUnitOfWork
from tests.conftest import FakeClock
from tests.integration.db.builders import T0, make_pod

pytestmark = pytest.mark.postgres
TTL = timedelta(seconds=15)
UowFactory = Callable[[], SqlAlchemyUnitOfWork]


async def _wait_until_a_backend_waits_on_a_lock(uow_factory: UowFactory) -> None:
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    for _ in range(500):
        async with uow_factory() as uow:
            if (await uow.session.execute(query)).scalar_one() > 0:
                return
        await asyncio.sleep(0.01)
    raise AssertionError("no transaction ever waited on the lease row lock")


async def _bind(uow_factory: UowFactory, pod_uid: str, fence: Fence) -> None:
    async with uow_factory() as uow:
        await uow.bindings.bind(PodBinding(pod_uid, "node-a", "pg-1", T0), fence=fence)
        await uow.commit()


async def _acquire(uow: SqlAlchemyUnitOfWork, holder: str, clock: FakeClock) -> Fence:
    lease = await uow.leases.acquire_or_renew("scheduler", holder, clock.now, TTL)
    assert lease is not None
    return lease.fence


async def test_binding_that_waits_for_an_uncommitted_takeover_is_refused(
    pg_uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with pg_uow_factory() as uow:
        old = await _acquire(uow, "scheduler-a", fake_clock)
        await uow.commit()
    fake_clock.advance(TTL * 2)

    async with pg_uow_factory() as takeover:
        assert await _acquire(takeover, "scheduler-b", fake_clock) == Fence("scheduler", 2)
        binding = asyncio.create_task(_bind(pg_uow_factory, "pod-1", old))
        await _wait_until_a_backend_waits_on_a_lock(pg_uow_factory)
        await takeover.commit()

    with pytest.raises(StaleEpochError):
        await binding


async def test_takeover_waits_for_the_old_leaders_binding_to_commit(
    pg_uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with pg_uow_factory() as uow:
        old = await _acquire(uow, "scheduler-a", fake_clock)
        await uow.objects.create_many([make_pod("pod-1")])
        await uow.commit()
    fake_clock.advance(TTL * 2)

    async with pg_uow_factory() as leader:
        await leader.bindings.bind(PodBinding("pod-1", "node-a", "pg-1", T0), fence=old)
        takeover = asyncio.create_task(_take_over(pg_uow_factory, fake_clock))
        await _wait_until_a_backend_waits_on_a_lock(pg_uow_factory)
        await leader.commit()

    assert await takeover == Fence("scheduler", 2)
    async with pg_uow_factory() as uow:
        assert await uow.bindings.get("pod-1") is not None


async def _take_over(uow_factory: UowFactory, clock: FakeClock) -> Fence:
    async with uow_factory() as uow:
        fence = await _acquire(uow, "scheduler-b", clock)
        await uow.commit()
    return fence
