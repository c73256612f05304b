"""The idempotent durable consumer: effects once per event, poison messages to the DLQ, the consumer goes on."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from faststream.nats import TestNatsBroker
from nats.js import JetStreamContext

from libs.db.ports import UnitOfWork
from libs.db.records import ObjectDraft
from libs.db.uow import SqlAlchemyUnitOfWork
from libs.events.admission import JobSubmitted
from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM, EventType
from libs.events.envelope import Envelope, EventPayload
from libs.messaging.broker import make_broker
from libs.messaging.consumer import EventConsumer, exponential_backoff
from libs.messaging.dead_letters import ATTEMPTS_HEADER, REASON_HEADER, SUBJECT_HEADER
from libs.messaging.publisher import NatsPublisher
from tests.conftest import SQLITE_ONLY
from tests.integration.db.builders import T0, make_envelope
from tests.integration.messaging.conftest import eventually, running, stream_messages

UowFactory = Callable[[], SqlAlchemyUnitOfWork]
CONSUMER = "admission-jobs"
SUBJECT = EventType.JOB_SUBMITTED.subject


def job_submitted(request_id: str = "req-1") -> Envelope:
    return Envelope.wrap(
        JobSubmitted(request_id=request_id, manifest={"kind": "Job", "metadata": {"name": request_id}}),
        producer="client",
        correlation_id=request_id,
        occurred_at=T0,
    )


class AdmitJob:
    """A handler that writes state and emits an event, or fails the first `failures` times."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls: list[uuid.UUID] = []

    async def __call__(self, envelope: Envelope, payload: EventPayload, uow: UnitOfWork) -> None:
        self.calls.append(envelope.event_id)
        if len(self.calls) <= self.failures:
            raise RuntimeError("admission store unavailable")
        assert isinstance(payload, JobSubmitted)
        await uow.objects.upsert(
            ObjectDraft(kind="Job", api_version="batch/v1", namespace="ml", name=payload.request_id)
        )
        uow.emit(make_envelope(EventType.JOB_ADMITTED, causation_id=str(envelope.event_id)))


def make_consumer(handler: AdmitJob, uow_factory: UowFactory, *, max_deliver: int = 5) -> EventConsumer:
    return EventConsumer(
        name=CONSUMER,
        subjects=[SUBJECT],
        handler=handler,
        uow_factory=uow_factory,
        max_deliver=max_deliver,
        retry_delay=lambda attempt: 0.0,
    )


async def settled(js: JetStreamContext, count: int) -> None:
    """Wait until the consumer has acked `count` stream messages and holds none."""

    async def done() -> bool:
        info = await js.consumer_info(EVENTS_STREAM, CONSUMER)
        return bool(
            info.ack_floor.stream_seq >= count and info.num_ack_pending == 0 and info.num_pending == 0
        )

    await eventually(done)


