"""The sync path's audit events are group-committed off the request path, and one request's events tell its
story as a causal chain."""

from __future__ import annotations

from libs.router.example_policy import GEMINI_FLASH
from tests.conftest import SQLITE_ONLY
from tests.integration.router_service.conftest import CLAUDE_FIRST, StackFactory, ask


async def test_a_cross_cloud_failover_is_told_by_its_request_id(make_stack: StackFactory):
    stack = await make_stack(CLAUDE_FIRST)
    stack.emulators.bedrock.start_outage()
    answer = await stack.router.infer(ask(request_id="req-outage"))
    assert answer.provider == "vertex"

    story = await stack.story("req-outage")
    assert [e.envelope.type for e in story] == ["router.failover", "router.failover", "inference.completed"]
    first, second, completed = (e.envelope for e in story)
    assert (first.payload["from_deployment"], first.payload["to_deployment"]) == (
        "claude-haiku-pt",
        "claude-haiku-od",
    )
    assert (second.payload["from_deployment"], second.payload["to_deployment"]) == (
        "claude-haiku-od",
        "gemini-flash-pt",
    )
    assert second.payload["code"] == "ServiceUnavailableException"
    assert second.payload["status"] == 503
    assert completed.payload["deployment"] == "gemini-flash-pt"
    assert [first.causation_id, second.causation_id, completed.causation_id] == [
        None,
        str(first.event_id),
        str(second.event_id),
    ]
    assert {e.envelope.producer for e in story} == {"llm_router"}
    assert completed.subject is not None
    assert (completed.subject.kind, completed.subject.name) == ("InferenceRequest", "req-outage")


@SQLITE_ONLY
async def test_pt_exhaustion_spills_to_on_demand_with_an_event(make_stack: StackFactory):
    stack = await make_stack()
    stack.emulators.vertex.set_capacity(GEMINI_FLASH, "provisioned", concurrency=0)
    answer = await stack.router.infer(ask(request_id="req-spill"))
    assert (answer.deployment, answer.served_tier) == ("gemini-flash-od", "on_demand")
    story = await stack.story("req-spill")
    assert [e.envelope.type for e in story] == ["router.spillover", "inference.completed"]
    spill = story[0].envelope.payload
    assert (spill["from_deployment"], spill["to_deployment"], spill["reason"]) == (
        "gemini-flash-pt",
        "gemini-flash-od",
        "pt_exhausted",
    )


@SQLITE_ONLY
async def test_audit_events_reach_the_log_without_an_explicit_flush(make_stack: StackFactory):
    stack = await make_stack()
    await stack.router.infer(ask(request_id="req-quiet"))
    engine_story = await stack.eventual_story("req-quiet", lambda types: types == ["inference.completed"])
    assert len(engine_story) == 1
    assert stack.service.flusher.written >= 1


@SQLITE_ONLY
async def test_breaker_transitions_are_the_deployment_story(make_stack: StackFactory):
    stack = await make_stack(CLAUDE_FIRST)
    stack.emulators.bedrock.start_outage()
    for _ in range(5):
        await stack.router.infer(ask())
    story = await stack.story("claude-haiku-pt")
    assert [e.envelope.type for e in story] == ["router.breaker.opened"]
    assert story[0].envelope.payload["reason"] == "consecutive_failures"
    board = await stack.router.scoreboard()
    assert {b.deployment: b.state for b in board.breakers}["claude-haiku-pt"] == "open"
