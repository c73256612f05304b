"""Snapshot reads: on SQLite, a read-only engine whose transactions wait for no writer and write nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.exc import OperationalError

from libs.db.engine import create_engine, create_session_factory, dispose_snapshot, snapshot_engine
from libs.db.records import ObjectDraft
from libs.db.repositories.objects import MUST_NOT_EXIST
from libs.db.uow import SqlAlchemyUnitOfWork, unit_of_work_factory
from tests.conftest import SQLITE_ONLY, FakeClock
from tests.integration.db.builders import make_draft

UowFactory = Callable[[], SqlAlchemyUnitOfWork]


@SQLITE_ONLY
async def test_a_snapshot_reads_while_a_writer_holds_the_lock_and_sees_only_what_was_committed(
    database_url: str, uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft(name="committed"), expected_resource_version=MUST_NOT_EXIST)
        await uow.commit()
    writer_engine = create_engine(database_url)
    snapshot = snapshot_engine(database_url, writer_engine)
    assert snapshot is not writer_engine
    snapshots = unit_of_work_factory(create_session_factory(snapshot), clock=fake_clock)
    writers = unit_of_work_factory(create_session_factory(writer_engine), clock=fake_clock)
    try:
        async with writers() as writer:
            # The writer holds SQLite's write lock (BEGIN IMMEDIATE) until it leaves this block. A read that
            # waited for it would wait here until the busy timeout and fail.
            await writer.objects.upsert(
                make_draft(name="uncommitted"), expected_resource_version=MUST_NOT_EXIST
            )
            async with snapshots() as reader:
                names = sorted(o.name for o in await reader.objects.find("PodGroup"))
            assert names == ["committed"]
    finally:
        await dispose_snapshot(snapshot, writer_engine)
        await writer_engine.dispose()


@SQLITE_ONLY
async def test_a_snapshot_refuses_to_write(database_url: str, fake_clock: FakeClock) -> None:
    engine = create_engine(database_url, read_only=True)
    snapshots = unit_of_work_factory(create_session_factory(engine), clock=fake_clock)
    try:
        async with snapshots() as reader:
            with pytest.raises(OperationalError, match="readonly"):
                await reader.objects.upsert(
                    ObjectDraft(kind="Job", api_version="batch/v1", namespace="ml", name="x")
                )
    finally:
        await engine.dispose()


async def test_on_postgresql_the_snapshot_engine_is_the_engine_itself(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        expected_own = database_url.startswith("sqlite")
        snapshot = snapshot_engine(database_url, engine)
        assert (snapshot is not engine) == expected_own
        await dispose_snapshot(snapshot, engine)
    finally:
        await engine.dispose()
