"""A unit of work for event handlers that only change a leased service's in-memory world.

A leased service's consumer keeps its world current; that world is rebuilt from the database by every new
leader, so recording processed events in the database inbox would cost a transaction per event and buy
nothing. Duplicates are still dropped, by event id, within one leadership term; the handlers are idempotent
besides. As with the database inbox, an event counts as processed only once its unit of work commits, so an
event whose handler failed is retried (and dead-lettered after the consumer's attempts), never acked as a
duplicate.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import NoReturn, Self

from libs.db.ports import (
    BindingRepository,
    ConditionRepository,
    DeviceAllocationRepository,
    EventLog,
    LeaseRepository,
    NodeHeartbeatRepository,
    NominationRepository,
    ObjectRepository,
    Outbox,
    RevisionRepository,
)
from libs.events.envelope import Envelope


class MemoryInbox:
    """The last `capacity` event ids each consumer processed."""

    def __init__(self, capacity: int = 200_000) -> None:
        self._capacity = capacity
        self._seen: OrderedDict[tuple[str, uuid.UUID], None] = OrderedDict()

    def processed(self, key: tuple[str, uuid.UUID]) -> bool:
        return key in self._seen

    def record(self, keys: list[tuple[str, uuid.UUID]]) -> None:
        for key in keys:
            self._seen[key] = None
        while len(self._seen) > self._capacity:
            self._seen.popitem(last=False)


class _PendingInbox:
    """One unit of work's view of the inbox: what it processes is recorded when it commits."""

    def __init__(self, inbox: MemoryInbox) -> None:
        self._inbox = inbox
        self.pending: list[tuple[str, uuid.UUID]] = []

    async def seen(self, consumer: str, event_id: uuid.UUID) -> bool:
        key = (consumer, event_id)
        if self._inbox.processed(key) or key in self.pending:
            return True
        self.pending.append(key)
        return False

    async def seen_many(self, consumer: str, event_ids: Sequence[uuid.UUID]) -> list[bool]:
        return [await self.seen(consumer, event_id) for event_id in event_ids]

    async def delete_older_than(self, cutoff: datetime) -> int:
        return 0


class MemoryUnitOfWork:
    """Satisfies `UnitOfWork` for the consumer; any use of the database is a programming error."""

    def __init__(self, inbox: MemoryInbox) -> None:
        self._store = inbox
        self._inbox = _PendingInbox(inbox)

    @property
    def inbox(self) -> _PendingInbox:
        return self._inbox

    @property
    def objects(self) -> ObjectRepository:
        _no_database()

    @property
    def conditions(self) -> ConditionRepository:
        _no_database()

    @property
    def bindings(self) -> BindingRepository:
        _no_database()

    @property
    def leases(self) -> LeaseRepository:
        _no_database()

    @property
    def nominations(self) -> NominationRepository:
        _no_database()

    @property
    def node_heartbeats(self) -> NodeHeartbeatRepository:
        _no_database()

    @property
    def device_allocations(self) -> DeviceAllocationRepository:
        _no_database()

    @property
    def events(self) -> EventLog:
        _no_database()

    @property
    def outbox(self) -> Outbox:
        _no_database()

    @property
    def revisions(self) -> RevisionRepository:
        _no_database()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def emit(self, envelope: Envelope) -> None:
        _no_database()

    def record(self, envelope: Envelope) -> None:
        _no_database()

    async def commit(self) -> None:
        self._store.record(self._inbox.pending)
        self._inbox.pending = []

    async def rollback(self) -> None:
        self._inbox.pending = []


def _no_database() -> NoReturn:
    raise RuntimeError("these event handlers change memory only; write through a pass")
