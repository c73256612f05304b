"""Streaming: failover only before the first chunk reaches the caller; a later failure is an explicit error."""

from __future__ import annotations

from libs.core.routing import FailureReason
from libs.emulators import RunningEmulators
from libs.events.catalogue import EventType
from libs.router import (
    EventBuffer,
    InferRequest,
    InferResult,
    MidStreamFailure,
    Router,
    StreamCompleted,
    TextDelta,
)
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN, GEMINI_FLASH
from tests.integration.router.conftest import CLAUDE_FIRST, GEMINI_FIRST, RouterFactory, ask


async def collect(router: Router, request: InferRequest) -> tuple[list[str], list[InferResult]]:
    texts: list[str] = []
    completed: list[InferResult] = []
    async for event in router.stream(request):
        if isinstance(event, TextDelta):
            texts.append(event.text)
        else:
            assert isinstance(event, StreamCompleted)
            completed.append(event.result)
    return texts, completed


async def texts_until_error(router: Router, request: InferRequest) -> tuple[list[str], MidStreamFailure]:
    texts: list[str] = []
    try:
        async for event in router.stream(request):
            assert isinstance(event, TextDelta)
            texts.append(event.text)
    except MidStreamFailure as exc:
        return texts, exc
    raise AssertionError("the stream ended without an error")


async def test_stream_delivers_text_then_one_completion(
    make_router: RouterFactory, events: EventBuffer
) -> None:
    router = make_router(CLAUDE_FIRST)
    texts, [result] = await collect(router, ask(stream=True))
    assert len(texts) == 8
    assert result.text == "".join(texts)
    assert (result.deployment, result.usage.output_tokens) == ("claude-haiku-pt", 8)
    assert result.first_byte_ms <= result.latency_ms
    assert events.of_type(EventType.INFERENCE_COMPLETED)[0].payload["stream"] is True


async def test_vertex_stream_reports_the_served_tier(make_router: RouterFactory) -> None:
    router = make_router(GEMINI_FIRST)
    texts, [result] = await collect(router, ask(stream=True))
    assert (result.deployment, result.served_tier) == ("gemini-flash-pt", "provisioned")
    assert "".join(texts) == result.text


async def test_in_stream_exception_before_any_text_fails_over(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.bedrock.fail_mid_stream(CLAUDE_HAIKU_PT_ARN, after_chunks=0, code="serviceUnavailableException")
    router = make_router(CLAUDE_FIRST)
    texts, [result] = await collect(router, ask(stream=True))
    assert result.deployment == "claude-haiku-od"
    assert [(a.deployment, a.reason) for a in result.attempts] == [
        ("claude-haiku-pt", FailureReason.UNAVAILABLE),
        ("claude-haiku-od", None),
    ]
    assert len(texts) == 8
    assert events.of_type(EventType.ROUTER_FAILOVER)[0].payload["code"] == "serviceUnavailableException"


async def test_http_error_before_the_stream_fails_over_across_clouds(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    emulators.vertex.start_outage()
    router = make_router(GEMINI_FIRST)
    _, [result] = await collect(router, ask(stream=True))
    assert result.provider == "bedrock"


async def test_bedrock_failure_after_text_is_an_explicit_error(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.bedrock.fail_mid_stream(after_chunks=2, code="modelStreamErrorException")
    router = make_router(CLAUDE_FIRST)
    texts, error = await texts_until_error(router, ask(stream=True))
    assert texts == ["alpha ", "bravo "]
    assert error.failure_reason == "model_error"
    assert [a.deployment for a in error.attempts] == ["claude-haiku-pt"]
    assert events.of_type(EventType.ROUTER_FAILOVER) == []
    assert events.of_type(EventType.INFERENCE_FAILED)[0].payload["reason"] == "mid_stream_failure"
    assert router.breakers()["claude-haiku-pt"].consecutive_failures == 1
    assert router.capacity()["claude-haiku-pt"].in_flight == 0


async def test_vertex_stream_cut_short_is_an_explicit_error(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    emulators.vertex.fail_mid_stream(GEMINI_FLASH, after_chunks=3)
    router = make_router(GEMINI_FIRST)
    texts, error = await texts_until_error(router, ask(stream=True))
    assert len(texts) == 3
    assert error.failure_reason == "unavailable"


async def test_slow_first_chunk_fails_over_before_anything_reaches_the_caller(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = make_router(GEMINI_FIRST, feature={"first_byte_timeout_ms": 300})
    await router.infer(ask(feature="channel-recap"))  # the first call of a client opens its connection pool
    emulators.vertex.set_latency(GEMINI_FLASH, ttft_ms=5000)
    texts, [result] = await collect(router, ask(stream=True))
    assert result.provider == "bedrock"
    assert [a.reason for a in result.attempts[:2]] == [FailureReason.TIMEOUT, FailureReason.TIMEOUT]
    assert len(texts) == 8


async def test_caller_leaving_early_releases_capacity(make_router: RouterFactory) -> None:
    router = make_router(CLAUDE_FIRST)
    stream = router.stream(ask(stream=True))
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()
    assert router.capacity()["claude-haiku-pt"].in_flight == 0
