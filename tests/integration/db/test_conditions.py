"""Conditions: one row per (object, type), one owner per type, transition time moves with the status."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from libs.db.errors import ConditionOwnershipError
from libs.db.records import Condition
from libs.db.uow import SqlAlchemyUnitOfWork
from tests.conftest import FakeClock
from tests.integration.db.builders import make_draft

UowFactory = Callable[[], SqlAlchemyUnitOfWork]


def scheduled(uid: str, status: str, *, owner: str = "scheduler") -> Condition:
    return Condition(object_uid=uid, type="PodGroupScheduled", status=status, owner=owner, reason="Placed")


async def test_transition_time_moves_only_when_the_status_changes(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with uow_factory() as uow:
        uid = (await uow.objects.upsert(make_draft())).uid
        first = await uow.conditions.set(scheduled(uid, "False"))
        fake_clock.advance(timedelta(seconds=10))
        same = await uow.conditions.set(scheduled(uid, "False"))
        fake_clock.advance(timedelta(seconds=10))
        flipped = await uow.conditions.set(scheduled(uid, "True"))
        await uow.commit()

    assert same.last_transition_time == first.last_transition_time
    assert flipped.last_transition_time == fake_clock.now
    async with uow_factory() as uow:
        assert await uow.conditions.list_for(uid) == [flipped]


async def test_writers_of_different_condition_types_never_overwrite_each_other(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        uid = (await uow.objects.upsert(make_draft())).uid
        await uow.conditions.set(scheduled(uid, "True"))
        await uow.conditions.set(
            Condition(object_uid=uid, type="DisruptionTarget", status="True", owner="preemptor")
        )
        with pytest.raises(ConditionOwnershipError):
            await uow.conditions.set(scheduled(uid, "False", owner="preemptor"))
        await uow.commit()

    async with uow_factory() as uow:
        stored = {c.type: c for c in await uow.conditions.list_for(uid)}
    assert stored["PodGroupScheduled"].status == "True"
    assert stored["DisruptionTarget"].owner == "preemptor"


async def test_conditions_go_with_their_object(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        uid = (await uow.objects.upsert(make_draft())).uid
        await uow.conditions.set(scheduled(uid, "True"))
        await uow.objects.delete("PodGroup", "ml", "train-0")
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.conditions.list_for(uid) == []


async def test_many_conditions_are_set_at_once_with_the_same_rules_as_one(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with uow_factory() as uow:
        kept, flipped, fresh = [(await uow.objects.upsert(make_draft(f"g-{i}"))).uid for i in range(3)]
        before = await uow.conditions.set_many([scheduled(kept, "False"), scheduled(flipped, "False")])
        await uow.commit()
    fake_clock.advance(timedelta(seconds=30))

    async with uow_factory() as uow:
        after = await uow.conditions.set_many(
            [scheduled(kept, "False"), scheduled(flipped, "True"), scheduled(fresh, "True")]
        )
        await uow.commit()

    assert after[0].last_transition_time == before[0].last_transition_time
    assert after[1].last_transition_time == fake_clock.now
    assert after[2].last_transition_time == fake_clock.now
    async with uow_factory() as uow:
        assert [await uow.conditions.get(uid, "PodGroupScheduled") for uid in (kept, flipped, fresh)] == after


async def test_setting_many_conditions_refuses_one_owned_by_another_writer(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        uid = (await uow.objects.upsert(make_draft())).uid
        await uow.conditions.set(scheduled(uid, "True", owner="preemptor"))
        with pytest.raises(ConditionOwnershipError):
            await uow.conditions.set_many([scheduled(uid, "False")])
