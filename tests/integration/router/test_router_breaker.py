"""The breaker in the router, on the injected clock: opens, probes, ramps and closes without any sleep."""

from __future__ import annotations

import pytest

from libs.core.routing import BreakerState, SpilloverReason
from libs.emulators import RunningEmulators
from libs.events.catalogue import EventType
from libs.router import EventBuffer, ManualClock, NoDeploymentAvailable, Router
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN
from tests.integration.router.conftest import CLAUDE_FIRST, RouterFactory, ask

QUICK_RAMP = {"ramp": [0.5, 1.0], "ramp_step_s": 2, "ramp_min_requests": 2}


def pt_calls(emulators: RunningEmulators) -> int:
    requests: int = emulators.bedrock.counters()["models"].get(CLAUDE_HAIKU_PT_ARN, {}).get("requests", 0)
    return requests


def breaker_events(events: EventBuffer) -> list[tuple[str, str, str]]:
    kinds = (
        EventType.ROUTER_BREAKER_OPENED,
        EventType.ROUTER_BREAKER_HALF_OPENED,
        EventType.ROUTER_BREAKER_CLOSED,
    )
    return [
        (e.payload["from_state"], e.payload["to_state"], e.payload["reason"])
        for e in events.drain()
        if e.type in kinds
    ]


async def probe(router: Router) -> None:
    await router.infer(ask())
    await router.wait_for_probes()


async def test_breaker_opens_probes_ramps_and_closes(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer, clock: ManualClock
) -> None:
    router = make_router(CLAUDE_FIRST, breaker=QUICK_RAMP)
    emulators.bedrock.start_outage(CLAUDE_HAIKU_PT_ARN)

    # 1. Five consecutive failures open the breaker; every request is still answered by OD.
    for _ in range(5):
        assert (await router.infer(ask())).deployment == "claude-haiku-od"
    assert breaker_events(events) == [("closed", "open", "consecutive_failures")]

    # 2. While OPEN no request reaches the PT deployment: they spill at once.
    before = pt_calls(emulators)
    result = await router.infer(ask())
    assert result.spillovers[0].reason is SpilloverReason.PT_BREAKER_OPEN
    assert pt_calls(emulators) == before

    # 3. After open_s one probe goes out; it fails, so the breaker stays open for twice as long.
    clock.advance(5)
    await probe(router)
    assert pt_calls(emulators) == before + 1
    assert breaker_events(events) == [("open", "open", "probe_failed")]
    assert router.breakers()["claude-haiku-pt"].reopens_at == 15

    # 4. The endpoint recovers; the next probe half-opens the breaker.
    emulators.bedrock.end_outage()
    clock.advance(10)
    await probe(router)
    assert breaker_events(events) == [("open", "half_open", "probe_succeeded")]
    assert router.breakers()["claude-haiku-pt"].ramp_fraction == 0.5

    # 5. HALF_OPEN admits half the traffic, deterministically; after the step time it closes.
    served = [(await router.infer(ask())).deployment for _ in range(4)]
    assert served == ["claude-haiku-pt", "claude-haiku-od", "claude-haiku-pt", "claude-haiku-od"]
    clock.advance(2)
    assert (await router.infer(ask())).deployment == "claude-haiku-pt"
    assert breaker_events(events) == [("half_open", "closed", "ramp_completed")]
    assert router.breakers()["claude-haiku-pt"].state is BreakerState.CLOSED


async def test_failure_while_half_open_reopens(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer, clock: ManualClock
) -> None:
    router = make_router(CLAUDE_FIRST, breaker=QUICK_RAMP)
    emulators.bedrock.start_outage(CLAUDE_HAIKU_PT_ARN)
    for _ in range(5):
        await router.infer(ask())
    emulators.bedrock.end_outage()
    clock.advance(5)
    await probe(router)
    emulators.bedrock.inject_error(503, "ServiceUnavailableException", model=CLAUDE_HAIKU_PT_ARN, count=1)
    await router.infer(ask())
    assert breaker_events(events)[-1] == ("half_open", "open", "ramp_failed")
    assert router.breakers()["claude-haiku-pt"].reopens_at == clock.now() + 10


async def test_a_refusal_names_the_open_breakers_and_when_they_probe(
    make_router: RouterFactory, emulators: RunningEmulators, clock: ManualClock
) -> None:
    router = make_router(["claude-haiku"])
    emulators.bedrock.start_outage()
    for _ in range(5):
        with pytest.raises(NoDeploymentAvailable):
            await router.infer(ask())
    clock.advance(1)
    with pytest.raises(NoDeploymentAvailable) as refused:
        await router.infer(ask())
    assert "claude-haiku-pt breaker open, probe in 4.0 s" in str(refused.value)
    assert "claude-haiku-od breaker open, probe in 4.0 s" in str(refused.value)
