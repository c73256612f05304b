"""Two router replicas on one bus: they share sync requests and the work queue through queue groups and one
durable, every request has exactly one outcome, and each replica's breakers hear the other's attempts."""

from __future__ import annotations

import asyncio
from collections import Counter

from libs.core.routing import BreakerState
from libs.db.engine import create_engine, create_session_factory
from libs.db.uow import unit_of_work_factory
from libs.events.catalogue import EventType
from libs.providers import Message
from libs.router import InferRequest
from services.llm_router.app import RouterService
from tests.integration.router_service.conftest import CLAUDE_FIRST, RouterStack, StackFactory, ask
from tests.support import eventually

REQUESTS = 40


def answered_by(service: RouterService) -> float:
    return sum(
        sample.value
        for metric in service.metrics.requests.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


async def outcomes(stack: RouterStack) -> Counter[str]:
    engine = create_engine(stack.database_url)
    try:
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            found: Counter[str] = Counter()
            for type_ in (EventType.INFERENCE_COMPLETED, EventType.INFERENCE_FAILED):
                found.update(
                    e.envelope.correlation_id for e in await uow.events.by_type(type_.value, limit=10_000)
                )
            return found
    finally:
        await engine.dispose()


async def test_two_replicas_share_requests_and_each_request_has_one_outcome(make_stack: StackFactory):
    first = await make_stack()
    second = await make_stack(instance="1")
    sync_ids = [f"sync-{i}" for i in range(REQUESTS)]
    await asyncio.gather(*(first.router.infer(ask(request_id=rid)) for rid in sync_ids))
    queued = [
        await first.router.submit(
            ask(request_id=f"async-{i}").model_copy(update={"feature": "channel-recap"})
        )
        for i in range(REQUESTS // 2)
    ]
    async_ids = [q.request_id for q in queued]

    async def settled() -> Counter[str]:
        await first.service.flush_audit()
        await second.service.flush_audit()
        return await outcomes(first)

    found = await eventually(settled, lambda c: all(rid in c for rid in async_ids))
    assert answered_by(first.service) > 0, "both replicas served"
    assert answered_by(second.service) > 0, "both replicas served"
    assert answered_by(first.service) + answered_by(second.service) == REQUESTS + len(async_ids)
    assert {rid: found[rid] for rid in sync_ids + async_ids} == dict.fromkeys(sync_ids + async_ids, 1)


async def test_a_replicas_breaker_opens_on_the_failures_its_peer_saw(make_stack: StackFactory):
    first = await make_stack(CLAUDE_FIRST)
    second = await make_stack(CLAUDE_FIRST, instance="1")
    first.emulators.bedrock.start_outage()
    router = first.service.router
    assert router is not None
    for i in range(5):  # each request fails on claude-haiku-pt and claude-haiku-od before Gemini answers
        await router.infer(InferRequest("search-answer", (Message("user", "hi"),), request_id=f"r{i}"))
    assert router.breakers()["claude-haiku-pt"].state is BreakerState.OPEN
    assert first.service.peers is not None
    await first.service.peers.publish_now()
    breakers = await eventually(
        lambda: asyncio.sleep(0, second.service.router.breakers()),  # type: ignore[union-attr]
        lambda b: b["claude-haiku-pt"].state is BreakerState.OPEN,
    )
    assert breakers["claude-haiku-pt"].state is BreakerState.OPEN
    assert breakers["claude-haiku-pt"].consecutive_failures >= 5
    assert answered_by(second.service) == 0, "the second replica opened its breaker on what it heard alone"
