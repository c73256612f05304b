"""`SqlAlchemyUnitOfWork`: one database transaction holding state changes and the events they emit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from libs.db.direct import DirectConnections, DirectSession
from libs.db.ports import Clock, utc_now
from libs.db.records import Fence, ObjectDraft, OutboxMessage
from libs.db.repositories.at_once import WrittenAtOnce, write_at_once
from libs.db.repositories.bindings import SqlAlchemyBindingRepository
from libs.db.repositories.conditions import SqlAlchemyConditionRepository
from libs.db.repositories.device_allocations import SqlAlchemyDeviceAllocationRepository
from libs.db.repositories.event_log import (
    EventRows,
    SqlAlchemyEventLog,
    SqlAlchemyInbox,
    SqlAlchemyOutbox,
    append,
)
from libs.db.repositories.leases import SqlAlchemyLeaseRepository, assert_epoch
from libs.db.repositories.node_heartbeats import SqlAlchemyNodeHeartbeatRepository
from libs.db.repositories.nominations import SqlAlchemyNominationRepository
from libs.db.repositories.objects import SqlAlchemyObjectRepository
from libs.db.repositories.revisions import SqlAlchemyRevisionRepository, forget_written, stamp
from libs.events.envelope import Envelope

AfterCommit = Callable[[Sequence[OutboxMessage]], None]
"""Told the outbox rows a unit of work just committed."""


class SqlAlchemyUnitOfWork:
    """`async with uow: ...; await uow.commit()`; leaving the block without committing rolls back.

    `emit()` queues envelopes; `commit()` appends them to the outbox and the audit log in the same
    transaction, then hands the committed outbox rows to `after_commit` (e.g. `OutboxRelay.kick`) so the
    relay publishes them at once, without reading them back.
    With a `fence`, `commit()` first checks the lease epoch (unless the transaction renewed the lease under
    it), so a deposed leader's whole transaction fails.
    A unit of work is single-use.
    """

    def __init__(
        self,
        session_factory: async_sessionmaker[AsyncSession],
        *,
        clock: Clock = utc_now,
        fence: Fence | None = None,
        after_commit: AfterCommit | None = None,
    ) -> None:
        self._session_factory = session_factory
        self._clock = clock
        self._fence = fence
        self._after_commit = after_commit
        self._pending: list[Envelope] = []
        self._heard: list[Envelope] = []
        self._session: AsyncSession | None = None

    async def __aenter__(self) -> Self:
        if self._session is not None:
            raise RuntimeError("a unit of work is single-use")
        session = self._session = self._session_factory()
        self.objects = self._objects(session)
        self.conditions = SqlAlchemyConditionRepository(session, self._clock)
        self.bindings = SqlAlchemyBindingRepository(session)
        self.leases = SqlAlchemyLeaseRepository(session)
        self.nominations = SqlAlchemyNominationRepository(session)
        self.node_heartbeats = SqlAlchemyNodeHeartbeatRepository(session)
        self.device_allocations = SqlAlchemyDeviceAllocationRepository(session)
        self.events = SqlAlchemyEventLog(session)
        self.outbox = SqlAlchemyOutbox(session)
        self.inbox = SqlAlchemyInbox(session, self._clock)
        self.revisions = SqlAlchemyRevisionRepository(session)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        session = self._require_session()
        try:
            await self.rollback()
        finally:
            await session.close()

    def _objects(self, session: AsyncSession) -> SqlAlchemyObjectRepository:
        return SqlAlchemyObjectRepository(session, self._clock)

    @property
    def session(self) -> AsyncSession:
        """The underlying session, for adapters that need a query the repositories do not offer."""
        return self._require_session()

    def emit(self, envelope: Envelope) -> None:
        """Publish `envelope` if, and only if, this unit of work commits."""
        self._pending.append(envelope)

    def record(self, envelope: Envelope) -> None:
        """Keep in the audit log, if this unit of work commits, an event that came from outside (a client's
        `job.submitted`), so that the events answering it name a cause the log holds; it is not published
        again."""
        self._heard.append(envelope)

    async def commit(self) -> None:
        """Check the fence, append emitted events, commit, then signal the relay."""
        session = self._require_session()
        if self._fence is not None and self.leases.renewed != self._fence:
            # A renewal in this transaction has verified the epoch and holds the row: no need to ask again.
            await assert_epoch(session, self._fence.lease, self._fence.epoch)
        now = self._clock()
        committed = await append(session, [*self._heard, *self._pending], now)
        if self._heard:
            heard = {envelope.event_id for envelope in self._heard}
            await self.outbox.mark_published([m.seq for m in committed if m.event_id in heard], now)
            committed = [m for m in committed if m.event_id not in heard]
        self._pending, self._heard = [], []
        await stamp(session)
        await session.commit()
        if committed and self._after_commit is not None:
            self._after_commit(committed)

    async def rollback(self) -> None:
        """Discard state changes and emitted events."""
        self._pending, self._heard = [], []
        session = self._require_session()
        forget_written(session)
        await session.rollback()

    def _require_session(self) -> AsyncSession:
        if self._session is None:
            raise RuntimeError("use the unit of work inside `async with`")
        return self._session


def unit_of_work_factory(
    session_factory: async_sessionmaker[AsyncSession],
    *,
    clock: Clock = utc_now,
    fence: Callable[[], Fence | None] | None = None,
    after_commit: AfterCommit | None = None,
) -> Callable[[], SqlAlchemyUnitOfWork]:
    """A factory of units of work; `fence` is asked for the current lease fence each time one is made."""

    def make() -> SqlAlchemyUnitOfWork:
        return SqlAlchemyUnitOfWork(
            session_factory, clock=clock, fence=fence() if fence else None, after_commit=after_commit
        )

    return make


class SqlAlchemyStatements(SqlAlchemyUnitOfWork):
    """A unit of work on PostgreSQL with no transaction around its statements: each commits on its own, with no
    BEGIN and no COMMIT to wait for. For reads, and for the writes one statement makes (`write_at_once`);
    writes that must commit together otherwise belong in a `SqlAlchemyUnitOfWork`. With `direct`
    connections, the reads of a write's view and the write itself go on one of them (see libs.db.direct);
    the session serves the rest, and takes a connection of the pool only if asked for something else."""

    def __init__(
        self,
        session_factory: async_sessionmaker[AsyncSession],
        *,
        clock: Clock = utc_now,
        after_commit: AfterCommit | None = None,
        direct: DirectConnections | None = None,
    ) -> None:
        super().__init__(session_factory, clock=clock, after_commit=after_commit)
        self._direct = DirectSession(direct) if direct is not None else None

    def _objects(self, session: AsyncSession) -> SqlAlchemyObjectRepository:
        return SqlAlchemyObjectRepository(session, self._clock, self._direct)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            # A session that never took a connection (the direct ones served every statement) has nothing
            # to roll back or give back.
            if self._direct is None or self.session.in_transaction():
                await super().__aexit__(exc_type, exc, tb)
        finally:
            if self._direct is not None:
                self._direct.close()

    def emit(self, envelope: Envelope) -> None:
        raise RuntimeError("statements commit one by one: emit with write_at_once")

    async def commit(self) -> None:
        raise RuntimeError("statements commit one by one: nothing is left to commit")

    async def write_at_once(
        self,
        creates: Sequence[ObjectDraft],
        replacements: Sequence[tuple[ObjectDraft, int]],
        envelopes: Sequence[Envelope],
    ) -> WrittenAtOnce:
        """Create, replace at the versions read and emit, committed by one statement (see
        libs.db.repositories.at_once), then signal the relay."""
        rows = EventRows.of(envelopes, self._clock())
        written = await write_at_once(self._direct or self.session, creates, replacements, rows)
        if written.committed and self._after_commit is not None:
            self._after_commit(written.committed)
        return written


def statements_factory(
    engine: AsyncEngine,
    *,
    clock: Clock = utc_now,
    after_commit: AfterCommit | None = None,
    direct: DirectConnections | None = None,
) -> Callable[[], SqlAlchemyStatements]:
    """Units of work whose statements each commit on their own, on `engine`'s pool (PostgreSQL), the reads of
    a write's view and the write on `direct` connections when given."""
    sessions = async_sessionmaker(
        engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False
    )

    def make() -> SqlAlchemyStatements:
        return SqlAlchemyStatements(sessions, clock=clock, after_commit=after_commit, direct=direct)

    return make
