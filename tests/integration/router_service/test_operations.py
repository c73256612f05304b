"""Operating the router: hot reload of the policy file, quality feedback, the scoreboard, the in-flight cap."""

from __future__ import annotations

import asyncio
import logging

import pytest
import yaml

from libs.emulators import RunningEmulators, serve
from libs.events.catalogue import RpcSubject
from libs.events.inference import FRAME_END, FRAME_ERROR, STREAM_HEADER, FeedbackReport, InferenceRefusal
from libs.messaging.streaming_rpc import stream_request
from libs.providers import open_providers
from libs.router.example_policy import example_policy
from tests.conftest import SQLITE_ONLY
from tests.integration.router_service.conftest import (
    CLAUDE_FIRST,
    GEMINI_FIRST,
    HeldProvider,
    StackFactory,
    ask,
    policy_document,
)
from tests.support import eventually

pytestmark = SQLITE_ONLY


async def test_an_edited_policy_file_is_reloaded_and_audited(make_stack: StackFactory):
    stack = await make_stack()
    assert (await stack.router.infer(ask())).deployment == "gemini-flash-pt"
    document = yaml.safe_load(stack.policy_path.read_text())
    document["features"]["search-answer"]["routes"] = [{"weight": 1, "models": CLAUDE_FIRST}]
    stack.policy_path.write_text(yaml.safe_dump(document) + "\n")

    assert await stack.service.check_policy() is True
    assert (await stack.router.infer(ask())).deployment == "claude-haiku-pt"
    [reloaded] = await stack.story("policy")
    assert reloaded.envelope.type == "router.policy.reloaded"
    assert reloaded.envelope.payload["kept_state"] == [
        "claude-haiku-od",
        "claude-haiku-pt",
        "gemini-flash-od",
        "gemini-flash-pt",
    ]


