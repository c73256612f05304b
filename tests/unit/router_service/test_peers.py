"""Breaker outcomes from the other router processes: fed to this process's breakers, its own skipped, malformed
messages dropped."""

from __future__ import annotations

import pytest

from libs.core.routing import BreakerState
from libs.events.inference import AttemptOutcomes
from libs.router import ManualClock, Router
from libs.router.contracts import InferRequest
from libs.router.example_policy import example_policy
from services.llm_router.peers import PeerOutcomes
from tests.unit.router_service.test_prompt_recording import PROMPT
from tests.unit.router_service.test_prompt_recording import router as answering_router


def make_router() -> Router:
    policy = example_policy("http://127.0.0.1:1", "http://127.0.0.1:2")
    return Router(policy, {"bedrock": object(), "vertex": object()}, clock=ManualClock())  # type: ignore[dict-item]


def message(instance: str, outcomes: list[tuple[str, float | None]]) -> bytes:
    return AttemptOutcomes(instance=instance, outcomes=outcomes).model_dump_json().encode()


def test_a_peers_failures_open_this_processs_breaker():
    router = make_router()
    peers = PeerOutcomes(router, "0")
    peers.receive(message("1", [("claude-haiku-pt", None)] * 5 + [("gemini-flash-pt", 0.01)]))
    breakers = router.breakers()
    assert breakers["claude-haiku-pt"].state is BreakerState.OPEN
    assert breakers["gemini-flash-pt"].window_requests == 1
    assert peers.received == 6


def test_a_peers_answers_and_failures_are_evidence_here_too():
    router = make_router()
    peers = PeerOutcomes(router, "0")
    peers.receive(
        message("1", [("gemini-flash-od", 0.4)] * 3 + [("claude-haiku-od", 0.02), ("claude-haiku-od", None)])
    )
    evidence = router.evidence()
    assert evidence["gemini-flash-od"].first_byte_ms > 250
    assert evidence["claude-haiku-od"].first_byte_ms < 30
    assert evidence["claude-haiku-od"].error_rate > 0
    assert evidence["gemini-flash-od"].error_rate == 0
    assert evidence["gemini-flash-od"].cost_per_1k_tokens == 0  # not known from a peer's outcome


def test_its_own_outcomes_and_unknown_deployments_change_nothing():
    router = make_router()
    peers = PeerOutcomes(router, "0")
    peers.receive(message("0", [("claude-haiku-pt", None)] * 5))
    peers.receive(message("1", [("retired-deployment", None)] * 5))
    assert all(b.state is BreakerState.CLOSED for b in router.breakers().values())
    assert router.breakers()["claude-haiku-pt"].window_requests == 0


def test_a_malformed_message_is_skipped():
    router = make_router()
    peers = PeerOutcomes(router, "0")
    peers.receive(b'{"instance": "1", "outcomes": [["claude-haiku-pt", "soon"]]}')
    peers.receive(b"not json")
    assert peers.received == 0
    assert router.breakers()["claude-haiku-pt"].window_requests == 0


def test_the_router_hands_over_the_outcomes_its_breakers_heard_once():
    router = make_router()
    router.record_peer_outcomes([("claude-haiku-od", None)])  # a peer's: not handed on again
    assert router.drain_outcomes() == []


async def test_the_sharer_is_woken_by_the_first_outcome_of_a_batch_only():
    router, _ = answering_router(record=False)
    woken: list[str] = []
    router.on_outcome = lambda: woken.append("woken")
    for n in range(3):
        await router.infer(InferRequest(feature="search-answer", messages=PROMPT, request_id=f"req-{n}"))
    assert woken == ["woken"], "outcomes waiting to be shared do not wake the sharer again"
    assert len(router.drain_outcomes()) == 3
    await router.infer(InferRequest(feature="search-answer", messages=PROMPT, request_id="req-3"))
    assert woken == ["woken", "woken"]


def test_its_own_messages_are_known_before_parsing_and_a_peer_with_a_longer_name_is_not_taken_for_it(
    caplog: pytest.LogCaptureFixture,
):
    router = make_router()
    peers = PeerOutcomes(router, "0")
    own = message("0", [("claude-haiku-pt", None)])
    peers.receive(own.replace(b"null", b'"not parsed"'))  # would be refused as malformed if it were parsed
    peers.receive(message("01", [("claude-haiku-pt", None)]))
    assert "malformed" not in caplog.text, "its own message was skipped unparsed"
    assert peers.received == 1
    assert router.breakers()["claude-haiku-pt"].window_requests == 1
