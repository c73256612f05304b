"""A real unit of work without a server or a file, for service unit tests: SQLite in memory, migrated.

It is the production code (same repositories, same triggers), so tests need no hand-written fake. One
connection backs it: run one unit of work at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from libs.db.engine import create_engine, create_session_factory
from libs.db.migrate import upgrade_engine
from libs.db.ports import Clock, utc_now
from libs.db.uow import AfterCommit, SqlAlchemyUnitOfWork, unit_of_work_factory


@asynccontextmanager
async def in_memory_unit_of_work_factory(
    *, clock: Clock = utc_now, after_commit: AfterCommit | None = None
) -> AsyncIterator[Callable[[], SqlAlchemyUnitOfWork]]:
    """`async with in_memory_unit_of_work_factory() as uow_factory: ...` on a fresh migrated database."""
    engine = create_engine("sqlite+aiosqlite://")
    try:
        await upgrade_engine(engine)
        yield unit_of_work_factory(create_session_factory(engine), clock=clock, after_commit=after_commit)
    finally:
        await engine.dispose()
