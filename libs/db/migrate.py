"""Alembic, programmatically: the one way Podway creates and changes its schema (`podway migrate`).

Every function that touches a database is async and safe to call from a running event loop: it opens the
connection itself and hands it to `migrations/env.py` through `config.attributes["connection"]`, so Alembic
never calls `asyncio.run()`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from libs.db.engine import create_engine

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at the repository's `migrations/` directory."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


async def upgrade(url: str, revision: str = "head") -> None:
    """Upgrade the database at `url` to `revision` (default: the newest)."""
    await _run(url, lambda config: command.upgrade(config, revision))


async def downgrade(url: str, revision: str) -> None:
    """Downgrade the database at `url` to `revision` (`base` empties it)."""
    await _run(url, lambda config: command.downgrade(config, revision))


async def current(url: str) -> str | None:
    """The revision the database at `url` is at, or None when it was never migrated."""
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_current_revision)
    finally:
        await engine.dispose()


def revision(message: str) -> Path:
    """Write a new, empty migration script (hand-written, no autogenerate) and return its path."""
    script = command.revision(alembic_config(), message=message)
    if script is None or isinstance(script, list):
        raise RuntimeError(f"alembic did not create exactly one revision for {message!r}")
    return Path(script.path)


def head() -> str:
    """The newest revision in `migrations/versions`."""
    from alembic.script import ScriptDirectory

    found = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if found is None:
        raise RuntimeError("no migration scripts found")
    return found


async def upgrade_engine(engine: AsyncEngine, revision: str = "head") -> None:
    """Upgrade the database behind an existing engine (e.g. an in-memory SQLite one, which has no URL to
    reopen)."""
    await _run_on(engine, lambda config: command.upgrade(config, revision))


async def _run(url: str, alembic_command: Callable[[Config], None]) -> None:
    engine = create_engine(url)
    try:
        await _run_on(engine, alembic_command)
    finally:
        await engine.dispose()


async def _run_on(engine: AsyncEngine, alembic_command: Callable[[Config], None]) -> None:
    def run(sync_connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = sync_connection
        alembic_command(config)

    async with engine.connect() as connection:
        await connection.run_sync(run)
        await connection.commit()


def _current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()
