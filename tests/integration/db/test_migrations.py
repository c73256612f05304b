"""The Alembic history builds the schema the code expects, and unwinds it, on both databases."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from libs.db import migrate
from libs.db.engine import create_engine
from libs.db.schema import metadata

TABLES = {
    "device_allocations",
    "device_capacity",
    "nominations",
    "node_heartbeats",
    "objects",
    "object_tombstones",
    "revisions",
    "conditions",
    "leases",
    "pod_bindings",
    "outbox",
    "events",
    "inbox",
}


async def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            names = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    finally:
        await engine.dispose()
    return names - {"alembic_version", "sqlite_sequence"}


async def _schema_differences(url: str) -> list[object]:
    def compare(connection: Connection) -> list[object]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))

    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(compare)
    finally:
        await engine.dispose()


async def test_upgrade_then_downgrade_to_base_then_upgrade_again(empty_database_url: str) -> None:
    assert await migrate.current(empty_database_url) is None

    await migrate.upgrade(empty_database_url)
    assert await migrate.current(empty_database_url) == migrate.head()
    assert await _tables(empty_database_url) == TABLES

    await migrate.downgrade(empty_database_url, "base")
    assert await migrate.current(empty_database_url) is None
    assert await _tables(empty_database_url) == set()

    await migrate.upgrade(empty_database_url)
    assert await _tables(empty_database_url) == TABLES


# SQLite cannot reflect expression indexes; the PostgreSQL-only one is compared on PostgreSQL.
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
async def test_migrated_schema_matches_the_tables_the_code_uses(database_url: str) -> None:
    assert await _schema_differences(database_url) == []


def test_revision_writes_a_new_script_after_the_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(migrate, "MIGRATIONS_DIR", copy)
    head_before = migrate.head()

    script = migrate.revision("add node taints")

    assert script.parent == copy / "versions"
    assert f"down_revision: str | None = {head_before!r}" in script.read_text()
    assert migrate.head() != head_before
