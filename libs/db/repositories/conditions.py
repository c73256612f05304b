"""Conditions in their own rows, one owner per condition type, Kubernetes transition-time semantics."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, insert, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.errors import ConditionOwnershipError
from libs.db.ports import Clock
from libs.db.records import Condition
from libs.db.schema import conditions


class SqlAlchemyConditionRepository:
    """The `conditions` table."""

    def __init__(self, session: AsyncSession, clock: Clock) -> None:
        self._session = session
        self._clock = clock

    async def set(self, condition: Condition) -> Condition:
        """Write a condition. `last_transition_time` moves only when the status changes; a condition type
        written by another owner is refused."""
        current = await self._get(condition.object_uid, condition.type, for_update=True)
        if current is not None and current.owner != condition.owner:
            raise ConditionOwnershipError(
                f"condition {condition.type} of {condition.object_uid} is owned by {current.owner}, "
                f"not {condition.owner}"
            )
        stored = dataclasses.replace(
            condition, last_transition_time=self._transition_time(current, condition)
        )
        values = dataclasses.asdict(stored)
        if current is None:
            await self._session.execute(insert(conditions).values(values))
        else:
            await self._session.execute(
                update(conditions)
                .where(conditions.c.object_uid == condition.object_uid, conditions.c.type == condition.type)
                .values(values)
            )
        return stored

    async def set_many(self, many: Sequence[Condition]) -> list[Condition]:
        """`set` for many conditions (one per object and type) in three statements, whatever their number."""
        if not many:
            return []
        keys = [(c.object_uid, c.type) for c in many]
        query = select(conditions).where(tuple_(conditions.c.object_uid, conditions.c.type).in_(keys))
        found = {
            (c.object_uid, c.type): c
            for c in map(_to_condition, await self._session.execute(query.with_for_update()))
        }
        stored: list[Condition] = []
        for condition in many:
            current = found.get((condition.object_uid, condition.type))
            if current is not None and current.owner != condition.owner:
                raise ConditionOwnershipError(
                    f"condition {condition.type} of {condition.object_uid} is owned by {current.owner}, "
                    f"not {condition.owner}"
                )
            stored.append(
                dataclasses.replace(condition, last_transition_time=self._transition_time(current, condition))
            )
        new = [dataclasses.asdict(c) for c in stored if (c.object_uid, c.type) not in found]
        changed = [_keyed(c) for c in stored if (c.object_uid, c.type) in found]
        if new:
            await self._session.execute(insert(conditions), new)
        if changed:
            await self._session.execute(_UPDATE_BY_KEY, changed)
        return stored

    async def get(self, object_uid: str, type_: str) -> Condition | None:
        """One condition, or None."""
        return await self._get(object_uid, type_, for_update=False)

    async def list_for(self, object_uid: str) -> list[Condition]:
        """All conditions of an object, by type."""
        rows = await self._session.execute(
            select(conditions).where(conditions.c.object_uid == object_uid).order_by(conditions.c.type)
        )
        return [_to_condition(row) for row in rows]

    async def _get(self, object_uid: str, type_: str, *, for_update: bool) -> Condition | None:
        query = select(conditions).where(conditions.c.object_uid == object_uid, conditions.c.type == type_)
        if for_update:
            query = query.with_for_update()
        row = (await self._session.execute(query)).first()
        return _to_condition(row) if row else None

    def _transition_time(self, current: Condition | None, new: Condition) -> datetime:
        if current is not None and current.status == new.status and current.last_transition_time:
            return current.last_transition_time
        return new.last_transition_time or self._clock()


_UPDATE_BY_KEY = (
    update(conditions)
    .where(conditions.c.object_uid == bindparam("key_uid"), conditions.c.type == bindparam("key_type"))
    .values(
        {
            name: bindparam(name)
            for name in ("status", "reason", "message", "observed_generation", "last_transition_time")
        }
    )
)


def _keyed(condition: Condition) -> dict[str, Any]:
    values = dataclasses.asdict(condition)
    return {**values, "key_uid": values.pop("object_uid"), "key_type": values.pop("type")}


def _to_condition(row: Row[Any]) -> Condition:
    return Condition(**row._asdict())
