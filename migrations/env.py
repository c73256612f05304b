"""Alembic environment: async engines, batch mode on SQLite, and a caller-supplied connection when given.

`libs.db.migrate` runs inside an event loop, so it opens the connection itself and passes it in
`config.attributes["connection"]`; the Alembic CLI gets none and this module opens one from the URL.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from libs.db.engine import create_engine
from libs.db.schema import metadata

config = context.config


def _database_url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("PODWAY_DATABASE_URL")
    if not url:
        raise RuntimeError("set PODWAY_DATABASE_URL or sqlalchemy.url to the database to migrate")
    return url


def run_migrations(connection: Connection) -> None:
    """Run the pending migrations on an open synchronous connection."""
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine() -> None:
    engine = create_engine(_database_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


def _run_offline() -> None:
    context.configure(url=_database_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _run_offline()
elif (given := config.attributes.get("connection")) is not None:
    run_migrations(given)
else:
    asyncio.run(_run_with_own_engine())
