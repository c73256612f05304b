"""Objects created, objects replaced at the versions read, and the events they emit, written by one statement
on PostgreSQL.

A unit of work that writes them takes five round trips at least (BEGIN, the creates, the replacements, the
append, COMMIT), and under clients that wait for their answers the round trips, not the work in them, bound
how many writes a process makes per second. One statement is atomic on its own: on a connection in
autocommit it is its own transaction, so the writes, the outbox rows and the audit log rows commit together
in one round trip. A replacement whose object is no longer at the version read fails the whole statement, as
does a create whose object exists: nothing is written and the caller reads again (`ConflictError`).

Each object is named once (a row written twice in one statement is not seen by the second write)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import asyncpg
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.direct import NOT_AT_VERSION, DirectSession, is_unique_violation
from libs.db.errors import ConflictError
from libs.db.records import ObjectDraft, OutboxMessage, StoredObject
from libs.db.repositories.event_log import APPEND_BINDS, LOG_QUEUED_PG, EventRows, append_pg_ctes
from libs.db.repositories.objects import (
    _SET_BY_STORE,
    CREATE_ROWS_PG,
    _created_rows,
    _new_row,
    replaced_object,
    replacement_rows,
)


class WrittenAtOnce(NamedTuple):
    """What the statement wrote: the objects created and replaced, as stored, and the outbox rows queued."""

    created: list[StoredObject]
    replaced: list[StoredObject]
    committed: list[OutboxMessage]


_CREATED = f"created AS ({CREATE_ROWS_PG})"
_COLUMNS = ", ".join(f"objects.{column}" for column in _SET_BY_STORE)
_REPLACED = f"""
    replaced AS (
        UPDATE objects SET
            api_version = r.api_version,
            spec = CAST(r.spec AS jsonb),
            metadata = CAST(r.metadata AS jsonb),
            status = CAST(r.status AS jsonb),
            generation = objects.generation + CASE WHEN objects.spec <> CAST(r.spec AS jsonb) THEN 1 ELSE 0 END,
            resource_version = objects.resource_version + 1,
            updated_at = :now
        FROM unnest(
            CAST(:given_kind AS varchar[]), CAST(:given_namespace AS varchar[]), CAST(:given_name AS varchar[]),
            CAST(:given_expected AS bigint[]), CAST(:given_api_version AS varchar[]), CAST(:given_spec AS varchar[]),
            CAST(:given_metadata AS varchar[]), CAST(:given_status AS varchar[])
        ) AS r(kind, namespace, name, expected, api_version, spec, metadata, status)
        WHERE objects.kind = r.kind AND objects.namespace = r.namespace AND objects.name = r.name
            AND objects.resource_version = r.expected
        RETURNING {_COLUMNS}
    )"""
_WRITE_AT_ONCE = text(
    append_pg_ctes(_CREATED, _REPLACED)
    + f""",
    logged AS ({LOG_QUEUED_PG}),
    checked AS (
        SELECT conflict_unless((SELECT count(*) FROM replaced) = :replacing, 'replaced') AS ok
    )
    SELECT 'replaced' AS part, {", ".join(_SET_BY_STORE)}, CAST(NULL AS varchar) AS event_id,
        CAST(NULL AS bigint) AS seq
        FROM replaced, checked
    UNION ALL
    SELECT 'created', NULL, NULL, NULL, uid, NULL, NULL, NULL, NULL, NULL, revision, NULL, NULL, NULL
        FROM created, checked
    UNION ALL
    SELECT 'logged', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, event_id, seq
        FROM logged, checked
    """
).bindparams(*APPEND_BINDS)
"""Every part is joined with `checked`, so the count of replacements is compared before a row is returned, and
a shortfall fails the statement."""


async def write_at_once(
    session: AsyncSession | DirectSession,
    creates: Sequence[ObjectDraft],
    replacements: Sequence[tuple[ObjectDraft, int]],
    rows: EventRows,
) -> WrittenAtOnce:
    """Create `creates`, replace each of `replacements` while it is at the version given with it, and append the
    events of `rows`, in one statement (on a session in autocommit, or a direct connection: one transaction;
    see the module). Every object is named once. ConflictError, writing nothing, when an object to create
    exists or one to replace is not at its version."""
    if not (creates or replacements or rows.envelopes):
        return WrittenAtOnce([], [], [])
    now = rows.now
    new_rows = [_new_row(draft, now) for draft in creates]
    parameters = {
        **_created_rows(new_rows, now),
        **replacement_rows(replacements),
        "replacing": len(replacements),
        **rows.pg_parameters(),
    }
    try:
        if isinstance(session, DirectSession):
            found: list[Any] = await session.fetch(_WRITE_AT_ONCE, parameters)
        else:
            found = list(await session.execute(_WRITE_AT_ONCE, parameters))
    except (IntegrityError, DBAPIError, asyncpg.PostgresError) as exc:
        conflict = _conflict(exc, creates, replacements)
        if conflict is None:
            raise
        raise conflict from exc
    revisions = {row.uid: row.revision for row in found if row.part == "created"}
    by_key = {(row.kind, row.namespace, row.name): row for row in found if row.part == "replaced"}
    stored = [
        replaced_object(draft, by_key[(draft.kind, draft.namespace, draft.name)]) for draft, _ in replacements
    ]
    seq_of = {uuid.UUID(row.event_id): int(row.seq) for row in found if row.part == "logged"}
    return WrittenAtOnce(
        created=[
            StoredObject(**row, revision=revisions[row["uid"]], created_revision=revisions[row["uid"]])
            for row in new_rows
        ],
        replaced=stored,
        committed=rows.committed(seq_of),
    )


def _conflict(
    error: Exception, creates: Sequence[ObjectDraft], replacements: Sequence[tuple[ObjectDraft, int]]
) -> ConflictError | None:
    """The ConflictError a failed statement means; None when it is not a conflict."""
    cause = getattr(error, "orig", error)
    if isinstance(error, IntegrityError) or is_unique_violation(cause):
        return ConflictError(f"{len(creates)} objects: at least one already exists")
    if getattr(cause, "sqlstate", None) == NOT_AT_VERSION:
        return ConflictError(_missed(replacements))
    return None


def _missed(replacements: Sequence[tuple[ObjectDraft, int]]) -> str:
    refs = ", ".join(f"{draft.kind} {draft.namespace}/{draft.name}" for draft, _ in replacements)
    return f"not at the version read (changed or gone since): one of {refs}"