async def test_a_reloaded_policy_file_resolves_provider_placeholders_as_the_first_load_did(
    make_stack: StackFactory, emulators: RunningEmulators, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PODWAY_BEDROCK_ENDPOINT", emulators.bedrock_url)
    monkeypatch.setenv("PODWAY_VERTEX_ENDPOINT", emulators.vertex_url)
    document = policy_document(emulators, GEMINI_FIRST)
    document["providers"]["bedrock"]["endpoint_url"] = "${PODWAY_BEDROCK_ENDPOINT}"
    document["providers"]["vertex"]["api_endpoint"] = "${PODWAY_VERTEX_ENDPOINT}"
    stack = await make_stack(document=document)
    router = stack.service.router
    assert router is not None
    first = router.policy.providers
    assert first["bedrock"].endpoint_url == emulators.bedrock_url

    document["features"]["search-answer"]["routes"] = [{"weight": 1, "models": CLAUDE_FIRST}]
    stack.policy_path.write_text(yaml.safe_dump(document) + "\n")
    assert await stack.service.check_policy() is True
    assert router.policy.providers == first
    assert (await stack.router.infer(ask())).deployment == "claude-haiku-pt"

    monkeypatch.delenv("PODWAY_VERTEX_ENDPOINT")
    stack.policy_path.write_text(yaml.safe_dump(document) + "\n\n")
    assert await stack.service.check_policy() is False, "refused on reload as it would be at start"
    assert router.policy.providers == first


async def test_the_policy_watcher_keeps_watching_after_a_file_it_cannot_read_and_an_error(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    stack = await make_stack(router_policy_poll_s=0.02)
    service = stack.service
    assert service.watcher is not None
    assert service.router is not None
    document = yaml.safe_load(stack.policy_path.read_text())
    stack.policy_path.unlink()
    stack.policy_path.mkdir()  # briefly a directory: stat works, the read fails
    with caplog.at_level(logging.WARNING):
        await eventually(_async(lambda: caplog.text), lambda text: "not readable" in text)
    assert "not readable" in caplog.text

    real = service.watcher.changed_policy
    calls = {"n": 0}

    def failing_once():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in a check")
        return real()

    monkeypatch.setattr(service.watcher, "changed_policy", failing_once)
    stack.policy_path.rmdir()
    document["features"]["search-answer"]["routes"] = [{"weight": 1, "models": CLAUDE_FIRST}]
    stack.policy_path.write_text(yaml.safe_dump(document))
    router = service.router
    routes = await eventually(
        _async(lambda: router.policy.features["search-answer"].routes[0].models),
        lambda models: list(models) == CLAUDE_FIRST,
    )
    assert list(routes) == CLAUDE_FIRST, (
        "still watching: the edit after the directory and the error is in force"
    )
    assert calls["n"] >= 2


def _async(read):
    async def probe():
        return read()

    return probe


async def test_a_policy_cut_before_its_api_keys_is_reloaded_with_a_warning_logged_and_audited(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
):
    """Valid on its own (a router may serve no HTTP callers), but every caller of the front now gets 401."""
    stack = await make_stack()
    text = stack.policy_path.read_text()
    stack.policy_path.write_text(text[: text.index("api_keys:")])

    with caplog.at_level(logging.WARNING):
        assert await stack.service.check_policy() is True
    warning = "api_keys: none left (the policy in force had 1): every caller of the OpenAI front now gets 401"
    assert warning in caplog.text
    [reloaded] = await stack.story("policy")
    assert reloaded.envelope.payload["warnings"] == [warning]


async def test_a_changed_provider_endpoint_gets_a_new_client_and_the_traffic_at_once(
    make_stack: StackFactory, emulators: RunningEmulators
):
    stack = await make_stack(GEMINI_FIRST)
    moved = await serve()
    try:
        document = yaml.safe_load(stack.policy_path.read_text())
        document["providers"]["vertex"]["api_endpoint"] = moved.vertex_url
        stack.policy_path.write_text(yaml.safe_dump(document))
        assert await stack.service.check_policy() is True
        answer = await stack.router.infer(ask())
        assert moved.vertex.counters()["total"]["ok"] == 1, "the new endpoint answered"
    finally:
        await moved.close()
    assert answer.deployment == "gemini-flash-pt"
    assert emulators.vertex.counters()["models"] == {}, "nothing went to the old endpoint"
    [reloaded] = await stack.story("policy")
    assert reloaded.envelope.payload["reopened_providers"] == ["vertex"]
    assert reloaded.envelope.payload["kept_state"] == ["claude-haiku-od", "claude-haiku-pt"], (
        "the breakers of the moved deployments start afresh"
    )
    assert reloaded.envelope.payload["warnings"] == []


async def test_an_invalid_policy_edit_keeps_the_policy_in_force(make_stack: StackFactory):
    stack = await make_stack()
    document = yaml.safe_load(stack.policy_path.read_text())
    document["features"]["search-answer"]["routes"][0]["weight"] = 0
    stack.policy_path.write_text(yaml.safe_dump(document))
    assert await stack.service.check_policy() is False
    assert (await stack.router.infer(ask())).deployment == "gemini-flash-pt"
    assert await stack.story("policy") == []


async def test_feedback_feeds_the_scoreboard_and_is_audited(make_stack: StackFactory):
    stack = await make_stack()
    answer = await stack.router.infer(ask(request_id="req-good"))
    recorded = await stack.router.feedback(
        FeedbackReport(request_id="req-good", score=1.0, comment="spot on")
    )
    assert (recorded.recorded, recorded.feature, recorded.model) == (True, "search-answer", "gemini-flash")

    board = await stack.router.scoreboard()
    [row] = [r for r in board.rows if r.model == answer.model]
    assert (row.requests, row.feedback_count, row.feedback_mean) == (1, 1, 1.0)
    story = await stack.story("req-good")
    assert [e.envelope.type for e in story] == ["inference.completed", "inference.feedback"]
    assert story[1].envelope.payload["comment"] == "spot on"


async def test_feedback_for_a_request_the_router_never_saw_is_not_recorded(make_stack: StackFactory):
    stack = await make_stack()
    recorded = await stack.router.feedback(FeedbackReport(request_id="req-unknown", score=0.0))
    assert recorded.recorded is False


async def test_beyond_its_in_flight_cap_the_router_refuses_at_once_without_blaming_a_provider(
    make_stack: StackFactory, emulators
):
    opened = await open_providers(example_policy(emulators.bedrock_url, emulators.vertex_url).providers)
    release, arrivals = asyncio.Event(), asyncio.Queue[str]()
    held = {name: HeldProvider(provider, release, arrivals) for name, provider in opened.items()}
    stack = await make_stack(providers=held, router_max_in_flight=2)
    try:
        in_flight = [asyncio.create_task(stack.router.infer(ask())) for _ in range(2)]
        for _ in range(2):
            await asyncio.wait_for(arrivals.get(), timeout=10)

        replies = [
            r
            async for r in stream_request(
                stack.client.broker,
                RpcSubject.ROUTER_INFER,
                ask().model_dump_json().encode(),
                frame_header=STREAM_HEADER,
                last_frames=(FRAME_END, FRAME_ERROR),
                idle_timeout_s=10,
            )
        ]
        refusal = InferenceRefusal.model_validate_json(replies[0].data)
        assert (replies[0].headers[STREAM_HEADER], refusal.reason, refusal.http_status) == (
            "error",
            "overloaded",
            503,
        )
        assert refusal.retry_after_s == pytest.approx(1.0)

        release.set()
        assert [a.deployment for a in await asyncio.gather(*in_flight)] == ["gemini-flash-pt"] * 2
        breakers = stack.service.router.breakers()
        assert all(b.window_requests == 0 or b.window_error_rate == 0 for b in breakers.values())
        assert stack.service.cap.refused == 1
    finally:
        release.set()
        for provider in opened.values():
            await provider.aclose()
