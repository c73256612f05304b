"""Node heartbeats: the node agents beat for the nodes they serve, the scheduler reads the counts."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.repositories._sql import dialect_of
from libs.db.schema import node_heartbeats


class SqlAlchemyNodeHeartbeatRepository:
    """The `node_heartbeats` table."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def beat(self, nodes: Collection[str], agent: str, at: datetime) -> None:
        """One beat for each node: its count goes up by one (a node beats first with count 1)."""
        if not nodes:
            return
        insert = _INSERTS[dialect_of(self._session)]
        rows: list[dict[str, Any]] = [
            {"node_name": node, "agent": agent, "beats": 1, "heard_at": at} for node in sorted(nodes)
        ]
        statement = insert(node_heartbeats).values(rows)
        statement = statement.on_conflict_do_update(
            index_elements=[node_heartbeats.c.node_name],
            set_={
                "agent": statement.excluded.agent,
                "heard_at": statement.excluded.heard_at,
                "beats": node_heartbeats.c.beats + 1,
            },
        )
        await self._session.execute(statement)

    async def counts(self) -> dict[str, int]:
        """Every node's beat count."""
        rows = await self._session.execute(select(node_heartbeats.c.node_name, node_heartbeats.c.beats))
        return {row.node_name: int(row.beats) for row in rows}


_INSERTS: dict[str, Any] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}
