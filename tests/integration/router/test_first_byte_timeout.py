"""`first_byte_timeout_ms` bounds one attempt up to the provider's first byte, and nothing after it; only a
deployment's own faults count against it (over real sockets, against the emulators' injected latency)."""

from __future__ import annotations

import pytest

from libs.core.routing import FailureReason
from libs.emulators import RunningEmulators
from libs.router import DeadlineExceeded, Router
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN, GEMINI_FLASH
from tests.integration.router.conftest import GEMINI_FIRST, RouterFactory, ask
from tests.integration.router.test_router_streaming import texts_until_error

LONG_PROMPT = " ".join(["gang"] * 200)


def provider_calls(emulators: RunningEmulators) -> int:
    return sum(
        control.counters()["total"].get("requests", 0) for control in (emulators.bedrock, emulators.vertex)
    )


async def warmed(router: Router) -> Router:
    """The first call of a client opens its connection pool; tests time the calls after it."""
    await router.infer(ask(feature="channel-recap"))
    return router


async def test_a_slow_but_healthy_whole_answer_is_not_cut_by_the_first_byte_timeout(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = await warmed(make_router(GEMINI_FIRST, feature={"first_byte_timeout_ms": 300}))
    before = provider_calls(emulators)
    # First token after 50 ms, the whole answer after about a second: longer than the first-byte timeout.
    emulators.vertex.set_latency(GEMINI_FLASH, ttft_ms=50, per_token_ms=60)
    result = await router.infer(ask(LONG_PROMPT, max_tokens=16))
    assert result.deployment == "gemini-flash-pt"
    assert [a.reason for a in result.attempts] == [None]
    assert result.usage.output_tokens > 5
    assert result.latency_ms > 300
    assert result.first_byte_ms < 300
    assert provider_calls(emulators) == before + 1, "one billed provider call"
    breaker = router.breakers()["gemini-flash-pt"]
    assert breaker.consecutive_failures == 0
    assert breaker.window_error_rate == 0.0


async def test_no_first_byte_in_time_fails_over_and_is_a_slow_outcome_of_that_deployment(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = await warmed(make_router(GEMINI_FIRST, feature={"first_byte_timeout_ms": 300}))
    emulators.vertex.set_latency(GEMINI_FLASH, ttft_ms=5000)
    result = await router.infer(ask())
    assert result.deployment == "claude-haiku-pt"
    assert [a.reason for a in result.attempts] == [FailureReason.TIMEOUT, FailureReason.TIMEOUT, None]
    assert router.breakers()["gemini-flash-pt"].consecutive_failures == 1
    evidence = router.evidence()
    assert evidence["gemini-flash-pt"].first_byte_ms >= 150  # the 300 ms waited, blended with the prior
    assert evidence["gemini-flash-pt"].error_rate > 0
    assert evidence["claude-haiku-pt"].error_rate == 0


async def test_a_stream_cut_by_the_deadline_after_its_first_bytes_is_not_held_against_the_deployment(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = await warmed(
        make_router(GEMINI_FIRST, feature={"first_byte_timeout_ms": 300, "deadline_ms": 700})
    )
    emulators.vertex.set_latency(GEMINI_FLASH, ttft_ms=10, per_token_ms=200)
    texts, error = await texts_until_error(router, ask(LONG_PROMPT, max_tokens=16))
    assert texts, "bytes had reached the caller"
    assert error.failure_reason == "timeout"
    assert "deadline" in str(error)
    breaker = router.breakers()["gemini-flash-pt"]
    assert breaker.consecutive_failures == 0
    assert breaker.window_error_rate == 0.0
    assert router.evidence()["gemini-flash-pt"].error_rate == 0
    assert all(row.failures == 0 for row in router.scoreboard.snapshot())


async def test_a_whole_answer_cut_by_the_deadline_after_its_first_byte_is_a_deadline_not_a_failover(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = await warmed(
        make_router(GEMINI_FIRST, feature={"first_byte_timeout_ms": 300, "deadline_ms": 700})
    )
    before = provider_calls(emulators)
    emulators.vertex.set_latency(GEMINI_FLASH, ttft_ms=10, per_token_ms=200)
    with pytest.raises(DeadlineExceeded) as caught:
        await router.infer(ask(LONG_PROMPT, max_tokens=16))
    assert [a.deployment for a in caught.value.attempts] == ["gemini-flash-pt"]
    assert provider_calls(emulators) == before + 1, "no second billed call"
    assert router.breakers()["gemini-flash-pt"].consecutive_failures == 0


async def test_a_bedrock_whole_answer_is_timed_to_its_first_token_too(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = await warmed(
        make_router(["claude-haiku", "gemini-flash"], feature={"first_byte_timeout_ms": 300})
    )
    emulators.bedrock.set_latency(CLAUDE_HAIKU_PT_ARN, ttft_ms=50, per_token_ms=60)
    result = await router.infer(ask(LONG_PROMPT, max_tokens=16))
    assert result.deployment == "claude-haiku-pt"
    assert [a.reason for a in result.attempts] == [None]
    assert result.latency_ms > 300
    assert router.breakers()["claude-haiku-pt"].consecutive_failures == 0
