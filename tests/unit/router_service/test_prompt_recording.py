"""Prompt text stays out of the audit unless the feature's policy opts in with `record_prompts`."""

from __future__ import annotations

from typing import Any

import pytest

from libs.core.routing import parse_policy
from libs.events.catalogue import EventType
from libs.providers import Message, ProviderError
from libs.router import EventBuffer, ManualClock, Router
from libs.router.contracts import InferRequest
from libs.router.errors import RoutingError
from libs.router.example_policy import example_policy_document
from services.llm_router.audit import AuditSink, CausalChain
from tests.unit.router_service.test_async_inference import NOW, AnsweringProvider

PROMPT = (Message("system", "Answer tersely."), Message("user", "What is a gang?"))


class RefusingProvider(AnsweringProvider):
    async def complete(self, request: Any) -> Any:
        raise ProviderError("throttled", status=429, code="ThrottlingException")

    async def stream(self, request: Any) -> Any:
        raise ProviderError("throttled", status=429, code="ThrottlingException")
        yield  # an async generator, as a provider's stream is


def router(record: bool, provider: type[AnsweringProvider] = AnsweringProvider) -> tuple[Router, EventBuffer]:
    document = example_policy_document(None, None)
    if record:
        document["features"]["search-answer"]["record_prompts"] = True
    buffer = EventBuffer()
    providers = {name: provider(name) for name in ("bedrock", "vertex")}
    clock = ManualClock(wall_start=NOW.timestamp())
    return Router(parse_policy(document), providers, clock=clock, event_sink=AuditSink(buffer)), buffer


def outcomes(buffer: EventBuffer) -> list[dict[str, Any]]:
    envelopes = CausalChain().envelopes(buffer.drain(1000))
    kept = {EventType.INFERENCE_COMPLETED.value, EventType.INFERENCE_FAILED.value}
    return [e.payload for e in envelopes if e.type in kept]


async def test_an_answer_keeps_no_prompt_text_by_default():
    routed, buffer = router(record=False)

    await routed.infer(InferRequest("search-answer", PROMPT, max_tokens=8))

    (completed,) = outcomes(buffer)
    assert completed.get("prompt") is None
    assert "What is a gang?" not in str(completed)


async def test_a_feature_that_opts_in_keeps_its_messages_with_the_answer():
    routed, buffer = router(record=True)

    await routed.infer(InferRequest("search-answer", PROMPT, max_tokens=8))

    (completed,) = outcomes(buffer)
    assert completed["prompt"] == [
        {"role": "system", "content": "Answer tersely."},
        {"role": "user", "content": "What is a gang?"},
    ]


async def test_a_failed_request_of_an_opted_in_feature_keeps_its_messages_too():
    routed, buffer = router(record=True, provider=RefusingProvider)

    with pytest.raises(RoutingError):
        await routed.infer(InferRequest("search-answer", PROMPT, max_tokens=8))

    (failed,) = outcomes(buffer)
    assert failed["prompt"][1] == {"role": "user", "content": "What is a gang?"}
