"""Whether the database answers: the `database` entry of a service's health beat (its readiness)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

PING_TIMEOUT_S = 2.0


async def database_state(engine: AsyncEngine, timeout_s: float = PING_TIMEOUT_S) -> str:
    """`ok` when a `SELECT 1` is answered within `timeout_s`, else `unreachable`. SQLite is a local file, and
    its transactions begin by taking the write lock: it is not asked."""
    if engine.dialect.name == "sqlite":
        return "ok"
    try:
        async with asyncio.timeout(timeout_s), engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception:  # any failure to answer is the same answer to a readiness probe
        return "unreachable"
    return "ok"


def database_check(engine: AsyncEngine, timeout_s: float = PING_TIMEOUT_S) -> Callable[[], Awaitable[str]]:
    """`database_state` of `engine`, as a call taking nothing (for a health beat)."""

    async def check() -> str:
        return await database_state(engine, timeout_s)

    return check
