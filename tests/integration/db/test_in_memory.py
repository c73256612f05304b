"""The in-memory database for service unit tests is the real schema, triggers included."""

from __future__ import annotations

import pytest

from libs.db.errors import StaleEpochError
from libs.db.records import Fence, PodBinding
from libs.db.testing import in_memory_unit_of_work_factory
from tests.conftest import FakeClock
from tests.integration.db.builders import T0, make_draft, make_envelope


async def test_in_memory_unit_of_work_has_the_migrated_schema_and_triggers(fake_clock: FakeClock) -> None:
    async with in_memory_unit_of_work_factory(clock=fake_clock) as uow_factory:
        async with uow_factory() as uow:
            await uow.objects.upsert(make_draft())
            uow.emit(make_envelope())
            await uow.commit()
        async with uow_factory() as uow:
            assert await uow.objects.get("PodGroup", "ml", "train-0") is not None
            assert len(await uow.outbox.unpublished(limit=10)) == 1
            with pytest.raises(StaleEpochError):
                await uow.bindings.bind(PodBinding("pod-1", "n", None, T0), fence=Fence("scheduler", 1))
