"""Retention on both databases: rows past their horizon go, the rest stay, and only the replica holding the
`retention` lease prunes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from libs.core.retention import RetentionPolicy
from libs.db.retention import prune
from libs.db.uow import SqlAlchemyUnitOfWork
from libs.events.envelope import Envelope
from libs.runtime.retention import LEASE_INTERVALS, RetentionSchedule
from tests.conftest import FakeClock
from tests.integration.db.builders import make_envelope

UowFactory = Callable[[], SqlAlchemyUnitOfWork]
POLICY = RetentionPolicy(events=timedelta(days=30), outbox=timedelta(minutes=4), inbox=timedelta(minutes=6))


async def write_rows(uow_factory: UowFactory, clock: FakeClock) -> dict[str, Envelope]:
    """Events 40 and 20 days old; outbox rows published 10 and 2 minutes ago and one never published;
    inbox marks made 10 and 2 minutes ago."""
    now = clock.now
    old_event = make_envelope(occurred_at=now - timedelta(days=40))
    kept_event = make_envelope(occurred_at=now - timedelta(days=20))
    waiting = make_envelope(occurred_at=now - timedelta(days=40))
    clock.now = now - timedelta(minutes=10)
    async with uow_factory() as uow:
        for envelope in (old_event, kept_event, waiting):
            uow.emit(envelope)
        await uow.inbox.seen("admission-jobs", old_event.event_id)
        await uow.commit()
    async with uow_factory() as uow:
        rows = {m.event_id: m.seq for m in await uow.outbox.unpublished(limit=10)}
        await uow.outbox.mark_published([rows[old_event.event_id]], at=now - timedelta(minutes=10))
        await uow.outbox.mark_published([rows[kept_event.event_id]], at=now - timedelta(minutes=2))
        await uow.commit()
    clock.now = now - timedelta(minutes=2)
    async with uow_factory() as uow:
        await uow.inbox.seen("admission-jobs", kept_event.event_id)
        await uow.commit()
    clock.now = now
    return {"old": old_event, "kept": kept_event, "waiting": waiting}


async def test_rows_past_their_horizon_go_and_the_rest_stay(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    written = await write_rows(uow_factory, fake_clock)
    old, kept, waiting = written["old"], written["kept"], written["waiting"]

    async with uow_factory() as uow:
        report = await prune(uow, POLICY.horizons(fake_clock.now))

    assert (report.events, report.outbox, report.inbox) == (2, 1, 1)
    async with uow_factory() as uow:
        assert [e.envelope for e in await uow.events.since(0)] == [kept]
        assert [m.event_id for m in await uow.outbox.unpublished(limit=10)] == [waiting.event_id]
        assert await uow.inbox.seen_many("admission-jobs", [old.event_id, kept.event_id]) == [False, True]
        await uow.rollback()

    fake_clock.advance(timedelta(minutes=5))  # the young plumbing rows are past their horizons now
    async with uow_factory() as uow:
        later = await prune(uow, POLICY.horizons(fake_clock.now))
    assert (later.events, later.outbox, later.inbox) == (0, 1, 1)


async def test_only_the_replica_holding_the_lease_prunes_and_another_takes_over_when_it_lapses(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    first, second = (
        RetentionSchedule(uow_factory, POLICY, holder=name, interval_s=60, clock=fake_clock) for name in "ab"
    )
    await write_rows(uow_factory, fake_clock)

    assert (await first.run_once()) is not None
    assert (await second.run_once()) is None
    fake_clock.advance(timedelta(seconds=60))
    assert (await first.run_once()) is not None, "its holder keeps the lease by pruning"
    assert (await second.run_once()) is None

    fake_clock.advance(timedelta(seconds=LEASE_INTERVALS * 60 + 1))  # the first replica is gone
    assert (await second.run_once()) is not None
