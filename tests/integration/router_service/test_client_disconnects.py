"""A caller that goes away, over a real socket: the request still has exactly one outcome
(`inference.failed`, reason `client_disconnected`), and the feature's budget is charged what the provider
consumed and produced before it left (the prompt, and the text streamed), not refunded."""

from __future__ import annotations

import asyncio
import math
from urllib.parse import urlsplit

import httpx
import orjson

from libs.emulators import RunningEmulators
from libs.providers import close_providers, open_providers
from libs.router.example_policy import GEMINI_FLASH, example_policy
from tests.conftest import SQLITE_ONLY
from tests.integration.router_service.conftest import (
    GEMINI_FIRST,
    HeldProvider,
    RouterStack,
    StackFactory,
    policy_document,
)

pytestmark = SQLITE_ONLY

BUDGET = 1000
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a gang?"}]
PROMPT_TOKENS = math.ceil(sum(len(m["content"]) for m in MESSAGES) / 4)
OUTCOMES = {"inference.completed", "inference.failed"}


def request_bytes(stack: RouterStack, request_id: str, **body: object) -> bytes:
    payload = orjson.dumps({"model": "feature:search-answer", "messages": MESSAGES} | body)
    host = urlsplit(stack.service.http_url or "").netloc
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer team-search\r\n"
        f"Content-Type: application/json\r\nX-Request-Id: {request_id}\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


async def connect(stack: RouterStack) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    address = urlsplit(stack.service.http_url or "")
    assert address.hostname is not None
    assert address.port is not None
    return await asyncio.open_connection(address.hostname, address.port)


async def only_outcome(stack: RouterStack, request_id: str) -> tuple[str, dict[str, object]]:
    story = await stack.eventual_story(request_id, lambda types: any(t in OUTCOMES for t in types))
    ends = [(e.envelope.type, e.envelope.payload) for e in story if e.envelope.type in OUTCOMES]
    assert len(ends) == 1, ends
    return ends[0]


async def status_of(stack: RouterStack, max_tokens: int) -> int:
    async with httpx.AsyncClient(base_url=stack.service.http_url or "", timeout=30) as http:
        answer = await http.post(
            "/v1/chat/completions",
            json={"model": "feature:search-answer", "messages": MESSAGES, "max_tokens": max_tokens},
            headers={"Authorization": "Bearer team-search"},
        )
    return answer.status_code


async def assert_budget_left(stack: RouterStack, left: int) -> None:
    """Exactly `left` tokens remain of the minute (the clock is frozen, so nothing refills)."""
    assert await status_of(stack, left - PROMPT_TOKENS + 1) == 429, "more than was left was admitted"
    assert await status_of(stack, left - PROMPT_TOKENS) == 200


async def test_a_caller_closing_before_a_whole_answer_is_one_outcome_charged_its_prompt(
    make_stack: StackFactory, emulators: RunningEmulators
):
    opened = await open_providers(example_policy(emulators.bedrock_url, emulators.vertex_url).providers)
    release, arrivals = asyncio.Event(), asyncio.Queue[str]()
    held = {name: HeldProvider(provider, release, arrivals) for name, provider in opened.items()}
    stack = await make_stack(
        providers=held,
        feature={"budget": {"tokens_per_minute": BUDGET}},
        router_shared_budgets=False,
    )
    try:
        _, writer = await connect(stack)
        writer.write(request_bytes(stack, "gone-1", max_tokens=500))
        await asyncio.wait_for(arrivals.get(), timeout=10)
        writer.close()
        kind, payload = await only_outcome(stack, "gone-1")
        release.set()
        assert kind == "inference.failed"
        assert payload["reason"] == "client_disconnected"
        assert payload["charged_tokens"] == PROMPT_TOKENS
        await assert_budget_left(stack, BUDGET - PROMPT_TOKENS)
    finally:
        release.set()
        await close_providers(opened)


async def test_a_caller_closing_mid_stream_is_one_outcome_charged_what_was_streamed(
    make_stack: StackFactory, emulators: RunningEmulators
):
    stack = await make_stack(
        document=policy_document(emulators, GEMINI_FIRST, budget={"tokens_per_minute": BUDGET}),
        router_shared_budgets=False,
    )
    emulators.vertex.set_latency(GEMINI_FLASH, per_token_ms=150)
    reader, writer = await connect(stack)
    writer.write(request_bytes(stack, "gone-2", max_tokens=500, stream=True))
    received = b""
    while b"alpha" not in received:
        received += await asyncio.wait_for(reader.read(4096), timeout=10)
    writer.close()
    kind, payload = await only_outcome(stack, "gone-2")
    emulators.vertex.set_latency(GEMINI_FLASH)
    assert kind == "inference.failed"
    assert payload["reason"] == "client_disconnected"
    charged = payload["charged_tokens"]
    assert isinstance(charged, int)
    whole_answer = "alpha bravo charlie delta echo foxtrot golf hotel "
    assert PROMPT_TOKENS + math.ceil(len("alpha ") / 4) <= charged < PROMPT_TOKENS + len(whole_answer) / 4
    await assert_budget_left(stack, BUDGET - charged)
