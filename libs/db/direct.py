"""The statements of a write on PostgreSQL sent on asyncpg connections of their own, not through SQLAlchemy.

Admission answers a group of writes with two statements: it reads the group's view and writes it at once
(see `repositories.at_once`). Through SQLAlchemy each costs the client about 0.19 ms of CPU beside the
0.07 ms asyncpg takes for it (a session, its transaction state, the compiled cache, parameter and result
processing, the greenlet that bridges the ORM to asyncio: measured, a session with two statements 0.50 ms,
the same two on a connection of its own 0.13 ms), and at 500 writes a second that was a sixth of
admission's CPU. These are the very statements the repositories compile (one text, one meaning): only who
sends them differs, and what they return is read into the same records.

A connection here is used by one unit of work at a time, outside any transaction: each statement commits
on its own, as `SqlAlchemyStatements`' do. One that failed for any reason but a conflict is closed rather
than handed out again (after a failover it may be talking to a standby)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any

import asyncpg
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from libs.db.engine import PING_AFTER_IDLE_S
from libs.db.types import json_text, json_value

NOT_AT_VERSION = "PW409"
"""The SQLSTATE `conflict_unless` raises (migration 0009)."""
UNIQUE_VIOLATION = "23505"
_CONNECT_ARGUMENTS = frozenset(inspect.signature(asyncpg.connect).parameters)


class Row(dict[str, Any]):
    """A row read directly, with the attribute access SQLAlchemy's rows give (the repositories' readers
    take either)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def _asdict(self) -> dict[str, Any]:
        return dict(self)


class Statement:
    """A SQLAlchemy statement compiled once for asyncpg: its text and the order of its parameters."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        self.sql = compiled.string
        self.names = tuple(compiled.positiontup or ())

    def arguments(self, parameters: Mapping[str, Any]) -> list[Any]:
        return [parameters[name] for name in self.names]


class DirectConnections:
    """Connections to the engine's PostgreSQL server (its primary, when it lists several), made when first
    needed, `size` at most, each lent to one unit of work at a time."""

    def __init__(
        self,
        engine: AsyncEngine,
        size: int,
        *,
        ping_after_idle_s: float = PING_AFTER_IDLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _, parameters = engine.dialect.create_connect_args(engine.url)
        self._connect = {k: v for k, v in parameters.items() if k in _CONNECT_ARGUMENTS}
        self.dialect = engine.dialect
        self._ping_after_idle_s, self._clock = ping_after_idle_s, clock
        self._idle: list[tuple[asyncpg.Connection, float]] = []
        """Connections given back, with when."""
        self._slots = asyncio.Semaphore(size)
        self._statements: dict[int, tuple[ClauseElement, Statement]] = {}
        self._closed = False

    def statement(self, statement: ClauseElement) -> Statement:
        """The statement compiled, once: kept with the statement itself, so that its id is not reused."""
        kept = self._statements.get(id(statement))
        if kept is None or kept[0] is not statement:
            kept = self._statements[id(statement)] = (statement, Statement(statement, self.dialect))
        return kept[1]

    async def acquire(self) -> asyncpg.Connection:
        await self._slots.acquire()
        try:
            while self._idle:
                connection, since = self._idle.pop()
                if await self._alive(connection, self._clock() - since):
                    return connection
                connection.terminate()
            return await self._open()
        except BaseException:
            self._slots.release()
            raise

    async def _alive(self, connection: asyncpg.Connection, idle_s: float) -> bool:
        """Whether a connection given back is still good: one the server ended is not handed out, and one
        idle for a while is pinged first (as the engine's pool does: a restarted server is met here, not by
        a write whose outcome would then be unknown)."""
        if connection.is_closed():
            return False
        if idle_s < self._ping_after_idle_s:
            return True
        try:
            await connection.fetchval("SELECT 1")
        except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError):
            return False
        return True

    def release(self, connection: asyncpg.Connection, *, broken: bool) -> None:
        self._slots.release()
        if broken or self._closed:
            connection.terminate()
        else:
            self._idle.append((connection, self._clock()))

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection, _ in idle:
            await connection.close(timeout=5)

    async def _open(self) -> asyncpg.Connection:
        connection = await asyncpg.connect(**self._connect)
        for name in ("json", "jsonb"):  # read as SQLAlchemy's engines read them
            await connection.set_type_codec(
                name, encoder=json_text, decoder=json_value, schema="pg_catalog", format="text"
            )
        return connection


class DirectSession:
    """One unit of work's use of a direct connection: taken at its first statement, given back at its end."""

    def __init__(self, connections: DirectConnections) -> None:
        self._connections = connections
        self._connection: asyncpg.Connection | None = None
        self._broken = False

    async def fetch(self, statement: ClauseElement, parameters: Mapping[str, Any]) -> list[Row]:
        """The statement's rows. A statement that failed on a unique key or on `conflict_unless`
        (`is_conflict`) leaves the connection as it was: it committed nothing and began nothing."""
        compiled = self._connections.statement(statement)
        if self._connection is None:
            self._connection = await self._connections.acquire()
        try:
            records = await self._connection.fetch(compiled.sql, *compiled.arguments(parameters))
        except BaseException as error:
            self._broken = not is_conflict(error)
            raise
        return [Row(record.items()) for record in records]

    def close(self) -> None:
        if self._connection is not None:
            self._connections.release(self._connection, broken=self._broken)
            self._connection = None


def is_conflict(error: BaseException) -> bool:
    """Whether a statement failed on a unique key or on `conflict_unless` (see `repositories.at_once`)."""
    return isinstance(error, asyncpg.PostgresError) and error.sqlstate in (UNIQUE_VIOLATION, NOT_AT_VERSION)


def is_unique_violation(error: BaseException) -> bool:
    return isinstance(error, asyncpg.PostgresError) and error.sqlstate == UNIQUE_VIOLATION
