"""Revisions: the order of committed object changes, as the Kubernetes API's resourceVersion needs it.

Writes leave the objects they touch unstamped (a trigger clears `revision`; a delete leaves an unstamped
tombstone); the unit of work calls `stamp` as the last statement before it commits: it takes the next revision
under the counter's row lock, held only until that commit, so a reader that sees revision N has seen every
commit before it. Repositories that write objects call `objects_written` so that transactions writing none
skip the counter."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.records import Change, Changes, StoredObject
from libs.db.schema import object_tombstones, objects, revisions

_WRITTEN = "podway.objects_written"


def objects_written(session: AsyncSession) -> None:
    """Note that this transaction wrote or deleted objects: its commit takes a revision."""
    session.info[_WRITTEN] = True


async def stamp(session: AsyncSession) -> int | None:
    """Give what this transaction wrote the next revision; None when it wrote no object."""
    if not session.info.pop(_WRITTEN, False):
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
        """(the last committed revision, the oldest revision a watch may resume after)."""
        row = (await self._session.execute(select(revisions.c.current, revisions.c.compacted))).one()
        return int(row.current), int(row.compacted)

    async def changes_after(
        self, after: int, *, kinds: list[str] | None = None, limit: int = 5000
    ) -> Changes:
        """Objects written and deleted after revision `after`, in revision order, up to the revision
        committed when asked (rows written later wait for the next call). Reads the counter first: every
        revision up to it has committed, so none is skipped. Deletions of objects first written after `after`
        are included too: a watcher may have seen them in a list."""
        current, compacted = await self.current()
        written = select(objects).where(objects.c.revision > after, objects.c.revision <= current)
        gone = select(object_tombstones).where(
            object_tombstones.c.revision > after, object_tombstones.c.revision <= current
        )
        if kinds:
            written = written.where(objects.c.kind.in_(kinds))
            gone = gone.where(object_tombstones.c.kind.in_(kinds))
        written = written.order_by(objects.c.revision)
        gone = gone.order_by(object_tombstones.c.revision, object_tombstones.c.seq)
        rows = [await self._rows(query, limit) for query in (written, gone)]
        upto = current
        for found in rows:
            if len(found) >= limit:
                upto = min(upto, found[-1].revision - 1)
        if upto < current and upto <= after:
            # One revision alone holds more than `limit` changes (a large batch): read all of it.
            first = min(found[0].revision for found in rows if found)
            rows = [
                await self._rows(query.where(query.selected_columns.revision == first), None)
                for query in (written, gone)
            ]
            upto = first
        changes = [Change(False, StoredObject(**row._asdict())) for row in rows[0] if row.revision <= upto]
        changes += [Change(True, _tombstone(row)) for row in rows[1] if row.revision <= upto]
        changes.sort(key=lambda change: change.object.revision or 0)
        return Changes(revision=upto, compacted=compacted, changes=changes)

    async def _rows(self, query: Any, limit: int | None) -> list[Any]:
        if limit is not None:
            query = query.limit(limit)
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
