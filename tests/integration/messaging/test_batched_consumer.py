"""The batched pull consumer: many events per transaction, in stream order, poison isolated."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from nats.js import JetStreamContext

from libs.db.ports import UnitOfWork
from libs.db.schema import inbox
from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM
from libs.events.envelope import Envelope, EventPayload
from libs.messaging.broker import make_broker
from libs.messaging.consumer import EventConsumer
from libs.messaging.dead_letters import REASON_HEADER
from tests.conftest import SQLITE_ONLY
from tests.integration.messaging.conftest import eventually, running, stream_messages
from tests.integration.messaging.test_event_consumer import (
    CONSUMER,
    SUBJECT,
    AdmitJob,
    UowFactory,
    job_submitted,
    settled,
)


class CountingFactory:
    """Counts the units of work a consumer opens, to show that a batch shares one transaction."""

    def __init__(self, inner: UowFactory) -> None:
        self.inner = inner
        self.opened = 0

    def __call__(self):  # type: ignore[no-untyped-def]
        self.opened += 1
        return self.inner()


def batched(handler: AdmitJob, uow_factory, *, max_deliver: int = 5) -> EventConsumer:  # type: ignore[no-untyped-def]
    return EventConsumer(
        name=CONSUMER,
        subjects=[SUBJECT],
        handler=handler,
        uow_factory=uow_factory,
        max_deliver=max_deliver,
        retry_delay=lambda attempt: 0.0,
        batch_size=64,
        fetch_timeout_s=0.2,
    )


async def test_a_batch_is_handled_in_stream_order_in_few_transactions(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    envelopes = [job_submitted(f"req-{i:03d}") for i in range(100)]
    for envelope in envelopes:
        await js.publish(SUBJECT, envelope.to_bytes())
    handler = AdmitJob()
    counting = CountingFactory(uow_factory)
    broker = make_broker(nats_url, "admission")
    consumer = batched(handler, counting)
    consumer.subscribe(broker)
    async with running(broker, consumer):
        await settled(js, 100)
    assert handler.calls == [e.event_id for e in envelopes]
    assert counting.opened <= 10
    async with uow_factory() as uow:
        assert len(await uow.objects.find("Job")) == 100


@SQLITE_ONLY
async def test_a_poison_event_in_a_batch_is_dead_lettered_alone(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    good = [job_submitted(f"ok-{i}") for i in range(5)]
    await js.publish(SUBJECT, good[0].to_bytes())
    await js.publish(SUBJECT, b"{not json")
    for envelope in good[1:]:
        await js.publish(SUBJECT, envelope.to_bytes())
    handler = AdmitJob(failures=1)  # the first handler call of the batch fails: the batch falls back
    broker = make_broker(nats_url, "admission")
    consumer = batched(handler, uow_factory, max_deliver=2)
    consumer.subscribe(broker)
    async with running(broker, consumer):
        await settled(js, 6)
    dead = await stream_messages(js, DLQ_STREAM)
    assert [m.headers[REASON_HEADER] for m in dead] == ["MalformedEnvelope"]
    async with uow_factory() as uow:
        assert len(await uow.objects.find("Job")) == 5


@SQLITE_ONLY
async def test_an_event_is_handled_at_once_without_waiting_for_the_batch_to_fill(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    handler = AdmitJob()
    broker = make_broker(nats_url, "admission")
    consumer = batched(handler, uow_factory)
    consumer.fetch_timeout_s = 60  # a fetch that waited for 64 events would hold this one for a minute
    consumer.subscribe(broker)
    async with running(broker, consumer):
        for i in range(3):
            await js.publish(SUBJECT, job_submitted(f"req-{i}").to_bytes())
            await settled(js, i + 1)

    assert len(handler.calls) == 3


class AdmitJobs:
    """A batch handler: records the events of each call, then admits them as `AdmitJob` would."""

    def __init__(self) -> None:
        self.one = AdmitJob()
        self.batches: list[list[uuid.UUID]] = []

    async def __call__(self, events: Sequence[tuple[Envelope, EventPayload]], uow: UnitOfWork) -> None:
        self.batches.append([envelope.event_id for envelope, _ in events])
        for envelope, payload in events:
            await self.one(envelope, payload, uow)


async def test_a_batch_handler_gets_the_fresh_events_of_a_batch_together_in_stream_order(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    envelopes = [job_submitted(f"req-{i:03d}") for i in range(100)]
    for envelope in [*envelopes[:50], envelopes[10], *envelopes[50:]]:  # one delivered twice
        await js.publish(SUBJECT, envelope.to_bytes())
    handler = AdmitJobs()
    broker = make_broker(nats_url, "admission")
    consumer = EventConsumer(
        name=CONSUMER,
        subjects=[SUBJECT],
        batch_handler=handler,
        uow_factory=uow_factory,
        batch_size=64,
        fetch_timeout_s=0.2,
    )
    consumer.subscribe(broker)
    async with running(broker, consumer):
        await settled(js, 101)
    assert [event_id for batch in handler.batches for event_id in batch] == [e.event_id for e in envelopes]
    assert len(handler.batches) <= 10
    async with uow_factory() as uow:
        assert len(await uow.objects.find("Job")) == 100


def test_a_consumer_takes_a_handler_or_a_batch_handler() -> None:
    with pytest.raises(ValueError, match="not both"):
        EventConsumer(name=CONSUMER, subjects=[SUBJECT], uow_factory=lambda: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="not both"):
        EventConsumer(
            name=CONSUMER,
            subjects=[SUBJECT],
            handler=AdmitJob(),
            batch_handler=AdmitJobs(),
            uow_factory=lambda: None,  # type: ignore[arg-type,return-value]
        )


@SQLITE_ONLY
async def test_a_consumer_created_again_takes_up_only_its_replay_window_not_the_whole_history(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    handler = AdmitJob()
    broker = make_broker(nats_url, "admission")
    consumer = batched(handler, uow_factory)
    consumer.subscribe(broker)
    async with running(broker, consumer):
        await js.publish(SUBJECT, job_submitted("handled-long-ago").to_bytes())
        await settled(js, 1)
        # The window now begins after that event: retention pruned its inbox mark long since. Then the
        # durable consumer is lost with its position, and an event comes while it is gone.
        begins = datetime.now(UTC)
        consumer.replay_since = lambda: begins
        async with uow_factory() as uow:
            await uow.session.execute(sa.delete(inbox))
            await uow.commit()
        await js.delete_consumer(EVENTS_STREAM, CONSUMER)
        later = job_submitted("while-it-was-gone")
        await js.publish(SUBJECT, later.to_bytes())
        await eventually(lambda: _handled(handler, 2), within_s=30)

    assert handler.calls[1:] == [later.event_id]


async def _handled(handler: AdmitJob, count: int) -> bool:
    return len(handler.calls) >= count


class RecordingPreparer:
    """Records each batch it is shown and how many units of work were open by then; fails if asked to."""

    def __init__(self, counting: CountingFactory, *, fail: bool = False) -> None:
        self.counting = counting
        self.fail = fail
        self.batches: list[tuple[list[uuid.UUID], int]] = []

    async def __call__(self, events: Sequence[tuple[Envelope, EventPayload]]) -> None:
        self.batches.append(([envelope.event_id for envelope, _ in events], self.counting.opened))
        if self.fail:
            raise RuntimeError("could not read ahead")


def prepared(handler: AdmitJob, counting: CountingFactory, preparer: RecordingPreparer) -> EventConsumer:
    return EventConsumer(
        name=CONSUMER,
        subjects=[SUBJECT],
        handler=handler,
        uow_factory=counting,
        retry_delay=lambda attempt: 0.0,
        batch_size=64,
        fetch_timeout_s=0.2,
        prepare=preparer,
    )


@pytest.mark.parametrize("fail", [False, True])
async def test_a_batch_is_prepared_before_its_unit_of_work_opens_and_handled_even_if_preparing_fails(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory, fail: bool
) -> None:
    envelopes = [job_submitted(f"prep-{i:02d}") for i in range(20)]
    for envelope in envelopes:
        await js.publish(SUBJECT, envelope.to_bytes())
    handler = AdmitJob()
    counting = CountingFactory(uow_factory)
    preparer = RecordingPreparer(counting, fail=fail)
    broker = make_broker(nats_url, "admission")
    consumer = prepared(handler, counting, preparer)
    consumer.subscribe(broker)
    async with running(broker, consumer):
        await settled(js, 20)
    shown = [event_id for ids, _ in preparer.batches for event_id in ids]
    assert shown == [e.event_id for e in envelopes]
    # Each batch was shown before the unit of work that handles it: one opened per batch before it at most.
    assert all(opened < number + 1 for number, (_, opened) in enumerate(preparer.batches))
    assert handler.calls == [e.event_id for e in envelopes]
    async with uow_factory() as uow:
        assert len(await uow.objects.find("Job")) == 20
