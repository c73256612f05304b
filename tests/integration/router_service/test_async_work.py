"""Async inference through the `podway.work.inference` work queue: the outcome is an event, written once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from libs.events.catalogue import WorkSubject
from libs.events.inference import InferenceCall, InferenceWork
from libs.messaging.work_queue import enqueue
from libs.router.example_policy import CLAUDE_HAIKU_OD
from tests.integration.router_service.conftest import CLAUDE_FIRST, StackFactory, ask
from tests.support import eventually


def recap_call(**options) -> InferenceCall:
    return ask("Summarise the channel.", **options).model_copy(update={"feature": "channel-recap"})


def recap(**options) -> InferenceWork:
    return InferenceWork(
        **recap_call(**options).model_dump(exclude={"stream"}), submitted_at=datetime.now(UTC)
    )


async def test_a_queued_request_completes_on_demand_and_its_outcome_is_an_event(make_stack: StackFactory):
    stack = await make_stack()
    queued = await stack.router.submit(recap_call(request_id="recap-1"))
    story = await stack.eventual_story(queued.request_id, lambda types: "inference.completed" in types)
    assert [e.envelope.type for e in story] == ["inference.completed"]
    completed = story[0].envelope
    assert completed.payload["deployment"] == "claude-haiku-od", "async work goes straight to on-demand"
    assert completed.causation_id == str(queued.work_id)


async def test_the_same_item_delivered_twice_has_one_outcome(make_stack: StackFactory):
    stack = await make_stack()
    work = recap()
    data = work.model_dump_json().encode()
    # Two stream messages carrying the same item, as a redelivery after a crash between commit and ack.
    await enqueue(stack.client.broker, WorkSubject.INFERENCE, data, work_id=work.work_id)
    await enqueue(stack.client.broker, WorkSubject.INFERENCE, data, work_id=uuid.uuid4())
    js = stack.client.broker.connection.jetstream()
    await eventually(lambda: js.stream_info("PODWAY_WORK"), lambda info: info.state.messages == 0)
    story = await stack.story(work.request_id)
    assert [e.envelope.type for e in story] == ["inference.completed"]
    assert stack.emulators.bedrock.counters()["models"][CLAUDE_HAIKU_OD]["requests"] == 1, "one provider call"


async def test_a_failed_request_records_why_with_its_attempts(make_stack: StackFactory):
    stack = await make_stack(CLAUDE_FIRST)
    stack.emulators.bedrock.start_outage()
    stack.emulators.vertex.start_outage()
    queued = await stack.router.submit(recap_call())
    story = await stack.eventual_story(queued.request_id, lambda types: "inference.failed" in types)
    types = [e.envelope.type for e in story]
    assert types == ["router.failover", "inference.failed"]
    failed = story[-1].envelope.payload
    assert failed["reason"] == "no_deployment_available"
    assert [a["deployment"] for a in failed["attempts"]] == ["claude-haiku-od", "gemini-flash-od"]
    assert story[-1].envelope.causation_id == str(story[0].envelope.event_id)


async def test_an_item_queued_past_its_deadline_fails_without_a_call(make_stack: StackFactory):
    stack = await make_stack()
    old = recap().model_copy(update={"submitted_at": datetime.now(UTC) - timedelta(hours=1)})
    await enqueue(
        stack.client.broker, WorkSubject.INFERENCE, old.model_dump_json().encode(), work_id=old.work_id
    )
    story = await stack.eventual_story(old.request_id, lambda types: "inference.failed" in types)
    assert story[-1].envelope.payload["reason"] == "deadline_exceeded"
    assert stack.emulators.bedrock.counters()["total"] == {}
