"""The audit log (`events`), the transactional outbox (`outbox`) and the consumers' inbox (`inbox`)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    BigInteger,
    LargeBinary,
    Row,
    Select,
    any_,
    bindparam,
    delete,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.ports import Clock
from libs.db.records import OutboxMessage, StoredEvent
from libs.db.repositories._sql import insert_ignoring_duplicates, on_postgres, rowcount
from libs.db.schema import events, inbox, outbox
from libs.db.types import UtcDateTime, json_text, sqlite_time
from libs.events.envelope import AggregateRef, Envelope

# Any constant shared by every Podway process; names the PostgreSQL advisory lock that settles the log for
# its readers: appends hold it shared, readers take it exclusively.
OUTBOX_APPEND_LOCK = 0x504F44574159  # "PODWAY"


async def append(session: AsyncSession, envelopes: Sequence[Envelope], now: datetime) -> list[OutboxMessage]:
    """Write envelopes to the outbox and the audit log in the caller's transaction; returns the outbox rows.

    Idempotent by `event_id`: an envelope already appended (a retry of a transaction whose commit went through
    although its caller never heard so) is skipped, and only the rows this call added are returned.

    On PostgreSQL the append holds an advisory lock shared until commit. Appends never wait for each other
    (an exclusive lock here would put every emitting transaction of every service in one line, each waiting
    for the one before to flush its commit); a reader of the log takes the lock exclusively (`_settle`), so it
    reads only once every append in flight has ended, and a reader going "after seq N" never misses a row
    that commits later with a smaller seq. SQLite already serialises writers.
    """
    if not envelopes:
        return []
    rows = EventRows.of(envelopes, now)
    if on_postgres(session):
        seq_of = await _append_pg(session, rows)
    else:
        seq_of = await _append_sqlite(session, envelopes, rows.subjects, rows.data, rows.payloads, now)
    return rows.committed(seq_of)


class EventRows(NamedTuple):
    """Envelopes as the outbox and the log keep them, each payload serialised once."""

    envelopes: Sequence[Envelope]
    subjects: list[str]
    payloads: list[str]
    data: list[bytes]
    now: datetime

    @classmethod
    def of(cls, envelopes: Sequence[Envelope], now: datetime) -> EventRows:
        payloads = [json_text(envelope.payload) for envelope in envelopes]
        data = [envelope.to_bytes(payload_json=p) for envelope, p in zip(envelopes, payloads, strict=True)]
        return cls(envelopes, [envelope.nats_subject for envelope in envelopes], payloads, data, now)

    def pg_parameters(self) -> dict[str, Any]:
        """The parameters of the append's statement on PostgreSQL (`append_pg_ctes`)."""
        subjects = [envelope.subject for envelope in self.envelopes]
        return {
            "lock": OUTBOX_APPEND_LOCK,
            "now": self.now,
            "event_id": [str(envelope.event_id) for envelope in self.envelopes],
            "nats_subject": self.subjects,
            "data": self.data,
            "type": [envelope.type for envelope in self.envelopes],
            "schema_version": [envelope.schema_version for envelope in self.envelopes],
            "occurred_at": [envelope.occurred_at for envelope in self.envelopes],
            "producer": [envelope.producer for envelope in self.envelopes],
            "correlation_id": [envelope.correlation_id for envelope in self.envelopes],
            "causation_id": [envelope.causation_id for envelope in self.envelopes],
            "subject_kind": [s.kind if s else None for s in subjects],
            "subject_namespace": [s.namespace if s else None for s in subjects],
            "subject_name": [s.name if s else None for s in subjects],
            "subject_uid": [s.uid if s else None for s in subjects],
            "payload": self.payloads,
        }

    def committed(self, seq_of: dict[uuid.UUID, int]) -> list[OutboxMessage]:
        """The outbox rows of the envelopes appended (`seq_of`: the seq each one appended now took)."""
        return [
            OutboxMessage(seq, envelope.event_id, subject, body, self.now)
            for envelope, subject, body in zip(self.envelopes, self.subjects, self.data, strict=True)
            if (seq := seq_of.get(envelope.event_id)) is not None
        ]


