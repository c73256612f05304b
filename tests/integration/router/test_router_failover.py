"""Failover within one request: across clouds on outages, never on client errors, told apart by error code."""

from __future__ import annotations

import pytest

from libs.core.routing import FailureReason
from libs.emulators import RunningEmulators
from libs.events.catalogue import EventType
from libs.router import (
    BudgetExceeded,
    EventBuffer,
    NoDeploymentAvailable,
    RequestRejected,
    UnknownFeature,
)
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN, GEMINI_FLASH
from tests.integration.router.conftest import CLAUDE_FIRST, GEMINI_FIRST, RouterFactory, ask


async def test_bedrock_outage_fails_over_to_vertex_in_the_same_request(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.bedrock.start_outage()
    router = make_router(CLAUDE_FIRST)
    result = await router.infer(ask(request_id="req-outage"))
    assert (result.deployment, result.provider) == ("gemini-flash-pt", "vertex")
    assert [(a.deployment, a.reason, a.status) for a in result.attempts] == [
        ("claude-haiku-pt", FailureReason.UNAVAILABLE, 503),
        ("claude-haiku-od", FailureReason.UNAVAILABLE, 503),
        ("gemini-flash-pt", None, None),
    ]
    moves = [
        (e.payload["from_deployment"], e.payload["to_deployment"], e.payload["reason"])
        for e in events.of_type(EventType.ROUTER_FAILOVER)
    ]
    assert moves == [
        ("claude-haiku-pt", "claude-haiku-od", "unavailable"),
        ("claude-haiku-od", "gemini-flash-pt", "unavailable"),
    ]
    failover = events.of_type(EventType.ROUTER_FAILOVER)[1].payload
    assert failover["code"] == "ServiceUnavailableException"
    assert failover["breaker_state"] == "closed"
    assert failover["dispatch_ms"] < 5


async def test_validation_error_is_returned_without_failover(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.bedrock.inject_error(400, "ValidationException", count=1, message="messages: too long")
    router = make_router(CLAUDE_FIRST)
    with pytest.raises(RequestRejected) as caught:
        await router.infer(ask())
    assert caught.value.http_status == 400
    assert [(a.deployment, a.reason) for a in caught.value.attempts] == [
        ("claude-haiku-pt", FailureReason.CLIENT_ERROR)
    ]
    assert events.of_type(EventType.ROUTER_FAILOVER) == []
    assert events.of_type(EventType.INFERENCE_FAILED)[0].payload["reason"] == "client_error"
    assert router.breakers()["claude-haiku-pt"].consecutive_failures == 0


async def test_vertex_404_is_returned_without_failover(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    emulators.vertex.inject_error(404, "NOT_FOUND", count=1)
    router = make_router(GEMINI_FIRST)
    with pytest.raises(RequestRejected) as caught:
        await router.infer(ask())
    assert caught.value.http_status == 404
    assert len(caught.value.attempts) == 1


async def test_model_not_ready_429_is_told_apart_from_pt_throttling(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = make_router(CLAUDE_FIRST)
    emulators.bedrock.inject_error(429, "ModelNotReadyException", model=CLAUDE_HAIKU_PT_ARN, count=1)
    not_ready = await router.infer(ask())
    emulators.bedrock.inject_error(429, "ThrottlingException", model=CLAUDE_HAIKU_PT_ARN, count=1)
    throttled = await router.infer(ask())
    assert not_ready.attempts[0].reason is FailureReason.NOT_READY
    assert throttled.attempts[0].reason is FailureReason.PT_EXHAUSTED
    assert not_ready.deployment == throttled.deployment == "claude-haiku-od"
    assert router.breakers()["claude-haiku-pt"].window_requests == 1, "only not_ready counts against health"


async def test_on_demand_throttle_fails_over_to_the_next_model(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.vertex.set_capacity(GEMINI_FLASH, "provisioned", concurrency=0)
    emulators.vertex.set_capacity(GEMINI_FLASH, "on_demand", concurrency=0)
    router = make_router(GEMINI_FIRST)
    result = await router.infer(ask())
    assert result.deployment == "claude-haiku-pt"
    assert [a.reason for a in result.attempts[:2]] == [FailureReason.PT_EXHAUSTED, FailureReason.THROTTLED]
    assert events.of_type(EventType.ROUTER_FAILOVER)[0].payload["reason"] == "throttled"


async def test_slow_first_byte_fails_over_and_counts_against_the_breaker(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = make_router(GEMINI_FIRST, feature={"first_byte_timeout_ms": 300})
    await router.infer(ask(feature="channel-recap"))  # the first call of a client opens its connection pool
    emulators.vertex.set_latency(GEMINI_FLASH, ttft_ms=5000)
    result = await router.infer(ask())
    assert result.deployment == "claude-haiku-pt"
    assert [a.reason for a in result.attempts] == [FailureReason.TIMEOUT, FailureReason.TIMEOUT, None]
    assert all(a.elapsed_ms < 1500 for a in result.attempts[:2])
    assert router.breakers()["gemini-flash-pt"].consecutive_failures == 1


async def test_every_cloud_down_is_an_explicit_failure(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.bedrock.start_outage()
    emulators.vertex.start_outage()
    router = make_router(GEMINI_FIRST)
    with pytest.raises(NoDeploymentAvailable) as caught:
        await router.infer(ask())
    assert len(caught.value.attempts) == 4
    assert caught.value.http_status == 503
    assert len(events.of_type(EventType.INFERENCE_FAILED)) == 1


async def test_feature_budget_refuses_with_retry_after(make_router: RouterFactory) -> None:
    router = make_router(GEMINI_FIRST, feature={"budget": {"tokens_per_minute": 600}})
    await router.infer(ask("x" * 40, max_tokens=590))  # reserves 10 + 590 tokens, then keeps only its usage
    with pytest.raises(BudgetExceeded) as caught:
        await router.infer(ask("x" * 40, max_tokens=590))
    assert caught.value.http_status == 429
    assert caught.value.retry_after_s > 0


async def test_unknown_feature_is_refused(make_router: RouterFactory) -> None:
    router = make_router()
    with pytest.raises(UnknownFeature):
        await router.infer(ask(feature="nope"))


async def test_a_move_to_another_model_past_refused_deployments_is_a_failover_not_a_spillover(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    router = make_router(
        GEMINI_FIRST, deployments={"gemini-flash-pt": {"capacity": {"tokens_per_minute": 100}}}
    )
    emulators.vertex.start_outage()
    for _ in range(
        5
    ):  # PT has no room, so each spills to gemini-flash-od, which fails until its breaker opens
        await router.infer(ask(max_tokens=256))
    assert router.breakers()["gemini-flash-od"].state == "open"
    events.drain()
    result = await router.infer(ask(max_tokens=256, request_id="req-moved"))
    assert result.deployment == "claude-haiku-pt"
    assert [(s.deployment, s.reason) for s in result.skips] == [
        ("gemini-flash-pt", "pt_capacity"),
        ("gemini-flash-od", "breaker_open"),
    ]
    assert result.spillovers == ()
    assert events.of_type(EventType.ROUTER_SPILLOVER) == []
    [failover] = events.of_type(EventType.ROUTER_FAILOVER)
    assert (
        failover.payload["from_deployment"],
        failover.payload["to_deployment"],
        failover.payload["reason"],
        failover.payload.get("code"),
    ) == ("gemini-flash-od", "claude-haiku-pt", "breaker_open", None)
