"""On PostgreSQL, a pooled connection that died while idle is found and replaced before it is used."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from libs.db.engine import create_engine

pytestmark = pytest.mark.postgres


async def _backend_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(url: str, pid: int) -> None:
    other = create_engine(url)
    try:
        async with other.connect() as connection:
            await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        await other.dispose()


async def test_a_connection_killed_while_idle_is_replaced_on_checkout(postgres_database_url: str) -> None:
    engine = create_engine(postgres_database_url, ping_after_idle_s=0.0)
    try:
        killed = await _backend_pid(engine)
        await _terminate(postgres_database_url, killed)

        assert await _backend_pid(engine) != killed
    finally:
        await engine.dispose()


async def test_a_connection_used_moments_ago_is_handed_out_without_a_ping(postgres_database_url: str) -> None:
    engine = create_engine(postgres_database_url, ping_after_idle_s=3600.0)
    try:
        await _terminate(postgres_database_url, await _backend_pid(engine))

        with pytest.raises(DBAPIError):
            await _backend_pid(engine)
        # The failure invalidated the pool: the next checkout connects afresh.
        assert await _backend_pid(engine) > 0
    finally:
        await engine.dispose()