async def _append_pg(session: AsyncSession, rows: EventRows) -> dict[uuid.UUID, int]:
    """One statement, one round trip: take the lock, queue the new outbox rows (seqs in emit order), log them.
    Returns the seq of each envelope appended now."""
    written = await session.execute(_APPEND_PG, rows.pg_parameters())
    return {uuid.UUID(row.event_id): int(row.seq) for row in written}


async def _append_sqlite(
    session: AsyncSession,
    envelopes: Sequence[Envelope],
    nats_subjects: list[str],
    data: list[bytes],
    payloads: list[str],
    now: datetime,
) -> dict[uuid.UUID, int]:
    """Two statements per slice of rows, on the driver: the new outbox rows (seqs in parameter order), then
    their log rows. Values are written as the schema's column types store them on SQLite (uuids as 32 hex
    digits, times as naive UTC text, JSON as `json_text`): going through the types' processors row by row
    cost more than the inserts themselves."""
    connection = await session.connection()
    created_at = sqlite_time(now)
    seq_of: dict[uuid.UUID, int] = {}
    for start in range(0, len(envelopes), _SQLITE_ROWS_PER_INSERT):
        end = start + _SQLITE_ROWS_PER_INSERT
        chunk = envelopes[start:end]
        ids = {envelope.event_id.hex: envelope.event_id for envelope in chunk}
        parameters: list[Any] = []
        for envelope, subject, body in zip(chunk, nats_subjects[start:end], data[start:end], strict=True):
            parameters += (envelope.event_id.hex, subject, body, created_at)
        returned = await connection.exec_driver_sql(_outbox_insert_sqlite(len(chunk)), tuple(parameters))
        seq_of.update((ids[event_id], seq) for event_id, seq in cast("list[tuple[str, int]]", returned.all()))
    rows = [
        _event_row_sqlite(envelope, seq, payload)
        for envelope, payload in zip(envelopes, payloads, strict=True)
        if (seq := seq_of.get(envelope.event_id)) is not None
    ]
    if rows:
        await connection.exec_driver_sql(_EVENTS_INSERT_SQLITE, rows)
    return seq_of


_SQLITE_ROWS_PER_INSERT = 500
"""Rows per outbox INSERT on SQLite: 2,000 parameters, well under its limit of 32,766."""


@functools.lru_cache(maxsize=64)
def _outbox_insert_sqlite(rows: int) -> str:
    values = ", ".join(["(?, ?, ?, ?)"] * rows)
    return (
        f"INSERT INTO outbox (event_id, subject, data, created_at) VALUES {values} "
        "ON CONFLICT (event_id) DO NOTHING RETURNING event_id, seq"
    )