async def test_handler_writes_state_and_events_once_even_when_an_event_is_delivered_twice(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    handler = AdmitJob()
    broker = make_broker(nats_url, "admission")
    consumer = make_consumer(handler, uow_factory)
    consumer.subscribe(broker)
    envelope = job_submitted()
    async with running(broker, consumer):
        await js.publish(SUBJECT, envelope.to_bytes())  # no Msg-Id: JetStream keeps both copies
        await js.publish(SUBJECT, envelope.to_bytes())
        await settled(js, 2)

    assert handler.calls == [envelope.event_id]
    async with uow_factory() as uow:
        assert await uow.objects.get("Job", "ml", "req-1") is not None
        [admitted] = await uow.events.by_type(EventType.JOB_ADMITTED.value)
        assert admitted.envelope.causation_id == str(envelope.event_id)
        assert await uow.inbox.seen(CONSUMER, envelope.event_id)


@SQLITE_ONLY
async def test_poison_messages_go_to_the_dlq_with_the_reason_and_the_next_message_is_processed(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    good = job_submitted("req-good")
    poison = {
        "MalformedEnvelope": b"{not json",
        "UnknownEventType": job_submitted("a").model_copy(update={"type": "job.exploded"}).to_bytes(),
        "UnknownSchemaVersion": job_submitted("b").model_copy(update={"schema_version": 9}).to_bytes(),
        "InvalidPayload": job_submitted("c").model_copy(update={"payload": {"request_id": 1}}).to_bytes(),
    }
    handler = AdmitJob()
    broker = make_broker(nats_url, "admission")
    consumer = make_consumer(handler, uow_factory)
    consumer.subscribe(broker)
    async with running(broker, consumer):
        for data in poison.values():
            await js.publish(SUBJECT, data)
        await js.publish(SUBJECT, good.to_bytes())
        await settled(js, len(poison) + 1)

    assert handler.calls == [good.event_id]
    dead = await stream_messages(js, DLQ_STREAM)
    assert [(m.subject, m.headers[REASON_HEADER]) for m in dead] == [
        (f"podway.dlq.{CONSUMER}", reason) for reason in poison
    ]
    assert [m.data for m in dead] == list(poison.values())


@SQLITE_ONLY
async def test_a_handler_that_keeps_failing_is_dead_lettered_after_max_deliver_and_the_consumer_goes_on(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    handler = AdmitJob(failures=3)
    broker = make_broker(nats_url, "admission")
    consumer = make_consumer(handler, uow_factory, max_deliver=3)
    consumer.subscribe(broker)
    doomed, next_one = job_submitted("req-doomed"), job_submitted("req-next")
    async with running(broker, consumer):
        await js.publish(SUBJECT, doomed.to_bytes())
        await settled(js, 1)
        await js.publish(SUBJECT, next_one.to_bytes())
        await settled(js, 2)

    assert handler.calls == [doomed.event_id] * 3 + [next_one.event_id]
    [dead] = await stream_messages(js, DLQ_STREAM)
    assert (dead.headers[REASON_HEADER], dead.headers[ATTEMPTS_HEADER], dead.headers[SUBJECT_HEADER]) == (
        "HandlerFailed",
        "3",
        SUBJECT,
    )
    assert Envelope.from_bytes(dead.data) == doomed
    async with uow_factory() as uow:
        assert await uow.objects.get("Job", "ml", "req-doomed") is None
        assert await uow.objects.get("Job", "ml", "req-next") is not None


@SQLITE_ONLY
async def test_transient_failure_is_retried_and_succeeds(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    handler = AdmitJob(failures=1)
    broker = make_broker(nats_url, "admission")
    consumer = make_consumer(handler, uow_factory)
    consumer.subscribe(broker)
    async with running(broker, consumer):
        await js.publish(SUBJECT, job_submitted().to_bytes())
        await settled(js, 1)

    assert len(handler.calls) == 2
    assert await stream_messages(js, DLQ_STREAM) == []


@SQLITE_ONLY
async def test_events_are_handled_one_at_a_time_in_stream_order(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    handler = AdmitJob()
    broker = make_broker(nats_url, "admission")
    consumer = make_consumer(handler, uow_factory)
    consumer.subscribe(broker)
    published = [job_submitted(f"req-{i}") for i in range(30)]
    async with running(broker, consumer):
        for envelope in published:
            await js.publish(SUBJECT, envelope.to_bytes())
        await settled(js, len(published))

    assert handler.calls == [e.event_id for e in published]


@SQLITE_ONLY
async def test_a_restarted_service_updates_its_durable_consumer_to_new_subjects(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    old = make_consumer(AdmitJob(), uow_factory)
    old.subscribe(first := make_broker(nats_url, "admission"))
    async with running(first, old):
        pass
    new = make_consumer(AdmitJob(), uow_factory)
    new.subjects.append(EventType.PODGROUP_ADMITTED.subject)
    new.subscribe(second := make_broker(nats_url, "admission"))
    async with running(second, new):
        info = await js.consumer_info(EVENTS_STREAM, CONSUMER)

    assert info.config.filter_subjects == [SUBJECT, EventType.PODGROUP_ADMITTED.subject]


@SQLITE_ONLY
async def test_the_same_consumer_runs_in_memory_under_test_nats_broker(uow_factory: UowFactory) -> None:
    handler = AdmitJob()
    broker = make_broker("nats://127.0.0.1:1", "admission")
    consumer = make_consumer(handler, uow_factory)
    consumer.subscribe(broker)
    envelope = job_submitted()

    async with TestNatsBroker(broker) as test_broker:
        publisher = NatsPublisher(test_broker)
        await publisher.publish(envelope)
        await publisher.publish(envelope)

    assert handler.calls == [envelope.event_id]


def test_backoff_doubles_and_is_capped() -> None:
    assert [exponential_backoff(n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert exponential_backoff(30) == 60.0
