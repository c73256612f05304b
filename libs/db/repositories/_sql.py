"""Small SQL helpers shared by the repositories."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, bindparam, column, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

STALE_EPOCH_MESSAGE = "podway: stale epoch"
"""Prefix of the error the fencing triggers raise (see migrations/versions/0001_initial.py)."""


def dialect_of(session: AsyncSession) -> str:
    """`postgresql` or `sqlite`: where a repository writes the same thing two ways."""
    return str(session.get_bind().dialect.name)


def on_postgres(session: AsyncSession) -> bool:
    return dialect_of(session) == "postgresql"


def unnest_rows(*columns: tuple[str, Any]) -> Any:
    """`unnest(:given_a, :given_b, ...) AS given(a, b, ...)` over array parameters (PostgreSQL): many rows
    passed to one statement.

    PostgreSQL plans this as a loop of index probes, whatever it knows of the table: it estimates an array
    parameter at 10 rows. A `jsonb_to_recordset` or VALUES source is estimated at 100 rows, and on a table
    not analysed yet (every fresh database, for its first minute) that tips the plan into a hash join over a
    full scan, milliseconds per statement. The statement text is the same however many rows are given, so it
    is compiled once and prepared once per connection.
    """
    arrays = [bindparam(f"given_{name}", type_=ARRAY(type_)) for name, type_ in columns]
    return (
        func.unnest(*arrays)
        .table_valued(*(column(name, type_) for name, type_ in columns))
        .render_derived(name="given")
    )


def insert_ignoring_duplicates(session: AsyncSession, table: Table, values: dict[str, Any]) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING in the session's dialect; rowcount says whether a row went in."""
    module: Any = postgresql if on_postgres(session) else sqlite
    return module.insert(table).values(values).on_conflict_do_nothing()


def rowcount(result: Any) -> int:
    """Rows an INSERT/UPDATE/DELETE touched."""
    return int(result.rowcount)


def is_stale_epoch(error: DBAPIError) -> bool:
    """Whether the database refused a write because its lease epoch is stale."""
    return STALE_EPOCH_MESSAGE in str(error.orig)
