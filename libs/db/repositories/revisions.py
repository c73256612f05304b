"""Revisions: the order of committed object changes, as the Kubernetes API's resourceVersion needs it.

Writes leave the objects they touch unstamped (a trigger clears `revision`; a delete leaves an unstamped
tombstone); the unit of work calls `stamp` as the last statement before it commits: it takes the next revision
under the counter's row lock, held only until that commit, so a reader that sees revision N has seen every
commit before it. Repositories that write objects call `objects_written` so that transactions writing none
skip the counter."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_, update
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
