"""Revisions: the order of committed object changes, as the Kubernetes API's resourceVersion needs it.

PostgreSQL (migration 0008): a trigger gives each written object, and each deletion's tombstone, its
transaction's revision, taken from a sequence at the transaction's first object write (after the transaction
has its id). Revisions then do not follow commit order: a transaction with revision 10 may commit after one
with 11. A reader therefore settles first (`current`): it reads the sequence's last value L, then waits until
every transaction that was writing has ended; every revision up to L is then committed or gone for good, so a
read after that sees all of them and a cursor at L skips none. Only writing transactions are waited for (a
reader has no transaction id), and those are short: units of work.

SQLite (migrations 0007): writers are one at a time, so the unit of work stamps what a transaction wrote with
the next revision as the last statement before it commits (a trigger leaves written objects unstamped), and
revisions follow commit order. Repositories that write objects call `objects_written` so that transactions
writing none skip the counter."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.records import Change, Changes, StoredObject
from libs.db.repositories._sql import on_postgres
from libs.db.schema import object_tombstones, objects, revisions

_WRITTEN = "podway.objects_written"
SETTLE_TIMEOUT_S = 10.0
"""How long a reader waits for the transactions writing when it asked to end."""
_TAKEN = text("SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM object_revision")
# A transaction holds the lock on its own id from the moment it has one until it has ended and its writes are
# visible (as row locks wait for it); pg_snapshot_xip would miss ids assigned after the newest completed one.
_WRITING = text(
    "SELECT CAST(l.transactionid AS text) FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid "
    "WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted "
    "AND a.datname = current_database() AND l.pid <> pg_backend_pid()"
)
_STILL_WRITING = text(
    "SELECT CAST(transactionid AS text) FROM pg_locks WHERE locktype = 'transactionid' "
    "AND mode = 'ExclusiveLock' AND granted AND transactionid = ANY(CAST(CAST(:xids AS text[]) AS xid[]))"
)


class RevisionsUnsettled(Exception):
    """A transaction that writes objects stayed open longer than a reader may wait for it."""


def objects_written(session: AsyncSession) -> None:
    """Note that this transaction wrote or deleted objects: its commit takes a revision."""
    session.info[_WRITTEN] = True


async def stamp(session: AsyncSession) -> int | None:
    """Give what this transaction wrote the next revision; None when it wrote no object."""
    if not session.info.pop(_WRITTEN, False) or on_postgres(session):
        return None
    bumped = update(revisions).where(revisions.c.id == 1).values(current=revisions.c.current + 1)
    revision = int((await session.execute(bumped.returning(revisions.c.current))).scalar_one())
    created = func.coalesce(objects.c.created_revision, revision)
    unstamped = objects.c.revision.is_(None)
    await session.execute(
        update(objects).where(unstamped).values(revision=revision, created_revision=created)
    )
    gone = object_tombstones.c.revision.is_(None)
    await session.execute(update(object_tombstones).where(gone).values(revision=revision))
    return revision


def forget_written(session: AsyncSession) -> None:
    """A rolled-back transaction has nothing to stamp."""
    session.info.pop(_WRITTEN, None)


class SqlAlchemyRevisionRepository:
    """The revision counter and what changed since a revision."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def current(self) -> tuple[int, int]:
        """(the last settled revision: every revision up to it has committed or never will, the oldest
        revision a watch may resume after). What is read after this call sees every revision up to it."""
        row = (await self._session.execute(select(revisions.c.current, revisions.c.compacted))).one()
        if on_postgres(self._session):
            return await self._settled(), int(row.compacted)
        return int(row.current), int(row.compacted)

    async def _settled(self) -> int:
        taken = int((await self._session.execute(_TAKEN)).scalar_one())
        writing = list((await self._session.execute(_WRITING)).scalars())
        deadline, pause = time.monotonic() + SETTLE_TIMEOUT_S, 0.0005
        while writing:
            if time.monotonic() > deadline:
                raise RevisionsUnsettled(
                    f"transactions {', '.join(writing)} kept writing for over {SETTLE_TIMEOUT_S:.0f} s"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.02)
            writing = list((await self._session.execute(_STILL_WRITING, {"xids": writing})).scalars())
        return taken

    async def changes_after(
        self, after: int, *, after_uid: str | None = None, kinds: list[str] | None = None, limit: int = 5000
    ) -> Changes:
        """Objects written and deleted after revision `after` (or, with `after_uid`, after that object of
        revision `after`), in (revision, uid) order, at most `limit`, up to the revision committed when asked
        (rows written later wait for the next call). Reads the counter first: every revision up to it has
        committed, so none is skipped. A page that ends inside a revision says where (`partial_uid`): a
        revision of any size is read in pages. Deletions of objects first written after `after` are included
        too: a watcher may have seen them in a list."""
        current, compacted = await self.current()
        found = [
            await self._changed(table, after, after_uid, current, kinds, limit)
            for table in (objects, object_tombstones)
        ]
        merged = sorted(
            [Change(False, StoredObject(**row._asdict())) for row in found[0]]
            + [Change(True, _tombstone(row)) for row in found[1]],
            key=_position,
        )
        if len(merged) <= limit and all(len(rows) < limit for rows in found):
            return Changes(revision=current, compacted=compacted, changes=merged)
        # A table that filled its limit may hold more after its last row: nothing past that row is known.
        cuts = [
            max((_row_position(row) for row in rows), default=(0, "")) for rows in found if len(rows) >= limit
        ]
        cut = min(cuts) if cuts else _position(merged[-1])
        page = [change for change in merged if _position(change) <= cut][:limit]
        revision, uid = _position(page[-1])
        # The page ends at (revision, uid): the rest of that revision is asked for after uid.
        return Changes(revision=revision, compacted=compacted, changes=page, partial_uid=uid)

    async def _changed(
        self,
        table: Any,
        after: int,
        after_uid: str | None,
        current: int,
        kinds: list[str] | None,
        limit: int,
    ) -> list[Any]:
        position = tuple_(table.c.revision, table.c.uid)
        since = position > tuple_(after, after_uid) if after_uid is not None else table.c.revision > after
        query = select(table).where(since, table.c.revision <= current)
        if kinds:
            query = query.where(table.c.kind.in_(kinds))
        query = query.order_by(table.c.revision, table.c.uid).limit(limit)
        return list(await self._session.execute(query))

    async def compact_deleted_before(self, cutoff: datetime) -> int:
        """Compact up to the newest revision of a deletion older than `cutoff`; how many tombstones went."""
        newest = select(func.max(object_tombstones.c.revision)).where(object_tombstones.c.deleted_at < cutoff)
        revision = (await self._session.execute(newest)).scalar()
        return 0 if revision is None else await self.compact(int(revision))

    async def compact(self, before: int) -> int:
        """Forget tombstones of revisions up to `before`; a watch may no longer resume from before it. How
        many tombstones went."""
        result = await self._session.execute(
            object_tombstones.delete().where(object_tombstones.c.revision <= before)
        )
        await self._session.execute(
            update(revisions)
            .where(revisions.c.id == 1, revisions.c.compacted < before)
            .values(compacted=before)
        )
        return int(getattr(result, "rowcount", 0) or 0)


def _position(change: Change) -> tuple[int, str]:
    return change.object.revision or 0, change.object.uid


def _row_position(row: Any) -> tuple[int, str]:
    return int(row.revision), str(row.uid)


def _tombstone(row: Any) -> StoredObject:
    return StoredObject(
        kind=row.kind,
        api_version=row.api_version,
        namespace=row.namespace,
        name=row.name,
        uid=row.uid,
        generation=0,
        resource_version=row.resource_version,
        spec=row.spec,
        metadata=row.metadata,
        status=row.status,
        created_at=row.created_at,
        updated_at=row.deleted_at,
        revision=row.revision,
    )
