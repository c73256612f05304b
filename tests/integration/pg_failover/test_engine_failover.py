"""The database layer on a PostgreSQL primary and its synchronous standby, the primary killed and the standby
promoted: the multi-host URL reaches whichever server is writable, an acknowledged commit is on the new
primary, the pool drops the dead connections and reconnects there, and a lease and its fence carry over."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from libs.db import migrate
from libs.db.engine import create_engine, create_session_factory
from libs.db.records import Fence
from libs.db.uow import unit_of_work_factory
from tests.integration.pg_failover.postgres_pair import PostgresPair
from tests.integration.reliability.private_postgres import postgres_bin

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        postgres_bin() is None, reason="no PostgreSQL binaries to start a primary and a standby"
    ),
]
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=15)


@pytest.fixture
def pair() -> Iterator[PostgresPair]:
    databases = PostgresPair.create(synchronous=True)
    try:
        yield databases
    finally:
        databases.remove()


async def _server(engine: AsyncEngine) -> tuple[int, bool]:
    """(port, in recovery) of the server the engine's next connection reaches."""
    async with engine.connect() as connection:
        row = (await connection.execute(text("SELECT inet_server_port(), pg_is_in_recovery()"))).one()
        return int(row[0]), bool(row[1])


async def _after_failover(engine: AsyncEngine) -> tuple[int, bool]:
    """The first answer once the dead connections are dropped: at most one use may fail on one."""
    try:
        return await _server(engine)
    except DBAPIError:
        return await _server(engine)


async def test_the_url_reaches_the_primary_even_when_it_lists_the_standby_first(pair: PostgresPair) -> None:
    standby_first = (
        f"postgresql+asyncpg://postgres@127.0.0.1:{pair.standby.port},127.0.0.1:{pair.primary.port}"
        "/postgres?target_session_attrs=read-write"
    )
    engine = create_engine(standby_first)
    try:
        assert await _server(engine) == (pair.primary.port, False)
    finally:
        await engine.dispose()


async def test_a_commit_acknowledged_before_the_crash_is_read_on_the_promoted_standby(
    pair: PostgresPair,
) -> None:
    engine = create_engine(pair.url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE acknowledged (n int)"))
            await connection.execute(text("INSERT INTO acknowledged SELECT generate_series(1, 500)"))

        failover = pair.fail_over()

        assert await _after_failover(engine) == (failover.new_port, False)
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT count(*) FROM acknowledged"))).scalar_one() == 500
    finally:
        await engine.dispose()


async def test_the_leader_renews_its_lease_and_writes_under_its_fence_on_the_new_primary(
    pair: PostgresPair,
) -> None:
    await migrate.upgrade(pair.url)
    engine = create_engine(pair.url, ping_after_idle_s=3600.0)  # no ping: the dead connection is used
    uow_factory = unit_of_work_factory(create_session_factory(engine), clock=lambda: NOW)
    try:
        async with uow_factory() as uow:
            lease = await uow.leases.acquire_or_renew("scheduler", "scheduler-a", NOW, TTL)
            await uow.commit()
        assert lease is not None
        fence = lease.fence

        pair.fail_over()
        with pytest.raises(DBAPIError):  # the pooled connection went with the old primary
            async with uow_factory() as uow:
                await uow.leases.renew(fence, "scheduler-a", NOW + TTL / 3, TTL)

        async with uow_factory() as uow:
            renewed = await uow.leases.renew(fence, "scheduler-a", NOW + TTL / 3, TTL)
            await uow.commit()
        assert renewed is not None
        assert renewed.fence == fence == Fence("scheduler", 1)
        async with unit_of_work_factory(create_session_factory(engine), fence=lambda: fence)() as fenced:
            await fenced.commit()
    finally:
        await engine.dispose()


async def test_the_dead_primary_rejoins_as_a_synchronous_standby_and_the_pair_fails_over_again(
    pair: PostgresPair,
) -> None:
    engine = create_engine(pair.url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE acknowledged (n int)"))
        first = pair.fail_over()
        await asyncio.to_thread(pair.rejoin)
        assert await _after_failover(engine) == (first.new_port, False)
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO acknowledged VALUES (1)"))
            replication = (await connection.execute(text("SELECT sync_state FROM pg_stat_replication"))).all()

        second = pair.fail_over()

        assert replication == [("sync",)]
        assert (second.old_port, second.new_port) == (first.new_port, first.old_port)
        assert await _after_failover(engine) == (first.old_port, False)
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT count(*) FROM acknowledged"))).scalar_one() == 1
    finally:
        await engine.dispose()
