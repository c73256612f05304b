"""`podway gc` as a user runs it: the retention policy by default, `--older-than` as before, on both
databases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from libs.client.cli import main
from libs.db.engine import create_engine, create_session_factory
from libs.db.uow import unit_of_work_factory
from libs.events.envelope import Envelope
from tests.integration.db.builders import make_envelope


async def _write(url: str, envelopes: list[Envelope]) -> None:
    engine = create_engine(url)
    try:
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            for envelope in envelopes:
                uow.emit(envelope)
            await uow.commit()
    finally:
        await engine.dispose()


async def _kept(url: str) -> list[Envelope]:
    engine = create_engine(url)
    try:
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            return [e.envelope for e in await uow.events.since(0)]
    finally:
        await engine.dispose()


def test_gc_applies_the_policy_and_older_than_keeps_less(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC)
    ancient, week_old, fresh = (
        make_envelope(occurred_at=now - age)
        for age in (timedelta(days=40), timedelta(days=7), timedelta(minutes=1))
    )
    asyncio.run(_write(database_url, [ancient, week_old, fresh]))

    assert main(["gc", "--database-url", database_url]) == 0
    assert capsys.readouterr().out.startswith("deleted 1 events older than ")
    assert asyncio.run(_kept(database_url)) == [week_old, fresh]

    assert main(["gc", "--database-url", database_url, "--older-than", "1d"]) == 0
    assert asyncio.run(_kept(database_url)) == [fresh]
    assert main(["gc", "--database-url", database_url, "--older-than", "soon"]) == 2
