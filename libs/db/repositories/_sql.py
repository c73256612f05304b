"""Small SQL helpers shared by the repositories."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

STALE_EPOCH_MESSAGE = "podway: stale epoch"
"""Prefix of the error the fencing triggers raise (see migrations/versions/0001_initial.py)."""


def insert_ignoring_duplicates(session: AsyncSession, table: Table, values: dict[str, Any]) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING in the session's dialect; rowcount says whether a row went in."""
    dialect = session.get_bind().dialect.name
    module: Any = postgresql if dialect == "postgresql" else sqlite
    return module.insert(table).values(values).on_conflict_do_nothing()


def rowcount(result: Any) -> int:
    """Rows an INSERT/UPDATE/DELETE touched."""
    return int(result.rowcount)


def is_stale_epoch(error: DBAPIError) -> bool:
    """Whether the database refused a write because its lease epoch is stale."""
    return STALE_EPOCH_MESSAGE in str(error.orig)
