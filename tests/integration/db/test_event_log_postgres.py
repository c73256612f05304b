"""On PostgreSQL, emitting transactions never wait for each other, and a reader of the audit log sees a
settled prefix: never a later `seq` while an earlier one is still in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from libs.db.records import StoredEvent
from libs.db.repositories.event_log import append
from libs.db.uow import SqlAlchemyUnitOfWork
from tests.integration.db.builders import T0, make_envelope
from tests.integration.db.test_fencing_postgres import _wait_until_a_backend_waits_on_a_lock

pytestmark = pytest.mark.postgres
UowFactory = Callable[[], SqlAlchemyUnitOfWork]


async def _read_all(uow_factory: UowFactory) -> list[StoredEvent]:
    async with uow_factory() as uow:
        return await uow.events.since(0)


async def test_a_reader_waits_for_an_earlier_append_still_in_flight(pg_uow_factory: UowFactory) -> None:
    earlier, later = make_envelope(correlation_id="pg-1"), make_envelope(correlation_id="pg-2")
    async with pg_uow_factory() as slow:
        [first] = await append(slow.session, [earlier], T0)
        async with pg_uow_factory() as fast:
            # A guard, not a measurement: an append that waited for the one in flight would never return.
            [second] = await asyncio.wait_for(append(fast.session, [later], T0), timeout=30)
            await fast.commit()
        assert second.seq > first.seq

        reader = asyncio.create_task(_read_all(pg_uow_factory))
        await _wait_until_a_backend_waits_on_a_lock(pg_uow_factory)
        assert not reader.done()
        await slow.commit()

    assert [e.envelope for e in await reader] == [earlier, later]
