"""Single active writer: lease takeover bumps the epoch, and the database refuses stale-epoch writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from libs.db.errors import AlreadyBoundError, StaleEpochError
from libs.db.records import Fence, PodBinding
from libs.db.schema import pod_bindings
from libs.db.uow import SqlAlchemyUnitOfWork
from tests.conftest import FakeClock
from tests.integration.db.builders import T0, make_draft, make_pod

UowFactory = Callable[[], SqlAlchemyUnitOfWork]
TTL = timedelta(seconds=15)


def binding(pod_uid: str, node: str = "node-a") -> PodBinding:
    return PodBinding(pod_uid=pod_uid, node_name=node, podgroup_uid="pg-1", bound_at=T0)


async def create_pods(uow_factory: UowFactory, *uids: str) -> None:
    """Bindings refer to pods that exist."""
    async with uow_factory() as uow:
        await uow.objects.create_many([make_pod(uid) for uid in uids])
        await uow.commit()


async def acquire(uow_factory: UowFactory, holder: str, clock: FakeClock) -> Fence | None:
    async with uow_factory() as uow:
        lease = await uow.leases.acquire_or_renew("scheduler", holder, clock.now, TTL)
        await uow.commit()
    return lease.fence if lease else None


async def test_standby_takes_over_only_after_expiry_and_the_epoch_moves(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    assert await acquire(uow_factory, "scheduler-a", fake_clock) == Fence("scheduler", 1)
    assert await acquire(uow_factory, "scheduler-b", fake_clock) is None

    fake_clock.advance(TTL - timedelta(seconds=1))
    assert await acquire(uow_factory, "scheduler-a", fake_clock) == Fence("scheduler", 1)  # renewal
    fake_clock.advance(TTL - timedelta(seconds=1))
    assert await acquire(uow_factory, "scheduler-b", fake_clock) is None

    fake_clock.advance(timedelta(seconds=2))
    assert await acquire(uow_factory, "scheduler-b", fake_clock) == Fence("scheduler", 2)
    async with uow_factory() as uow:
        lease = await uow.leases.get("scheduler")
    assert lease is not None
    assert (lease.holder, lease.expires_at) == ("scheduler-b", fake_clock.now + TTL)


async def test_released_lease_is_taken_over_at_once(uow_factory: UowFactory, fake_clock: FakeClock) -> None:
    await acquire(uow_factory, "scheduler-a", fake_clock)
    async with uow_factory() as uow:
        await uow.leases.release("scheduler", "scheduler-a", fake_clock.now)
        await uow.commit()
    assert await acquire(uow_factory, "scheduler-b", fake_clock) == Fence("scheduler", 2)


async def test_deposed_leader_cannot_bind_a_pod(uow_factory: UowFactory, fake_clock: FakeClock) -> None:
    await create_pods(uow_factory, "pod-1")
    old = await acquire(uow_factory, "scheduler-a", fake_clock)
    fake_clock.advance(TTL * 2)
    new = await acquire(uow_factory, "scheduler-b", fake_clock)
    assert old is not None
    assert new is not None

    async with uow_factory() as uow:
        with pytest.raises(StaleEpochError):
            await uow.bindings.bind(binding("pod-1"), fence=old)
    async with uow_factory() as uow:
        await uow.bindings.bind(binding("pod-1"), fence=new)
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.bindings.get("pod-1") == binding("pod-1")


async def test_the_database_itself_refuses_a_stale_epoch_row(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    await acquire(uow_factory, "scheduler-a", fake_clock)
    row = {
        "pod_uid": "pod-1",
        "node_name": "n",
        "podgroup_uid": None,
        "lease_name": "scheduler",
        "bound_at": T0,
    }

    async with uow_factory() as uow:
        with pytest.raises(DBAPIError, match="podway: stale epoch"):
            await uow.session.execute(insert(pod_bindings).values({**row, "epoch": 7}))


async def test_a_pod_is_never_bound_twice(uow_factory: UowFactory, fake_clock: FakeClock) -> None:
    await create_pods(uow_factory, "pod-1", "pod-2")
    fence = await acquire(uow_factory, "scheduler-a", fake_clock)
    assert fence is not None
    async with uow_factory() as uow:
        await uow.bindings.bind(binding("pod-1", "node-a"), fence=fence)
        await uow.commit()

    async with uow_factory() as uow:
        with pytest.raises(AlreadyBoundError):
            await uow.bindings.bind(binding("pod-1", "node-b"), fence=fence)
        await uow.bindings.bind(binding("pod-2", "node-b"), fence=fence)  # the transaction is still usable
        await uow.commit()
    async with uow_factory() as uow:
        assert [b.pod_uid for b in await uow.bindings.list_for_podgroup("pg-1")] == ["pod-1", "pod-2"]
        assert [b.pod_uid for b in await uow.bindings.list_for_node("node-b")] == ["pod-2"]


async def test_fenced_unit_of_work_refuses_to_commit_after_a_takeover(
    db_session_factory: async_sessionmaker[AsyncSession], uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    old = await acquire(uow_factory, "scheduler-a", fake_clock)
    fake_clock.advance(TTL * 2)
    await acquire(uow_factory, "scheduler-b", fake_clock)

    async with SqlAlchemyUnitOfWork(db_session_factory, clock=fake_clock, fence=old) as uow:
        await uow.objects.upsert(make_draft())
        with pytest.raises(StaleEpochError):
            await uow.commit()
    async with uow_factory() as uow:
        assert await uow.objects.get("PodGroup", "ml", "train-0") is None


async def test_unbind_needs_the_current_epoch(uow_factory: UowFactory, fake_clock: FakeClock) -> None:
    await create_pods(uow_factory, "pod-1")
    old = await acquire(uow_factory, "scheduler-a", fake_clock)
    assert old is not None
    async with uow_factory() as uow:
        await uow.bindings.bind(binding("pod-1"), fence=old)
        await uow.commit()
    fake_clock.advance(TTL * 2)
    new = await acquire(uow_factory, "scheduler-b", fake_clock)
    assert new is not None

    async with uow_factory() as uow:
        with pytest.raises(StaleEpochError):
            await uow.bindings.unbind("pod-1", fence=old)
    async with uow_factory() as uow:
        assert await uow.bindings.unbind("pod-1", fence=new)
        await uow.commit()


async def test_a_gang_is_bound_in_one_statement_and_refused_whole_when_one_pod_is_bound(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    await create_pods(uow_factory, "pod-1", "pod-2", "pod-3")
    fence = await acquire(uow_factory, "scheduler-a", fake_clock)
    assert fence is not None
    async with uow_factory() as uow:
        await uow.bindings.bind_many([binding("pod-1", "node-a"), binding("pod-2", "node-b")], fence=fence)
        await uow.commit()

    async with uow_factory() as uow:
        with pytest.raises(AlreadyBoundError, match="1 of 2"):
            await uow.bindings.bind_many([binding("pod-3"), binding("pod-2", "node-c")], fence=fence)
    async with uow_factory() as uow:
        assert [(b.pod_uid, b.node_name) for b in await uow.bindings.list_for_podgroup("pg-1")] == [
            ("pod-1", "node-a"),
            ("pod-2", "node-b"),
        ]


async def test_a_deposed_leader_cannot_bind_a_gang(uow_factory: UowFactory, fake_clock: FakeClock) -> None:
    await create_pods(uow_factory, "pod-1", "pod-2")
    old = await acquire(uow_factory, "scheduler-a", fake_clock)
    fake_clock.advance(TTL * 2)
    assert await acquire(uow_factory, "scheduler-b", fake_clock) is not None
    assert old is not None

    async with uow_factory() as uow:
        with pytest.raises(StaleEpochError):
            await uow.bindings.bind_many([binding("pod-1"), binding("pod-2")], fence=old)
    async with uow_factory() as uow:
        assert await uow.bindings.list_for_podgroup("pg-1") == []


async def test_a_leader_renews_in_one_step_until_its_lease_lapses_or_moves_on(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    fence = await acquire(uow_factory, "scheduler-a", fake_clock)
    assert fence is not None

    fake_clock.advance(TTL / 2)
    async with uow_factory() as uow:
        renewed = await uow.leases.renew(fence, "scheduler-a", fake_clock.now, TTL)
        assert await uow.leases.renew(fence, "scheduler-b", fake_clock.now, TTL) is None
        await uow.commit()
    assert renewed is not None
    assert (renewed.epoch, renewed.expires_at) == (fence.epoch, fake_clock.now + TTL)

    fake_clock.advance(TTL * 2)
    async with uow_factory() as uow:
        assert await uow.leases.renew(fence, "scheduler-a", fake_clock.now, TTL) is None  # lapsed
    taken = await acquire(uow_factory, "scheduler-b", fake_clock)
    assert taken is not None
    async with uow_factory() as uow:
        assert await uow.leases.renew(fence, "scheduler-a", fake_clock.now, TTL) is None  # moved on


async def test_a_fenced_unit_of_work_that_renewed_its_lease_commits_and_a_stale_one_cannot_renew(
    db_session_factory: async_sessionmaker[AsyncSession], uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    old = await acquire(uow_factory, "scheduler-a", fake_clock)
    assert old is not None
    async with SqlAlchemyUnitOfWork(db_session_factory, clock=fake_clock, fence=old) as uow:
        assert await uow.leases.renew(old, "scheduler-a", fake_clock.now, TTL) is not None
        await uow.objects.upsert(make_draft("kept"))
        await uow.commit()

    fake_clock.advance(TTL * 2)
    await acquire(uow_factory, "scheduler-b", fake_clock)
    async with SqlAlchemyUnitOfWork(db_session_factory, clock=fake_clock, fence=old) as uow:
        assert await uow.leases.renew(old, "scheduler-a", fake_clock.now, TTL) is None
        await uow.objects.upsert(make_draft("refused"))
        with pytest.raises(StaleEpochError):
            await uow.commit()
    async with uow_factory() as uow:
        assert await uow.objects.get("PodGroup", "ml", "kept") is not None
        assert await uow.objects.get("PodGroup", "ml", "refused") is None
