"""Conditions in their own rows, one owner per condition type, Kubernetes transition-time semantics."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, case, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.errors import ConditionOwnershipError
from libs.db.ports import Clock
from libs.db.records import Condition
from libs.db.repositories._sql import dialect_of
from libs.db.schema import conditions


class SqlAlchemyConditionRepository:
    """The `conditions` table."""

    def __init__(self, session: AsyncSession, clock: Clock) -> None:
        self._session = session
        self._clock = clock

    async def set(self, condition: Condition) -> Condition:
        """Write a condition. `last_transition_time` moves only when the status changes; a condition type
        written by another owner is refused."""
        return (await self.set_many([condition]))[0]

    async def set_many(self, many: Sequence[Condition]) -> list[Condition]:
        """`set` for many conditions (one per object and type) in one upsert, whatever their number; on
        ConditionOwnershipError roll back (the others may be written)."""
        if not many:
            return []
        now = self._clock()
        statement = _UPSERTS[dialect_of(self._session)]
        rows = [
            dataclasses.asdict(dataclasses.replace(c, last_transition_time=c.last_transition_time or now))
            for c in many
        ]
        written = {
            (r.object_uid, r.type): r.last_transition_time
            for r in await self._session.execute(statement, rows)
        }
        refused = next((c for c in many if (c.object_uid, c.type) not in written), None)
        if refused is not None:
            current = await self._get(refused.object_uid, refused.type)
            raise ConditionOwnershipError(
                f"condition {refused.type} of {refused.object_uid} is owned by "
                f"{current.owner if current else 'another writer'}, not {refused.owner}"
            )
        return [dataclasses.replace(c, last_transition_time=written[(c.object_uid, c.type)]) for c in many]

    async def get(self, object_uid: str, type_: str) -> Condition | None:
        """One condition, or None."""
        return await self._get(object_uid, type_)

    async def list_for(self, object_uid: str) -> list[Condition]:
        """All conditions of an object, by type."""
        rows = await self._session.execute(
            select(conditions).where(conditions.c.object_uid == object_uid).order_by(conditions.c.type)
        )
        return [_to_condition(row) for row in rows]

    async def with_status(self, type_: str, status: str) -> list[Condition]:
        """Every condition of a type with this status (e.g. pods marked `DisruptionTarget=True`)."""
        rows = await self._session.execute(
            select(conditions)
            .where(conditions.c.type == type_, conditions.c.status == status)
            .order_by(conditions.c.object_uid)
        )
        return [_to_condition(row) for row in rows]

    async def _get(self, object_uid: str, type_: str) -> Condition | None:
        query = select(conditions).where(conditions.c.object_uid == object_uid, conditions.c.type == type_)
        row = (await self._session.execute(query)).first()
        return _to_condition(row) if row else None


def _to_condition(row: Row[Any]) -> Condition:
    return Condition(**row._asdict())


def _upsert(dialect: Any) -> Any:
    """The upsert `set_many` runs, built once per dialect (building its `excluded` columns costs more than
    compiling it from the cache)."""
    upsert = dialect.insert(conditions)
    return upsert.on_conflict_do_update(
        index_elements=[conditions.c.object_uid, conditions.c.type],
        set_={
            "status": upsert.excluded.status,
            "reason": upsert.excluded.reason,
            "message": upsert.excluded.message,
            "observed_generation": upsert.excluded.observed_generation,
            "last_transition_time": case(
                (conditions.c.status == upsert.excluded.status, conditions.c.last_transition_time),
                else_=upsert.excluded.last_transition_time,
            ),
        },
        where=conditions.c.owner == upsert.excluded.owner,
    ).returning(conditions.c.object_uid, conditions.c.type, conditions.c.last_transition_time)


_UPSERTS = {"postgresql": _upsert(postgresql), "sqlite": _upsert(sqlite)}
