"""PT first, spill to OD: on the local capacity tracker, on Bedrock's PT throttle, on Vertex's dedicated 429."""

from __future__ import annotations

from libs.core.routing import SkipReason, SpilloverReason, Tier
from libs.emulators import RunningEmulators
from libs.events.catalogue import EventType
from libs.router import EventBuffer
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN, GEMINI_FLASH
from tests.integration.router.conftest import CLAUDE_FIRST, GEMINI_FIRST, RouterFactory, ask


async def test_sync_request_is_served_on_provisioned_throughput(
    make_router: RouterFactory, events: EventBuffer
) -> None:
    router = make_router(GEMINI_FIRST)
    result = await router.infer(ask())
    assert (result.deployment, result.served_tier) == ("gemini-flash-pt", "provisioned")
    assert result.usage.output_tokens == 8
    assert result.text.startswith("alpha bravo")
    assert result.added_ms < result.latency_ms
    [completed] = events.of_type(EventType.INFERENCE_COMPLETED)
    assert completed.payload["deployment"] == "gemini-flash-pt"
    assert completed.payload["served_tier"] == "provisioned"


async def test_vertex_dedicated_429_is_reissued_as_shared_with_a_spillover_event(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.vertex.set_capacity(GEMINI_FLASH, "provisioned", tokens_per_minute=1)
    router = make_router(GEMINI_FIRST)
    result = await router.infer(ask(request_id="req-1"))
    assert (result.deployment, result.served_tier) == ("gemini-flash-od", "on_demand")
    assert [(a.deployment, a.reason) for a in result.attempts] == [
        ("gemini-flash-pt", "pt_exhausted"),
        ("gemini-flash-od", None),
    ]
    [spill] = events.of_type(EventType.ROUTER_SPILLOVER)
    assert spill.correlation_id == "req-1"
    assert spill.payload | {"elapsed_ms": 0, "dispatch_ms": 0} == {
        "request_id": "req-1",
        "feature": "search-answer",
        "model": "gemini-flash",
        "from_deployment": "gemini-flash-pt",
        "to_deployment": "gemini-flash-od",
        "reason": "pt_exhausted",
        "code": "TooManyRequests",
        "status": 429,
        "elapsed_ms": 0,
        "dispatch_ms": 0,
    }
    assert router.breakers()["gemini-flash-pt"].consecutive_failures == 0, (
        "PT exhaustion is capacity, not ill health"
    )
    counts = emulators.vertex.counters()["total"]
    assert (counts["throttled_provisioned"], counts["served_on_demand"]) == (1, 1)


async def test_bedrock_pt_throttle_spills_to_the_on_demand_model(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    emulators.bedrock.set_capacity(CLAUDE_HAIKU_PT_ARN, "provisioned", concurrency=0)
    router = make_router(CLAUDE_FIRST)
    result = await router.infer(ask())
    assert (result.deployment, result.requested_tier) == ("claude-haiku-od", Tier.ON_DEMAND)
    assert [s.reason for s in result.spillovers] == [SpilloverReason.PT_EXHAUSTED]
    assert events.of_type(EventType.ROUTER_SPILLOVER)[0].payload["code"] == "ThrottlingException"


async def test_pt_exhaustion_stops_further_pt_calls_until_capacity_refills(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    emulators.bedrock.set_capacity(CLAUDE_HAIKU_PT_ARN, "provisioned", concurrency=0)
    router = make_router(CLAUDE_FIRST)
    await router.infer(ask())
    second = await router.infer(ask())
    assert second.spillovers[0].reason is SpilloverReason.PT_CAPACITY
    assert emulators.bedrock.counters()["models"][CLAUDE_HAIKU_PT_ARN]["requests"] == 1


async def test_local_capacity_tracker_spills_before_calling_pt(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    router = make_router(
        GEMINI_FIRST, deployments={"gemini-flash-pt": {"capacity": {"tokens_per_minute": 100}}}
    )
    result = await router.infer(ask(max_tokens=256))
    assert result.deployment == "gemini-flash-od"
    assert [(s.deployment, s.reason) for s in result.skips] == [("gemini-flash-pt", SkipReason.PT_CAPACITY)]
    [spill] = events.of_type(EventType.ROUTER_SPILLOVER)
    assert (spill.payload["reason"], spill.payload["to_deployment"]) == ("pt_capacity", "gemini-flash-od")
    assert "served_provisioned" not in emulators.vertex.counters()["total"]


async def test_async_feature_goes_to_on_demand_directly(
    make_router: RouterFactory, events: EventBuffer
) -> None:
    router = make_router(GEMINI_FIRST)
    result = await router.infer(ask(feature="channel-recap"))
    assert (result.deployment, result.served_tier) == ("claude-haiku-od", "on_demand")
    assert result.cost > 0
    assert events.of_type(EventType.ROUTER_SPILLOVER) == []


async def test_pt_capacity_is_not_a_failure_of_the_model_on_the_scoreboard(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    emulators.vertex.set_capacity(GEMINI_FLASH, "provisioned", tokens_per_minute=1)
    router = make_router(GEMINI_FIRST)
    first = await router.infer(ask())  # PT says it is exhausted: spilled to on-demand
    second = await router.infer(ask())  # the tracker now knows: PT skipped without a call
    assert [a.reason for a in first.attempts] == ["pt_exhausted", None]
    assert [s.reason for s in second.skips] == [SkipReason.PT_CAPACITY]
    [row] = router.scoreboard.snapshot()
    assert (row.model, row.requests, row.failures, row.error_rate) == ("gemini-flash", 2, 0, 0.0)
