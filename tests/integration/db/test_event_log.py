"""State and events commit together; the audit log answers by story, by type and since a position."""

from __future__ import annotations

from collections.abc import Callable

from libs.db.records import OutboxMessage
from libs.db.uow import SqlAlchemyUnitOfWork
from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, uuid7
from tests.conftest import FakeClock
from tests.integration.db.builders import make_draft, make_envelope

UowFactory = Callable[[], SqlAlchemyUnitOfWork]


async def emit_together(uow_factory: UowFactory, envelopes: list[Envelope]) -> list[OutboxMessage]:
    """Emit the envelopes in one unit of work; returns the outbox rows its commit handed to the relay."""
    handed: list[OutboxMessage] = []
    async with uow_factory() as uow:
        uow._after_commit = handed.extend
        for envelope in envelopes:
            uow.emit(envelope)
        await uow.commit()
    return handed


async def test_state_and_emitted_events_commit_together(uow_factory: UowFactory) -> None:
    handed: list[list[OutboxMessage]] = []
    envelope = make_envelope(EventType.PODGROUP_ADMITTED)
    async with uow_factory() as uow:
        uow._after_commit = lambda committed: handed.append(list(committed))
        await uow.objects.upsert(make_draft())
        uow.emit(envelope)
        await uow.commit()

    async with uow_factory() as uow:
        [pending] = await uow.outbox.unpublished(limit=10)
        [logged] = await uow.events.by_correlation("pg-1")
        assert await uow.objects.get("PodGroup", "ml", "train-0") is not None
    assert logged.envelope == envelope
    assert (pending.seq, pending.event_id, pending.subject) == (
        logged.seq,
        envelope.event_id,
        envelope.nats_subject,
    )
    assert pending.data == envelope.to_bytes()
    assert handed == [[pending]]  # what the relay is handed is what it would read back


async def test_rolled_back_change_leaves_no_event_anywhere(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft())
        uow.emit(make_envelope())
        await uow.rollback()
    async with uow_factory() as uow:
        uow.emit(make_envelope())
        # leaving the block without commit

    async with uow_factory() as uow:
        assert await uow.outbox.unpublished(limit=10) == []
        assert await uow.events.since(0) == []
        assert await uow.objects.get("PodGroup", "ml", "train-0") is None


async def test_audit_log_queries_return_events_in_commit_order(uow_factory: UowFactory) -> None:
    stories = ["pg-1", "pg-2", "pg-1", "pg-1"]
    kinds = [
        EventType.JOB_SUBMITTED,
        EventType.JOB_SUBMITTED,
        EventType.PODS_BOUND,
        EventType.PODGROUP_SCHEDULED,
    ]
    emitted = [make_envelope(kind, correlation_id=story) for story, kind in zip(stories, kinds, strict=True)]
    for envelope in emitted:
        async with uow_factory() as uow:
            uow.emit(envelope)
            await uow.commit()

    async with uow_factory() as uow:
        story = await uow.events.by_correlation("pg-1")
        submitted = await uow.events.by_type(EventType.JOB_SUBMITTED.value)
        everything = await uow.events.since(0)
        after_second = await uow.events.since(everything[1].seq, limit=1)
        found = await uow.events.get(emitted[3].event_id)
        missing = await uow.events.get(uuid7())

    assert [e.envelope for e in story] == [emitted[0], emitted[2], emitted[3]]
    assert [e.envelope for e in submitted] == emitted[:2]
    assert [e.envelope for e in everything] == emitted
    assert [e.seq for e in everything] == sorted(e.seq for e in everything)
    assert [e.envelope for e in after_second] == [emitted[2]]
    assert found is not None
    assert found.envelope == emitted[3]
    assert missing is None


async def test_inbox_says_whether_a_consumer_already_processed_an_event(uow_factory: UowFactory) -> None:
    event_id = uuid7()
    async with uow_factory() as uow:
        assert not await uow.inbox.seen("scheduler", event_id)
        assert await uow.inbox.seen("scheduler", event_id)
        assert not await uow.inbox.seen("preemptor", event_id)
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.inbox.seen("scheduler", event_id)
    async with uow_factory() as uow:
        assert not await uow.inbox.seen("dra-allocator", event_id)
        await uow.rollback()  # a failed handler leaves no mark
    async with uow_factory() as uow:
        assert not await uow.inbox.seen("dra-allocator", event_id)


