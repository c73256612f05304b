"""Engines and session factories for PostgreSQL (asyncpg) and SQLite (aiosqlite, WAL)."""

from __future__ import annotations

import json
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

SQLITE_BUSY_TIMEOUT_MS = 10_000


def _json_dumps(value: Any) -> str:
    # Sorted keys: equal documents serialise to equal text, which SQLite compares. orjson is ~5x faster than
    # json here, which matters when admission writes thousands of objects a second.
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # what orjson refuses (e.g. non-string keys) the standard library still writes
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def create_engine(url: str | URL, *, echo: bool = False) -> AsyncEngine:
    """An async engine for `url` with the settings Podway relies on.

    SQLite: WAL journal, foreign keys on, a busy timeout, and `BEGIN IMMEDIATE` transactions (writers queue on
    the database lock at BEGIN instead of failing with SQLITE_BUSY when a read turns into a write).
    PostgreSQL: a bounded pool with pre-ping, so a restarted server does not hand out dead connections.
    """
    url = make_url(url)
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, echo=echo)
    return create_async_engine(
        url,
        echo=echo,
        json_serializer=_json_dumps,
        pool_size=5,
        max_overflow=10,
        pool_pre_ping=True,
        pool_recycle=1800,
    )


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded values readable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def _sqlite_engine(url: URL, *, echo: bool) -> AsyncEngine:
    in_memory = url.database in (None, "", ":memory:")
    extra: dict[str, Any] = {"poolclass": StaticPool} if in_memory else {}
    engine = create_async_engine(
        url,
        echo=echo,
        json_serializer=_json_dumps,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        **extra,
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy, not the driver, decide when a transaction begins (see the "begin" hook).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def dialect_name(url: str | URL) -> str:
    """`sqlite` or `postgresql`."""
    return make_url(url).get_backend_name()