_EVENTS_INSERT_SQLITE = (
    "INSERT INTO events (event_id, seq, type, schema_version, occurred_at, producer, correlation_id, "
    "causation_id, subject_kind, subject_namespace, subject_name, subject_uid, payload) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _event_row_sqlite(envelope: Envelope, seq: int, payload: str) -> tuple[Any, ...]:
    subject = envelope.subject
    return (
        envelope.event_id.hex,
        seq,
        envelope.type,
        envelope.schema_version,
        sqlite_time(envelope.occurred_at),
        envelope.producer,
        envelope.correlation_id,
        envelope.causation_id,
        subject.kind if subject else None,
        subject.namespace if subject else None,
        subject.name if subject else None,
        subject.uid if subject else None,
        payload,
    )


_QUEUE_PG = """
    settled AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(:lock)),
    given AS (
        SELECT * FROM unnest(
            CAST(:event_id AS uuid[]), CAST(:nats_subject AS varchar[]), CAST(:data AS bytea[]),
            CAST(:type AS varchar[]), CAST(:schema_version AS integer[]), CAST(:occurred_at AS timestamptz[]),
            CAST(:producer AS varchar[]), CAST(:correlation_id AS varchar[]), CAST(:causation_id AS varchar[]),
            CAST(:subject_kind AS varchar[]), CAST(:subject_namespace AS varchar[]),
            CAST(:subject_name AS varchar[]), CAST(:subject_uid AS varchar[]), CAST(:payload AS varchar[])
        ) WITH ORDINALITY AS g(
            event_id, nats_subject, data, type, schema_version, occurred_at, producer, correlation_id,
            causation_id, subject_kind, subject_namespace, subject_name, subject_uid, payload, position
        )
    ),
    queued AS (
        INSERT INTO outbox (event_id, subject, data, created_at)
        SELECT given.event_id, given.nats_subject, given.data, :now FROM given, settled ORDER BY given.position
        ON CONFLICT (event_id) DO NOTHING
        RETURNING seq, event_id
    )"""
"""The common table expressions of an append on PostgreSQL: the lock, the events given, the outbox rows
queued (`seq`, `event_id`)."""
LOG_QUEUED_PG = """
    INSERT INTO events (
        event_id, seq, type, schema_version, occurred_at, producer, correlation_id, causation_id,
        subject_kind, subject_namespace, subject_name, subject_uid, payload
    )
    SELECT given.event_id, queued.seq, given.type, given.schema_version, given.occurred_at, given.producer,
        given.correlation_id, given.causation_id, given.subject_kind, given.subject_namespace,
        given.subject_name, given.subject_uid, CAST(given.payload AS jsonb)
    FROM given JOIN queued ON queued.event_id = given.event_id
    RETURNING CAST(event_id AS varchar) AS event_id, seq"""
"""Logs the events queued; returns each one's id and seq."""
APPEND_BINDS = (
    bindparam("now", type_=UtcDateTime()),
    bindparam("occurred_at", type_=ARRAY(UtcDateTime())),
    bindparam("data", type_=ARRAY(LargeBinary())),
)


def append_pg_ctes(*more: str) -> str:
    """The append's common table expressions after `more` (a statement that writes other rows too)."""
    return "WITH " + ",\n".join([*more, _QUEUE_PG])


_APPEND_PG = text(append_pg_ctes() + LOG_QUEUED_PG).bindparams(*APPEND_BINDS)
"""`append` on PostgreSQL. The lock is taken before any row is queued (the outbox rows are produced from
the join with `settled`), so no `seq` is drawn outside it. An event already in the outbox is not queued, so
it is not logged again either."""


_MARK_PUBLISHED_PG = (
    update(outbox)
    .where(outbox.c.seq == any_(bindparam("seqs", type_=ARRAY(BigInteger))))
    .values(published_at=bindparam("at", type_=outbox.c.published_at.type))
)
_MARK_SEEN_PG = text(
    """
    INSERT INTO inbox (consumer, event_id, processed_at)
    SELECT :consumer, given.event_id, :at FROM unnest(CAST(:event_ids AS uuid[])) AS given(event_id)
    ON CONFLICT DO NOTHING
    RETURNING event_id
    """
).bindparams(bindparam("at", type_=UtcDateTime()))
"""`SqlAlchemyInbox.seen_many` on PostgreSQL: the ids it returns were not in the inbox yet."""
_READ_SETTLED = text("SELECT pg_advisory_xact_lock(:key)")


class SqlAlchemyEventLog:
    """Queries over the audit log, always in `seq` order."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def by_correlation(self, correlation_id: str) -> list[StoredEvent]:
        """One story: every event of a PodGroup or an inference request."""
        return await self._fetch(select(events).where(events.c.correlation_id == correlation_id))

    async def by_type(self, type_: str, *, limit: int = 1000) -> list[StoredEvent]:
        """Events of one type, oldest first: a walk of the log in `seq` order (no index by type; the product
        reads a story by correlation id, and this serves tests and tools)."""
        return await self._fetch(select(events).where(events.c.type == type_).limit(limit))

    async def correlations_with(self, type_: str, correlation_ids: Sequence[str]) -> set[str]:
        """Which of `correlation_ids` have at least one event of type `type_` (e.g. which answered requests
        have their `inference.completed`)."""
        found: set[str] = set()
        for start in range(0, len(correlation_ids), 500):
            chunk = list(correlation_ids[start : start + 500])
            rows = await self._session.execute(
                select(events.c.correlation_id)
                .where(events.c.type == type_, events.c.correlation_id.in_(chunk))
                .distinct()
            )
            found.update(row[0] for row in rows)
        return found

    async def latest_of(self, correlation_ids: Collection[str], type_: str | None = None) -> dict[str, str]:
        """The id of the latest event (of type `type_`, if given) of each of these stories that has one: what
        a new leader's first decision about it answers."""
        found: dict[str, str] = {}
        ids = sorted(set(correlation_ids))
        for start in range(0, len(ids), 500):
            latest = select(events.c.correlation_id, func.max(events.c.seq).label("seq")).where(
                events.c.correlation_id.in_(ids[start : start + 500])
            )
            if type_ is not None:
                latest = latest.where(events.c.type == type_)
            last = latest.group_by(events.c.correlation_id).subquery()
            rows = await self._session.execute(
                select(events.c.correlation_id, events.c.event_id).join(last, events.c.seq == last.c.seq)
            )
            found.update((row.correlation_id, str(row.event_id)) for row in rows)
        return found

    async def since(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        """Events after position `seq` (exclusive), for watching."""
        return await self._fetch(select(events).where(events.c.seq > seq).limit(limit))

    async def latest(self, limit: int) -> list[StoredEvent]:
        """The newest `limit` events, oldest first."""
        newest = await self._fetch(select(events).order_by(events.c.seq.desc()).limit(limit))
        return sorted(newest, key=lambda event: event.seq)

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
        if on_postgres(self._session):
            await self._session.execute(_READ_SETTLED, {"key": OUTBOX_APPEND_LOCK})


class SqlAlchemyOutbox:
    """Unpublished events for the relay."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def unpublished(
        self, limit: int, *, created_before: datetime | None = None, subjects: Collection[str] | None = None
    ) -> list[OutboxMessage]:
        """The oldest unpublished messages (only those created before `created_before`, and only on
        `subjects`, if given), locked (PostgreSQL) so that two polling relays never publish the same rows at
        once. (Relays publishing their own process's commits do not read here: the stream is not in global
        `seq` order.)"""
        query = select(outbox).where(outbox.c.published_at.is_(None))
        if created_before is not None:
            query = query.where(outbox.c.created_at < created_before)
        if subjects is not None:
            query = query.where(outbox.c.subject.in_(sorted(subjects)))
        query = query.order_by(outbox.c.seq).limit(limit).with_for_update()
        return [OutboxMessage(**row._asdict()) for row in await self._session.execute(query)]

    async def any_unpublished(
        self, *, created_before: datetime | None = None, subjects: Collection[str] | None = None
    ) -> bool:
        """Whether `unpublished` would find a row, read without locking any."""
        query = select(outbox.c.seq).where(outbox.c.published_at.is_(None))
        if created_before is not None:
            query = query.where(outbox.c.created_at < created_before)
        if subjects is not None:
            query = query.where(outbox.c.subject.in_(sorted(subjects)))
        return (await self._session.execute(query.limit(1))).first() is not None

    async def mark_published(self, seqs: Sequence[int], at: datetime) -> None:
        """Record that JetStream acknowledged these messages."""
        if not seqs:
            return
        if on_postgres(self._session):
            # One statement text for any number of rows: prepared once per connection.
            await self._session.execute(_MARK_PUBLISHED_PG, {"seqs": list(seqs), "at": at})
        else:
            low, high = min(seqs), max(seqs)
            # The relay's batches are runs of consecutive seqs: a range reads as one index range scan.
            chosen = (
                outbox.c.seq.between(low, high)
                if high - low + 1 == len(set(seqs))
                else outbox.c.seq.in_(seqs)
            )
            await self._session.execute(update(outbox).where(chosen).values(published_at=at))

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

    async def seen_many(self, consumer: str, event_ids: Sequence[uuid.UUID]) -> list[bool]:
        """`seen` for each event, in order, in one statement on PostgreSQL: an id repeated in the list is
        seen from its second time on."""
        if not on_postgres(self._session):
            return [await self.seen(consumer, event_id) for event_id in event_ids]
        fresh = list(dict.fromkeys(event_ids))
        if not fresh:
            return []
        parameters = {"consumer": consumer, "at": self._clock(), "event_ids": [str(e) for e in fresh]}
        marked = {uuid.UUID(str(row[0])) for row in await self._session.execute(_MARK_SEEN_PG, parameters)}
        first: set[uuid.UUID] = set()
        answers = []
        for event_id in event_ids:
            answers.append(event_id not in marked or event_id in first)
            first.add(event_id)
        return answers

    async def delete_older_than(self, cutoff: datetime) -> int:
        """Retention: forget marks older than `cutoff` (far beyond any redelivery)."""
        return rowcount(await self._session.execute(delete(inbox).where(inbox.c.processed_at < cutoff)))


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