async def test_inbox_marks_a_batch_of_events_at_once_and_tells_which_were_seen(
    uow_factory: UowFactory,
) -> None:
    old, new, repeated = uuid7(), uuid7(), uuid7()
    async with uow_factory() as uow:
        assert not await uow.inbox.seen("node-agent", old)
        await uow.commit()
    async with uow_factory() as uow:
        seen = await uow.inbox.seen_many("node-agent", [new, old, repeated, repeated])
        assert seen == [False, True, False, True]
        assert await uow.inbox.seen_many("node-agent", []) == []
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.inbox.seen_many("node-agent", [repeated, new]) == [True, True]
        assert await uow.inbox.seen_many("admission", [new]) == [False]
        await uow.rollback()
    async with uow_factory() as uow:
        assert not await uow.inbox.seen("admission", new)


async def test_events_emitted_together_are_queued_and_logged_in_emit_order(uow_factory: UowFactory) -> None:
    emitted = [
        make_envelope(kind, correlation_id="pg-1")
        for kind in (EventType.PODGROUP_CYCLE_STARTED, EventType.PODGROUP_CYCLE_PLACED, EventType.PODS_BOUND)
    ]
    handed = await emit_together(uow_factory, emitted)

    async with uow_factory() as uow:
        queued = await uow.outbox.unpublished(limit=10)
        logged = await uow.events.by_correlation("pg-1")
    assert [m.event_id for m in handed] == [e.event_id for e in emitted]
    assert [m.seq for m in handed] == sorted(m.seq for m in handed)
    assert queued == handed
    assert [(e.seq, e.envelope) for e in logged] == [(m.seq, e) for m, e in zip(handed, emitted, strict=True)]


async def test_an_event_appended_again_is_skipped_and_the_new_ones_are_written(
    uow_factory: UowFactory,
) -> None:
    already, new = make_envelope(correlation_id="pg-1"), make_envelope(correlation_id="pg-1")
    async with uow_factory() as uow:
        uow.emit(already)
        await uow.commit()

    handed: list[OutboxMessage] = []
    async with uow_factory() as uow:
        uow._after_commit = handed.extend
        uow.emit(already)  # a retry of a transaction whose commit went through unacknowledged
        uow.emit(new)
        await uow.commit()

    async with uow_factory() as uow:
        logged = await uow.events.by_correlation("pg-1")
        queued = await uow.outbox.unpublished(limit=10)
    assert [e.envelope for e in logged] == [already, new]
    assert [m.event_id for m in queued] == [already.event_id, new.event_id]
    assert [m.event_id for m in handed] == [new.event_id], "only what this commit added goes to the relay"


async def test_an_append_larger_than_one_statement_keeps_emit_order_and_reads_back_equal(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    # 1,203 rows: more than SQLite's slice of 500 rows per statement, with a partial last slice.
    emitted = [make_envelope(correlation_id="big", payload={"n": n}) for n in range(1203)]
    handed = await emit_together(uow_factory, emitted)

    async with uow_factory() as uow:
        logged = await uow.events.by_correlation("big")
        queued = await uow.outbox.unpublished(limit=2000)
    assert [e.envelope for e in logged] == emitted
    assert [m.seq for m in handed] == sorted({m.seq for m in handed})
    assert queued == handed
    assert all(m.created_at == fake_clock.now for m in queued)


async def test_marking_published_takes_exactly_the_given_rows_whether_or_not_they_are_a_run(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    handed = await emit_together(uow_factory, [make_envelope(payload={"n": n}) for n in range(8)])
    seqs = [m.seq for m in handed]

    async with uow_factory() as uow:
        await uow.outbox.mark_published(seqs[1:4], at=fake_clock.now)  # a run
        await uow.outbox.mark_published([seqs[5], seqs[7]], at=fake_clock.now)  # with a gap
        await uow.commit()
    async with uow_factory() as uow:
        left = await uow.outbox.unpublished(limit=10)
    assert [m.seq for m in left] == [seqs[0], seqs[4], seqs[6]]


async def test_the_latest_event_of_each_story_is_found_in_one_call(uow_factory: UowFactory) -> None:
    first, second, other = (make_envelope(correlation_id=story) for story in ("pg-1", "pg-1", "pg-2"))
    await emit_together(uow_factory, [first, other, second])
    async with uow_factory() as uow:
        latest = await uow.events.latest_of(["pg-1", "pg-2", "pg-none"])
    assert latest == {"pg-1": str(second.event_id), "pg-2": str(other.event_id)}


async def test_the_latest_event_of_a_type_in_each_story_is_found(uow_factory: UowFactory) -> None:
    proposed = make_envelope(EventType.PLACEMENT_PROPOSED, correlation_id="pg-1")
    after = make_envelope(EventType.PODGROUP_CYCLE_STARTED, correlation_id="pg-1")
    await emit_together(uow_factory, [proposed, after])
    async with uow_factory() as uow:
        latest = await uow.events.latest_of(["pg-1"], EventType.PLACEMENT_PROPOSED)
    assert latest == {"pg-1": str(proposed.event_id)}
