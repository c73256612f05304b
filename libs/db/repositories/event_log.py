"""The audit log (`events`), the transactional outbox (`outbox`) and the consumers' inbox (`inbox`)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, delete, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.ports import Clock
from libs.db.records import OutboxMessage, StoredEvent
from libs.db.repositories._sql import insert_ignoring_duplicates, rowcount
from libs.db.schema import events, inbox, outbox
from libs.events.envelope import AggregateRef, Envelope

# Any constant shared by every Podway process; names the PostgreSQL advisory lock that settles the log for
# its readers: appends hold it shared, readers take it exclusively.
OUTBOX_APPEND_LOCK = 0x504F44574159  # "PODWAY"


async def append(session: AsyncSession, envelopes: Sequence[Envelope], now: datetime) -> list[OutboxMessage]:
    """Write envelopes to the outbox and the audit log in the caller's transaction; returns the outbox rows.

    On PostgreSQL the append holds an advisory lock shared until commit. Appends never wait for each other
    (an exclusive lock here would put every emitting transaction of every service in one line, each waiting
    for the one before to flush its commit); a reader of the log takes the lock exclusively (`_settle`), so it
    reads only once every append in flight has ended, and a reader going "after seq N" never misses a row
    that commits later with a smaller seq. SQLite already serialises writers.
    """
    if not envelopes:
        return []
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(_APPEND_SHARED, {"key": OUTBOX_APPEND_LOCK})
    # Two statements for the whole batch: the outbox rows (seqs returned in parameter order), then the log rows.
    messages = [
        OutboxMessage(
            seq=0,
            event_id=envelope.event_id,
            subject=envelope.nats_subject,
            data=envelope.to_bytes(),
            created_at=now,
        )
        for envelope in envelopes
    ]
    outbox_rows = [
        {
            "event_id": m.event_id,
            "subject": m.subject,
            "data": m.data,
            "created_at": now,
            "published_at": None,
        }
        for m in messages
    ]
    returned = await session.execute(
        insert(outbox).returning(outbox.c.seq, sort_by_parameter_order=True), outbox_rows
    )
    seqs = [int(seq) for seq in returned.scalars()]
    await session.execute(
        insert(events), [_event_row(envelope, seq) for envelope, seq in zip(envelopes, seqs, strict=True)]
    )
    return [dataclasses.replace(m, seq=seq) for m, seq in zip(messages, seqs, strict=True)]


_APPEND_SHARED = text("SELECT pg_advisory_xact_lock_shared(:key)")
_READ_SETTLED = text("SELECT pg_advisory_xact_lock(:key)")


class SqlAlchemyEventLog:
    """Queries over the audit log, always in `seq` order."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def by_correlation(self, correlation_id: str) -> list[StoredEvent]:
        """One story: every event of a PodGroup or an inference request."""
        return await self._fetch(select(events).where(events.c.correlation_id == correlation_id))

    async def by_type(self, type_: str, *, limit: int = 1000) -> list[StoredEvent]:
        """Events of one type, oldest first."""
        return await self._fetch(select(events).where(events.c.type == type_).limit(limit))

    async def since(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        """Events after position `seq` (exclusive), for watching."""
        return await self._fetch(select(events).where(events.c.seq > seq).limit(limit))

    async def get(self, event_id: uuid.UUID) -> StoredEvent | None:
        """One event by id."""
        found = await self._fetch(select(events).where(events.c.event_id == event_id))
        return found[0] if found else None

    async def delete_older_than(self, cutoff: datetime) -> int:
        """Retention: delete events that occurred before `cutoff`; returns how many."""
        return rowcount(await self._session.execute(delete(events).where(events.c.occurred_at < cutoff)))

    async def _fetch(self, query: Select[Any]) -> list[StoredEvent]:
        await self._settle()
        rows = await self._session.execute(query.order_by(events.c.seq))
        return [_to_stored_event(row) for row in rows]

    async def _settle(self) -> None:
        """Wait until every append in flight has committed or rolled back; later appends wait until this
        transaction ends (a read is short). What this transaction reads after it is a settled prefix of `seq`s.
        """
        if self._session.get_bind().dialect.name == "postgresql":
            await self._session.execute(_READ_SETTLED, {"key": OUTBOX_APPEND_LOCK})


class SqlAlchemyOutbox:
    """Unpublished events for the relay."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def unpublished(self, limit: int, *, created_before: datetime | None = None) -> list[OutboxMessage]:
        """The oldest unpublished messages (only those created before `created_before`, if given), locked
        (PostgreSQL) so concurrent relays take turns in order."""
        query = select(outbox).where(outbox.c.published_at.is_(None))
        if created_before is not None:
            query = query.where(outbox.c.created_at < created_before)
        query = query.order_by(outbox.c.seq).limit(limit).with_for_update()
        return [OutboxMessage(**row._asdict()) for row in await self._session.execute(query)]

    async def mark_published(self, seqs: Sequence[int], at: datetime) -> None:
        """Record that JetStream acknowledged these messages."""
        if seqs:
            await self._session.execute(update(outbox).where(outbox.c.seq.in_(seqs)).values(published_at=at))

    async def delete_published_before(self, cutoff: datetime) -> int:
        """Retention: drop published rows older than `cutoff` (the audit log keeps the events)."""
        statement = delete(outbox).where(outbox.c.published_at.is_not(None), outbox.c.published_at < cutoff)
        return rowcount(await self._session.execute(statement))


class SqlAlchemyInbox:
    """Processed (consumer, event_id) pairs: the idempotency record of durable consumers."""

    def __init__(self, session: AsyncSession, clock: Clock) -> None:
        self._session = session
        self._clock = clock

    async def seen(self, consumer: str, event_id: uuid.UUID) -> bool:
        """Mark the event processed by `consumer` in this transaction; True if it already was."""
        values = {"consumer": consumer, "event_id": event_id, "processed_at": self._clock()}
        result = await self._session.execute(insert_ignoring_duplicates(self._session, inbox, values))
        return rowcount(result) == 0

    async def delete_older_than(self, cutoff: datetime) -> int:
        """Retention: forget marks older than `cutoff` (far beyond any redelivery)."""
        return rowcount(await self._session.execute(delete(inbox).where(inbox.c.processed_at < cutoff)))


def _event_row(envelope: Envelope, seq: int) -> dict[str, Any]:
    subject = envelope.subject
    return {
        "event_id": envelope.event_id,
        "seq": seq,
        "type": envelope.type,
        "schema_version": envelope.schema_version,
        "occurred_at": envelope.occurred_at,
        "producer": envelope.producer,
        "correlation_id": envelope.correlation_id,
        "causation_id": envelope.causation_id,
        "subject_kind": subject.kind if subject else None,
        "subject_namespace": subject.namespace if subject else None,
        "subject_name": subject.name if subject else None,
        "subject_uid": subject.uid if subject else None,
        "payload": envelope.payload,
    }


def _to_stored_event(row: Row[Any]) -> StoredEvent:
    subject = None
    if row.subject_kind is not None:
        subject = AggregateRef(
            kind=row.subject_kind, namespace=row.subject_namespace, name=row.subject_name, uid=row.subject_uid
        )
    envelope = Envelope(
        event_id=row.event_id,
        type=row.type,
        schema_version=row.schema_version,
        occurred_at=row.occurred_at,
        producer=row.producer,
        correlation_id=row.correlation_id,
        causation_id=row.causation_id,
        subject=subject,
        payload=row.payload,
    )
    return StoredEvent(seq=row.seq, envelope=envelope)
