"""The scheduler's in-memory inbox on a real nats-server: an event counts as processed only once its
handler succeeded, so a failing handler is retried, then dead-lettered, and the consumer goes on."""

from __future__ import annotations

import uuid
from collections import Counter

from nats.js import JetStreamContext

from libs.db.ports import UnitOfWork
from libs.events.admission import JobSubmitted
from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM, EventType
from libs.events.envelope import Envelope, EventPayload
from libs.leasing.memory_inbox import MemoryInbox, MemoryUnitOfWork
from libs.messaging.broker import make_broker
from libs.messaging.consumer import EventConsumer
from libs.messaging.dead_letters import ATTEMPTS_HEADER, REASON_HEADER
from tests.integration.db.builders import T0
from tests.integration.messaging.conftest import eventually, running, stream_messages

CONSUMER = "scheduler"
SUBJECT = EventType.JOB_SUBMITTED.subject


def event(name: str) -> Envelope:
    payload = JobSubmitted(request_id=name, manifest={"kind": "Job", "metadata": {"name": name}})
    return Envelope.wrap(payload, producer="test", correlation_id=name, occurred_at=T0)


class Flaky:
    """Fails the first `failures` deliveries of each event (all of them for `always`)."""

    def __init__(self, failures: int = 0, *, always: frozenset[str] = frozenset()) -> None:
        self.failures = failures
        self.always = always
        self.calls: Counter[uuid.UUID] = Counter()
        self.effects: list[str] = []

    async def __call__(self, envelope: Envelope, payload: EventPayload, uow: UnitOfWork) -> None:
        assert isinstance(payload, JobSubmitted)
        self.calls[envelope.event_id] += 1
        if payload.request_id in self.always or self.calls[envelope.event_id] <= self.failures:
            raise RuntimeError("the world could not take it")
        self.effects.append(payload.request_id)


def consumer(handler: Flaky, inbox: MemoryInbox, *, max_deliver: int = 5) -> EventConsumer:
    return EventConsumer(
        name=CONSUMER,
        subjects=[SUBJECT],
        handler=handler,
        uow_factory=lambda: MemoryUnitOfWork(inbox),
        max_deliver=max_deliver,
        retry_delay=lambda attempt: 0.0,
        batch_size=64,
        fetch_timeout_s=0.2,
    )


async def settled(js: JetStreamContext, count: int) -> None:
    async def done() -> bool:
        info = await js.consumer_info(EVENTS_STREAM, CONSUMER)
        return bool(
            info.ack_floor.stream_seq >= count and info.num_ack_pending == 0 and info.num_pending == 0
        )

    await eventually(done)


async def test_a_handler_that_fails_twice_then_succeeds_takes_effect_once(
    nats_url: str, js: JetStreamContext
) -> None:
    handler = Flaky(failures=2)
    broker = make_broker(nats_url, "scheduler-events")
    subscribed = consumer(handler, MemoryInbox())
    subscribed.subscribe(broker)
    first = event("first")

    async with running(broker, subscribed):
        await js.publish(SUBJECT, first.to_bytes())
        await settled(js, 1)
        await js.publish(SUBJECT, first.to_bytes())  # a redelivery of a processed event: a duplicate
        await settled(js, 2)

    assert handler.calls[first.event_id] == 3
    assert handler.effects == ["first"]


async def test_a_handler_that_always_fails_is_dead_lettered_and_the_consumer_goes_on(
    nats_url: str, js: JetStreamContext
) -> None:
    handler = Flaky(always=frozenset({"poison"}))
    broker = make_broker(nats_url, "scheduler-events")
    subscribed = consumer(handler, MemoryInbox(), max_deliver=3)
    subscribed.subscribe(broker)
    poison, good = event("poison"), event("good")

    async with running(broker, subscribed):
        await js.publish(SUBJECT, poison.to_bytes())
        await js.publish(SUBJECT, good.to_bytes())
        await settled(js, 2)

    # A batch that failed is handled again one event at a time: the scheduler's handlers are idempotent.
    assert set(handler.effects) == {"good"}
    (dead,) = await stream_messages(js, DLQ_STREAM)
    assert dead.subject == f"podway.dlq.{CONSUMER}"
    assert dead.headers[REASON_HEADER] == "HandlerFailed"
    assert dead.headers[ATTEMPTS_HEADER] == "3"
    assert Envelope.from_bytes(dead.data).event_id == poison.event_id
