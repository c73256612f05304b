"""Conditions in their own rows, one owner per condition type, Kubernetes transition-time semantics. A
condition is part of its object: writing a changed one moves the object's resource version on."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import BigInteger, Row, String, and_, any_, bindparam, case, exists, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.errors import ConditionOwnershipError
from libs.db.ports import Clock
from libs.db.records import Condition
from libs.db.repositories._sql import dialect_of, unnest_rows
from libs.db.repositories.revisions import objects_written
from libs.db.schema import conditions, objects
from libs.db.types import json_text


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
        dialect = dialect_of(self._session)
        objects_written(self._session)
        await self._session.execute(_BUMPS[dialect], {**_given(dialect, many), "updated_at": now})
        statement = _UPSERTS[dialect]
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

    async def list_for_many(self, object_uids: Iterable[str]) -> dict[str, list[Condition]]:
        """The conditions of many objects, by object uid and then type (objects without any are left out)."""
        found: dict[str, list[Condition]] = {}
        distinct = list(dict.fromkeys(object_uids))
        if dialect_of(self._session) == "postgresql" and distinct:
            for row in await self._session.execute(_FOR_MANY_PG, {"uids": distinct}):
                found.setdefault(row.object_uid, []).append(_to_condition(row))
            return found
        for start in range(0, len(distinct), 500):
            query = select(conditions).where(conditions.c.object_uid.in_(distinct[start : start + 500]))
            for row in await self._session.execute(
                query.order_by(conditions.c.object_uid, conditions.c.type)
            ):
                found.setdefault(row.object_uid, []).append(_to_condition(row))
        return found

    async def _get(self, object_uid: str, type_: str) -> Condition | None:
        query = select(conditions).where(conditions.c.object_uid == object_uid, conditions.c.type == type_)
        row = (await self._session.execute(query)).first()
        return _to_condition(row) if row else None


_FOR_MANY_PG = (
    select(conditions)
    .where(conditions.c.object_uid == any_(bindparam("uids", type_=ARRAY(String))))
    .order_by(conditions.c.object_uid, conditions.c.type)
)
"""`list_for_many` on PostgreSQL: one statement text for any number of objects, prepared once per connection
(an IN list of 500 is rendered and compiled again on every call)."""


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

_COMPARED = (("uid", String), ("type", String), ("status", String), ("reason", String), ("message", String))


def _bump(dialect: str) -> Any:
    """`UPDATE objects SET resource_version = resource_version + 1` for the objects whose given conditions
    differ from the stored ones (run before the upsert). The text does not depend on how many are given, nor
    on the time, which is a parameter: no call builds a statement of its own."""
    if dialect == "postgresql":
        given: Any = unnest_rows(*_COMPARED, ("generation", BigInteger))
        column = {name: given.c[name] for name, _ in (*_COMPARED, ("generation", None))}
    else:
        each = func.json_each(bindparam("rows", type_=String)).table_valued("value").alias("given")
        names = [name for name, _ in _COMPARED] + ["generation"]
        column = {name: func.json_extract(each.c.value, f"$[{i}]") for i, name in enumerate(names)}
    unchanged = exists().where(
        and_(
            conditions.c.object_uid == column["uid"],
            conditions.c.type == column["type"],
            conditions.c.status == column["status"],
            conditions.c.reason == column["reason"],
            conditions.c.message == column["message"],
            conditions.c.observed_generation.is_not_distinct_from(column["generation"]),
        )
    )
    return (
        update(objects)
        .where(objects.c.uid == column["uid"], ~unchanged)
        .values(
            resource_version=objects.c.resource_version + 1,
            updated_at=bindparam("updated_at", type_=objects.c.updated_at.type),
        )
    )


def _given(dialect: str, many: Sequence[Condition]) -> dict[str, Any]:
    values = [(c.object_uid, c.type, c.status, c.reason, c.message, c.observed_generation) for c in many]
    if dialect == "postgresql":
        names = [name for name, _ in _COMPARED] + ["generation"]
        return {f"given_{name}": [row[i] for row in values] for i, name in enumerate(names)}
    return {"rows": json_text([list(row) for row in values])}


_BUMPS = {dialect: _bump(dialect) for dialect in ("postgresql", "sqlite")}
