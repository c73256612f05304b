"""Sync inference over NATS: one `end` frame per answer, chunks then exactly one end when streaming, and an
explicit `error` frame whenever an answer cannot be completed."""

from __future__ import annotations

import json

import pytest

from libs.events.catalogue import RpcSubject
from libs.events.inference import FRAME_END, FRAME_ERROR, STREAM_HEADER, InferenceAnswer, InferenceRefusal
from libs.messaging.rpc import ERROR_HEADER, RpcError, request
from libs.messaging.streaming_rpc import Reply, stream_request
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN
from tests.conftest import SQLITE_ONLY
from tests.integration.router_service.conftest import CLAUDE_FIRST, StackFactory, ask

pytestmark = SQLITE_ONLY


async def frames(stack, call) -> list[Reply]:
    replies = stream_request(
        stack.client.broker,
        RpcSubject.ROUTER_INFER,
        call.model_dump_json().encode(),
        frame_header=STREAM_HEADER,
        last_frames=(FRAME_END, FRAME_ERROR),
        idle_timeout_s=10,
    )
    return [reply async for reply in replies]


def kinds(replies: list[Reply]) -> list[str]:
    return [reply.headers[STREAM_HEADER] for reply in replies]


async def test_a_request_is_answered_with_one_end_frame_naming_deployment_and_tier(make_stack: StackFactory):
    stack = await make_stack()
    replies = await frames(stack, ask(request_id="req-1"))
    assert kinds(replies) == ["end"]
    answer = InferenceAnswer.model_validate_json(replies[0].data)
    assert (answer.request_id, answer.deployment, answer.served_tier) == (
        "req-1",
        "gemini-flash-pt",
        "provisioned",
    )
    assert answer.text == "alpha bravo charlie delta echo foxtrot golf hotel "
    assert answer.usage.output_tokens == 8
    assert answer.provider_ms + answer.added_ms == pytest.approx(answer.latency_ms, abs=0.01)


async def test_a_stream_is_chunks_then_exactly_one_end(make_stack: StackFactory):
    stack = await make_stack(CLAUDE_FIRST)
    replies = await frames(stack, ask(stream=True))
    assert kinds(replies) == ["chunk"] * 8 + ["end"]
    end = InferenceAnswer.model_validate_json(replies[-1].data)
    assert (
        "".join(r.data.decode() for r in replies[:-1]) == "alpha bravo charlie delta echo foxtrot golf hotel "
    )
    assert (end.deployment, end.served_tier, end.usage.output_tokens) == ("claude-haiku-pt", "provisioned", 8)
    assert end.text == "", "the text already went out in the chunks"


async def test_a_stream_broken_after_text_ends_with_an_error_frame(make_stack: StackFactory):
    stack = await make_stack(CLAUDE_FIRST)
    stack.emulators.bedrock.fail_mid_stream(CLAUDE_HAIKU_PT_ARN, after_chunks=2)
    replies = await frames(stack, ask(stream=True))
    assert kinds(replies) == ["chunk", "chunk", "error"]
    error = InferenceRefusal.model_validate_json(replies[-1].data)
    assert error.reason == "mid_stream_failure"
    assert [a.deployment for a in error.attempts] == ["claude-haiku-pt"]


async def test_a_failure_before_the_first_byte_fails_over_unseen(make_stack: StackFactory):
    stack = await make_stack(CLAUDE_FIRST)
    stack.emulators.bedrock.start_outage()
    replies = await frames(stack, ask(stream=True))
    assert kinds(replies) == ["chunk"] * 8 + ["end"]
    end = InferenceAnswer.model_validate_json(replies[-1].data)
    assert end.provider == "vertex"
    assert [(a.deployment, a.reason) for a in end.attempts] == [
        ("claude-haiku-pt", "unavailable"),
        ("claude-haiku-od", "unavailable"),
        ("gemini-flash-pt", "ok"),
    ]


async def test_nobody_able_to_answer_is_an_error_frame_and_an_rpc_error(make_stack: StackFactory):
    stack = await make_stack()
    stack.emulators.bedrock.start_outage()
    stack.emulators.vertex.start_outage()
    replies = await frames(stack, ask())
    assert kinds(replies) == ["error"]
    assert replies[0].headers[ERROR_HEADER] == "no_deployment_available"
    assert InferenceRefusal.model_validate_json(replies[0].data).http_status == 503
    with pytest.raises(RpcError) as caught:
        await request(stack.client.broker, RpcSubject.ROUTER_INFER, ask(), timeout_s=10)
    assert caught.value.error_type == "no_deployment_available"


async def test_a_malformed_request_is_refused_with_an_error_frame(make_stack: StackFactory):
    stack = await make_stack()
    replies = [
        r
        async for r in stream_request(
            stack.client.broker,
            RpcSubject.ROUTER_INFER,
            json.dumps({"feature": "search-answer", "messages": []}).encode(),
            frame_header=STREAM_HEADER,
            last_frames=(FRAME_END, FRAME_ERROR),
            idle_timeout_s=10,
        )
    ]
    assert kinds(replies) == ["error"]
    refusal = InferenceRefusal.model_validate_json(replies[0].data)
    assert (refusal.reason, refusal.http_status) == ("bad_request", 400)


async def test_a_request_id_longer_than_the_audit_log_holds_is_refused_before_routing(
    make_stack: StackFactory,
):
    stack = await make_stack()
    replies = await frames(stack, ask(request_id="r" * 129))
    assert kinds(replies) == ["error"]
    refusal = InferenceRefusal.model_validate_json(replies[0].data)
    assert (refusal.reason, refusal.http_status) == ("bad_request", 400)
    assert len(stack.service.buffer) == 0, "no event of the request waits for the audit log"


async def test_the_typed_client_streams_text_then_the_answer(make_stack: StackFactory):
    stack = await make_stack()
    items = [item async for item in stack.router.stream(ask())]
    assert all(isinstance(i, str) for i in items[:-1])
    assert isinstance(items[-1], InferenceAnswer)
    assert items[-1].deployment == "gemini-flash-pt"
