"""A queued request's outcome: answered, refused, deferred when over budget, failed when queued too long."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from libs.core.routing import parse_policy
from libs.events.inference import ChatMessage, InferenceWork
from libs.messaging.work_queue import Deferral, MalformedWork
from libs.providers import Chunk, Completion, ProviderRequest, Usage
from libs.router import EventBuffer, ManualClock, Router
from libs.router.example_policy import example_policy_document
from services.llm_router.audit import AuditSink
from services.llm_router.overload import InFlightCap
from services.llm_router.work import AsyncInference

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class AnsweringProvider:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    async def complete(self, request: ProviderRequest) -> Completion:
        self.calls += 1
        return Completion("fine", Usage(4, request.max_tokens), request.tier.value, "end_turn", 0.001)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[Chunk]:
        self.calls += 1
        yield Chunk("fine", Usage(4, request.max_tokens))

    async def aclose(self) -> None:
        return None


@pytest.fixture
def handler() -> tuple[AsyncInference, EventBuffer, dict[str, AnsweringProvider]]:
    document = example_policy_document(None, None)
    document["features"]["channel-recap"]["budget"] = {"tokens_per_minute": 300}
    providers = {name: AnsweringProvider(name) for name in ("bedrock", "vertex")}
    clock = ManualClock(wall_start=NOW.timestamp())
    buffer = EventBuffer()
    sink = AuditSink(buffer)
    router = Router(parse_policy(document), providers, clock=clock, event_sink=sink)
    return AsyncInference(router, sink, InFlightCap(4), clock), buffer, providers


def work(
    feature: str = "channel-recap", *, queued_for: timedelta = timedelta(0), max_tokens: int = 64
) -> bytes:
    item = InferenceWork(
        feature=feature,
        messages=[ChatMessage(role="user", content="Recap the channel.")],
        max_tokens=max_tokens,
        submitted_at=NOW - queued_for,
    )
    return item.model_dump_json().encode()


async def test_the_outcome_is_returned_to_be_written_with_the_inbox_mark_not_buffered(handler):
    inference, buffer, _ = handler
    data = work()
    envelopes = await inference.perform(data)
    assert not isinstance(envelopes, Deferral)
    assert [e.type for e in envelopes] == ["inference.completed"]
    assert envelopes[0].causation_id == str(inference.identify(data))
    assert len(buffer) == 0


async def test_a_feature_over_its_budget_defers_the_item(handler):
    inference, _, _ = handler
    await inference.perform(work(max_tokens=250))
    outcome = await inference.perform(work(max_tokens=250))
    assert isinstance(outcome, Deferral)
    assert outcome.delay_s > 0


async def test_an_item_queued_past_its_deadline_fails_without_calling_a_provider(handler):
    inference, _, providers = handler
    envelopes = await inference.perform(work(queued_for=timedelta(minutes=11)))
    assert not isinstance(envelopes, Deferral)
    assert [(e.type, e.payload["reason"]) for e in envelopes] == [("inference.failed", "deadline_exceeded")]
    assert sum(p.calls for p in providers.values()) == 0


async def test_an_unknown_feature_is_a_recorded_failure(handler):
    inference, _, _ = handler
    envelopes = await inference.perform(work("nope"))
    assert not isinstance(envelopes, Deferral)
    assert [(e.type, e.payload["reason"]) for e in envelopes] == [("inference.failed", "unknown_feature")]


def test_malformed_or_streaming_work_goes_to_the_dead_letter_queue(handler):
    inference, _, _ = handler
    with pytest.raises(MalformedWork):
        inference.identify(b'{"feature": "channel-recap"}')
    streaming = InferenceWork.model_validate_json(work()).model_copy(
        update={"stream": True, "work_id": uuid.uuid4()}
    )
    with pytest.raises(MalformedWork, match="cannot stream"):
        inference.identify(streaming.model_dump_json().encode())
