"""A work item whose outcome was written but not acked comes back: it is acked without a second provider call."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest
from faststream.nats import NatsBroker

from libs.core.routing import parse_policy
from libs.db.uow import SqlAlchemyUnitOfWork
from libs.emulators import RunningEmulators
from libs.events.catalogue import WORK_STREAM, WorkSubject
from libs.events.inference import ChatMessage, InferenceWork
from libs.messaging.broker import make_broker, start_broker
from libs.messaging.work_queue import WorkQueueConsumer, enqueue
from libs.providers import close_providers, open_providers
from libs.router import EventBuffer, ManualClock, Router
from libs.router.example_policy import CLAUDE_HAIKU_OD, example_policy_document
from services.llm_router.app import WORK_CONSUMER
from services.llm_router.audit import AuditSink
from services.llm_router.overload import InFlightCap
from services.llm_router.work import AsyncInference
from tests.support import AcknowledgementLost, eventually


@pytest.fixture
async def broker(nats_url: str) -> AsyncIterator[NatsBroker]:
    started = make_broker(nats_url, "test-llm-router")
    await start_broker(started)
    yield started
    await started.stop()


async def test_a_redelivered_item_whose_outcome_was_written_is_acked_without_calling_a_provider(
    broker: NatsBroker,
    emulators: RunningEmulators,
    uow_factory: Callable[[], SqlAlchemyUnitOfWork],
):
    policy = parse_policy(example_policy_document(emulators.bedrock_url, emulators.vertex_url))
    providers = await open_providers(policy.providers)
    clock = ManualClock(wall_start=time.time())
    sink = AuditSink(EventBuffer())
    router = Router(policy, providers, clock=clock, event_sink=sink)
    database = AcknowledgementLost(uow_factory)  # the outcome commits, the consumer hears a lost connection
    consumer = WorkQueueConsumer(
        name=WORK_CONSUMER,
        subject=WorkSubject.INFERENCE,
        handler=AsyncInference(router, sink, InFlightCap(4), clock),
        uow_factory=database,
        retry_delay=lambda attempt: 0.0,  # redeliver at once
    )
    item = InferenceWork(
        feature="channel-recap",
        messages=[ChatMessage(role="user", content="Recap the channel.")],
        max_tokens=32,
        submitted_at=datetime.now(UTC),
    )
    await consumer.start(broker)
    try:
        await enqueue(broker, WorkSubject.INFERENCE, item.model_dump_json().encode(), work_id=item.work_id)
        js = broker.connection.jetstream()
        info = await eventually(
            lambda: js.stream_info(WORK_STREAM), lambda i: i.state.messages == 0 and not database.lose_next
        )
        assert info.state.messages == 0, "the redelivered item is acked"
    finally:
        await consumer.stop()
        await close_providers(providers)

    assert emulators.bedrock.counters()["models"][CLAUDE_HAIKU_OD]["requests"] == 1
    async with uow_factory() as uow:
        story = await uow.events.by_correlation(item.request_id)
    assert [e.envelope.type for e in story] == ["inference.completed"]
