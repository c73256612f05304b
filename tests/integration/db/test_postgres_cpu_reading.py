"""The benchmarks' PostgreSQL CPU reading counts backends that have exited: it never falls when a connection
closes (it did, and benchmarks printed negative CPU seconds for PostgreSQL)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from bench.measure import postgres_cpu_seconds

pytestmark = pytest.mark.postgres


async def test_a_busy_connection_that_closes_keeps_its_cpu_in_the_reading(postgres_url: str) -> None:
    dsn = postgres_url.replace("postgresql+asyncpg://", "postgresql://")
    connection = await asyncpg.connect(dsn)
    pid = await connection.fetchval("SELECT pg_backend_pid()")
    await connection.fetchval("SELECT count(*) FROM generate_series(1, 3000000)")  # CPU in its backend
    before = postgres_cpu_seconds()
    await connection.close()
    for _ in range(100):  # until the postmaster has reaped the backend
        if not await _alive(dsn, pid):
            break
        await asyncio.sleep(0.02)

    assert postgres_cpu_seconds() >= before


async def _alive(dsn: str, pid: int) -> bool:
    probe = await asyncpg.connect(dsn)
    try:
        return bool(await probe.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid))
    finally:
        await probe.close()
