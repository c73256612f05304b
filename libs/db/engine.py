"""Engines and session factories for PostgreSQL (asyncpg) and SQLite (aiosqlite, WAL)."""

from __future__ import annotations

import re
import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, InvalidatePoolError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from libs.db.types import json_text, json_value

SQLITE_BUSY_TIMEOUT_MS = 10_000
PING_AFTER_IDLE_S = 1.0
"""A PostgreSQL connection idle this long is pinged before it is used again."""
POOL_SIZE = 16
"""PostgreSQL connections a process keeps open. A service's concurrent transactions (admission: a group
commit, a read-back per waiting request, the change feed's reads, the outbox relay) must fit: a connection
over the pool is opened for one transaction and closed after it, and each such opening costs PostgreSQL a
backend and asyncpg its type introspection and prepared statements again (with 5, eight API clients writing
at once cost PostgreSQL more CPU than the writes themselves)."""
POOL_OVERFLOW = 16
"""Connections opened beyond the pool under a burst, closed when given back."""
_IDLE_SINCE = "podway_idle_since"
DEFAULT_POSTGRES_PORT = 5432
_MULTI_HOST = re.compile(r"^(?P<head>[^:/]+://(?:[^@/]*@)?)(?P<hosts>[^@/?]*,[^/?]*)(?P<tail>[/?].*)?$")
"""libpq's multi-host form: `scheme://user@host1:port1,host2:port2/db?...`."""


def parse_database_url(url: str | URL) -> URL:
    """`url` parsed; libpq's multi-host form too (`postgresql+asyncpg://user@h1:5432,h2:5432/db?...`), as
    the `host=h1:5432&host=h2:5432` query the asyncpg dialect takes (a host without a port gets 5432). With
    `target_session_attrs=read-write` a connection goes to whichever listed server is the primary."""
    if isinstance(url, URL):
        return _with_driver(url)
    found = _MULTI_HOST.match(url)
    if found is None:
        return _with_driver(_parsed(url))
    hosts = [h if ":" in h else f"{h}:{DEFAULT_POSTGRES_PORT}" for h in found["hosts"].split(",") if h]
    single = make_url(found["head"] + (found["tail"] or "/"))
    return _with_driver(single.update_query_pairs([("host", host) for host in hosts], append=True))


def _parsed(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise ValueError(f"database URL: not a URL; {_FORMS}") from None


_FORMS = "Podway stores its state in PostgreSQL (postgresql+asyncpg://USER@HOST:PORT/DB) or SQLite (sqlite+aiosqlite:///PATH)"

DRIVERS = {"postgresql": "asyncpg", "sqlite": "aiosqlite"}
"""The one driver Podway ships for each database it stores its state in."""


def _with_driver(url: URL) -> URL:
    """The URL with Podway's driver for its database, whatever driver it named (`postgresql://`,
    `postgres://` and `postgresql+psycopg://` are PostgreSQL through asyncpg); ValueError for a database
    Podway does not store its state in."""
    backend = url.get_backend_name()
    backend = "postgresql" if backend == "postgres" else backend
    driver = DRIVERS.get(backend)
    if driver is None:
        raise ValueError(f"database URL {url.render_as_string(hide_password=True)!r}: {_FORMS}")
    return url if url.drivername == f"{backend}+{driver}" else url.set(drivername=f"{backend}+{driver}")


def create_engine(
    url: str | URL,
    *,
    echo: bool = False,
    ping_after_idle_s: float = PING_AFTER_IDLE_S,
    read_only: bool = False,
) -> AsyncEngine:
    """An async engine for `url` with the settings Podway relies on.

    SQLite: WAL journal, foreign keys on, a busy timeout, and `BEGIN IMMEDIATE` transactions (writers queue on
    the database lock at BEGIN instead of failing with SQLITE_BUSY when a read turns into a write). A
    `read_only` engine's transactions begin deferred and refuse writes: they read a snapshot without taking
    the write lock, so what a service does before it writes (start a process, say) waits for no writer.
    PostgreSQL: a bounded pool, last in first out, that pings a connection before handing it out once it has
    been idle for `ping_after_idle_s`, so a restarted server does not hand out dead connections; `url` may
    list a primary and its standbys (see `parse_database_url`).
    """
    url = parse_database_url(url)
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, echo=echo, read_only=read_only)
    engine = create_async_engine(
        url,
        echo=echo,
        json_serializer=json_text,
        json_deserializer=json_value,
        pool_size=POOL_SIZE,
        max_overflow=POOL_OVERFLOW,
        pool_use_lifo=True,
        pool_recycle=1800,
        **({"execution_options": {"postgresql_readonly": True}} if read_only else {}),
    )
    _ping_when_idle(engine, ping_after_idle_s)
    return engine


def _ping_when_idle(engine: AsyncEngine, idle_s: float) -> None:
    """Ping a pooled connection on checkout only when it sat idle for `idle_s`.

    `pool_pre_ping` pings on every checkout, and asyncpg's ping is three round trips (BEGIN, `;`, ROLLBACK):
    more than a short transaction's own work. A connection used moments ago is alive as far as a ping could
    tell, and with a LIFO pool the busy connections are the ones reused. A dead one found here is replaced,
    and every connection older than it is too.
    """
    dialect = engine.dialect

    @event.listens_for(engine.sync_engine.pool, "checkin")
    def _checked_in(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine.sync_engine.pool, "checkout")
    def _checked_out(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since < idle_s:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise InvalidatePoolError(f"connection lost while idle: {error}") from error


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded values readable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def _sqlite_engine(url: URL, *, echo: bool, read_only: bool) -> AsyncEngine:
    in_memory = url.database in (None, "", ":memory:")
    extra: dict[str, Any] = {"poolclass": StaticPool} if in_memory else {}
    engine = create_async_engine(
        url,
        echo=echo,
        json_serializer=json_text,
        json_deserializer=json_value,
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
        if read_only:
            cursor.execute("PRAGMA query_only=ON")
        cursor.close()

    begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    return engine


def snapshot_engine(url: str | URL, engine: AsyncEngine) -> AsyncEngine:
    """An engine for reads that must wait for no writer: on SQLite a read-only one of its own (deferred
    transactions, see `create_engine`), elsewhere `engine` itself (PostgreSQL readers never wait for
    writers)."""
    return create_engine(url, read_only=True) if dialect_name(url) == "sqlite" else engine


async def dispose_snapshot(snapshot: AsyncEngine, engine: AsyncEngine) -> None:
    if snapshot is not engine:
        await snapshot.dispose()


def dialect_name(url: str | URL) -> str:
    """`sqlite` or `postgresql`."""
    return parse_database_url(url).get_backend_name()
