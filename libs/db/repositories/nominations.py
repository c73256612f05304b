"""Nominations: room the preemptor made for a PodGroup, held for it until it expires."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.records import Nomination
from libs.db.repositories._sql import dialect_of
from libs.db.schema import nominations


class SqlAlchemyNominationRepository:
    """The `nominations` table."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def put(self, nomination: Nomination) -> None:
        """Record a nomination, replacing the group's earlier one."""
        dialect = dialect_of(self._session)
        insert = _INSERTS[dialect]
        values: dict[str, Any] = {
            "podgroup_uid": nomination.podgroup_uid,
            "nodes": list(nomination.nodes),
            "expires_at": nomination.expires_at,
            "nominated_at": nomination.nominated_at,
        }
        statement = insert(nominations).values(values)
        statement = statement.on_conflict_do_update(
            index_elements=[nominations.c.podgroup_uid],
            set_={key: statement.excluded[key] for key in ("nodes", "expires_at", "nominated_at")},
        )
        await self._session.execute(statement)

    async def active(self, now: datetime) -> list[Nomination]:
        """Nominations that have not expired at `now`."""
        rows = await self._session.execute(
            select(nominations).where(nominations.c.expires_at > now).order_by(nominations.c.podgroup_uid)
        )
        return [
            Nomination(row.podgroup_uid, tuple(row.nodes), row.expires_at, row.nominated_at) for row in rows
        ]

    async def clear(self, podgroup_uid: str) -> bool:
        """Remove a group's nomination; False when it had none."""
        result = await self._session.execute(
            delete(nominations).where(nominations.c.podgroup_uid == podgroup_uid)
        )
        return bool(getattr(result, "rowcount", 0))


_INSERTS: dict[str, Any] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}
