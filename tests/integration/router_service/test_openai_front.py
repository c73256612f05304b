"""The OpenAI-compatible front, spoken to by the official `openai` client."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx
import openai
import pytest
from openai import AsyncOpenAI

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

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a gang?"}]


def openai_client(stack: RouterStack, key: str = "team-search") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{stack.service.http_url}/v1", api_key=key, max_retries=0)


async def test_a_completion_is_answered_in_openai_format(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack) as client:
        completion = await client.chat.completions.create(
            model="feature:search-answer", messages=MESSAGES, max_tokens=16
        )
    assert completion.choices[0].message.content == "alpha bravo charlie delta echo foxtrot golf hotel "
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "gemini-flash"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 8
    assert completion.model_extra is not None
    assert completion.model_extra["podway"]["deployment"] == "gemini-flash-pt"


async def test_the_feature_may_come_from_the_header(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack) as client:
        completion = await client.chat.completions.create(
            model="anything", messages=MESSAGES, extra_headers={"X-Podway-Feature": "search-answer"}
        )
    assert completion.choices[0].message.content


async def test_a_streamed_completion_arrives_as_chunks_with_usage(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack) as client:
        stream = await client.chat.completions.create(
            model="feature:search-answer",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "alpha bravo charlie delta echo foxtrot golf hotel "
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 8


async def test_a_request_id_longer_than_the_audit_log_holds_is_refused(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack) as client:
        with pytest.raises(openai.BadRequestError, match="X-Request-Id"):
            await client.chat.completions.create(
                model="feature:search-answer", messages=MESSAGES, extra_headers={"X-Request-Id": "r" * 129}
            )
    assert len(stack.service.buffer) == 0, "no event of the request waits for the audit log"


async def read_into(received: list[str], stream) -> None:
    async for chunk in stream:
        received.append(chunk.choices[0].delta.content or "")


async def test_a_stream_broken_after_text_raises_in_the_client(make_stack: StackFactory):
    stack = await make_stack()
    stack.emulators.vertex.fail_mid_stream(GEMINI_FLASH, after_chunks=2)
    received: list[str] = []
    async with openai_client(stack) as client:
        stream = await client.chat.completions.create(
            model="feature:search-answer", messages=MESSAGES, stream=True
        )
        with pytest.raises(openai.APIError, match="broke after the first byte"):
            await read_into(received, stream)
    assert "".join(received) == "alpha bravo "


async def test_an_unknown_key_is_401(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack, key="nope") as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.chat.completions.create(model="feature:search-answer", messages=MESSAGES)
    assert caught.value.code == "invalid_api_key"


async def test_a_feature_outside_the_key_is_403(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack) as client:
        with pytest.raises(openai.PermissionDeniedError) as caught:
            await client.chat.completions.create(model="feature:channel-recap", messages=MESSAGES)
    assert caught.value.code == "feature_not_allowed"


async def test_a_feature_over_its_budget_is_429_with_retry_after(make_stack: StackFactory):
    stack = await make_stack(feature={"budget": {"tokens_per_minute": 600}})
    async with openai_client(stack) as client:
        await client.chat.completions.create(model="feature:search-answer", messages=MESSAGES, max_tokens=590)
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(
                model="feature:search-answer", messages=MESSAGES, max_tokens=590
            )
    assert int(caught.value.response.headers["Retry-After"]) >= 1
    assert caught.value.code == "rate_limit_exceeded"


async def test_a_key_over_its_request_rate_is_429_with_the_true_retry_after(
    make_stack: StackFactory, emulators: RunningEmulators
):
    document = policy_document(emulators, GEMINI_FIRST)
    document["api_keys"]["team-search"]["rate_limit"] = {"requests_per_minute": 2}
    stack = await make_stack(document=document)
    async with openai_client(stack) as client:
        for _ in range(2):
            await client.chat.completions.create(
                model="feature:search-answer", messages=MESSAGES, max_tokens=8
            )
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(
                model="feature:search-answer", messages=MESSAGES, max_tokens=8
            )
    assert caught.value.response.headers["Retry-After"] == "30"  # two a minute: the next in half a minute
    assert "api_keys.<key>.rate_limit.requests_per_minute" in caught.value.message


async def test_a_request_above_a_minute_of_its_keys_budget_is_400_saying_why(
    make_stack: StackFactory, emulators: RunningEmulators
):
    document = policy_document(emulators, GEMINI_FIRST)
    document["api_keys"]["team-search"]["budget"] = {"tokens_per_minute": 1000}
    stack = await make_stack(document=document)
    async with openai_client(stack) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="feature:search-answer", messages=MESSAGES, max_tokens=5000
            )
    assert caught.value.code == "exceeds_budget"
    assert "api_keys.<key>.budget.tokens_per_minute (1000 per minute)" in caught.value.message
    assert emulators.vertex.counters()["models"] == {}  # refused before any provider call


async def test_error_answers_carry_the_request_id_so_a_failure_can_be_looked_up(
    make_stack: StackFactory, emulators: RunningEmulators
):
    document = policy_document(emulators, GEMINI_FIRST)
    document["api_keys"]["team-search"]["rate_limit"] = {"requests_per_minute": 1}
    stack = await make_stack(document=document)
    async with openai_client(stack) as client:
        await client.chat.completions.create(model="feature:search-answer", messages=MESSAGES, max_tokens=8)
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(
                model="feature:search-answer",
                messages=MESSAGES,
                max_tokens=8,
                extra_headers={"X-Request-Id": "mine-429"},
            )
        with pytest.raises(openai.BadRequestError) as invalid:
            await client.chat.completions.create(model="feature:search-answer", messages=[], max_tokens=8)
    async with openai_client(stack, key="nobody") as stranger:
        with pytest.raises(openai.AuthenticationError) as unknown:
            await stranger.chat.completions.create(
                model="feature:search-answer", messages=MESSAGES, extra_headers={"X-Request-Id": "mine-401"}
            )
    assert limited.value.response.headers["X-Request-Id"] == "mine-429"
    assert unknown.value.response.headers["X-Request-Id"] == "mine-401"
    assert invalid.value.response.headers["X-Request-Id"]  # one was drawn for it


async def test_models_lists_the_features_of_the_key(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack) as client:
        models = await client.models.list()
    assert [m.id for m in models.data] == ["feature:search-answer"]


async def test_metrics_count_requests_per_feature_and_deployment(make_stack: StackFactory):
    stack = await make_stack()
    async with openai_client(stack) as client:
        await client.chat.completions.create(model="feature:search-answer", messages=MESSAGES)
    async with aiohttp.ClientSession() as http, http.get(f"{stack.service.http_url}/metrics") as response:
        page = await response.text()
    assert (
        'podway_router_requests_total{deployment="gemini-flash-pt",feature="search-answer",served_tier="provisioned"} 1.0'
        in page
    )
    assert 'podway_router_breaker_state{deployment="claude-haiku-pt"} 0.0' in page
    assert "podway_router_first_byte_seconds_bucket" in page


async def test_a_head_has_no_body_and_the_kept_alive_connection_serves_on(make_stack: StackFactory):
    """A HEAD answered with a body breaks the next answer on the connection (httpx reads the body as it)."""
    stack = await make_stack()
    headers = {"Authorization": "Bearer team-search"}
    async with httpx.AsyncClient(base_url=stack.service.http_url or "", headers=headers) as http:
        refused = await http.head("/v1/chat/completions")
        listed = await http.head("/v1/models")
        answered = await http.post(
            "/v1/chat/completions", json={"model": "feature:search-answer", "messages": MESSAGES}
        )
    assert (refused.status_code, refused.headers["Allow"], refused.content) == (405, "POST", b"")
    assert (listed.status_code, listed.content) == (200, b""), "HEAD is GET without the body"
    assert int(listed.headers["Content-Length"]) > 0
    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["content"]


def chat(request_id: bytes | str | None = None) -> dict[str, Any]:
    """An httpx request of a chat completion (to send raw header bytes, which the openai client cannot)."""
    headers: dict[str, Any] = {"Authorization": "Bearer team-search"}
    if request_id is not None:
        headers["X-Request-Id"] = request_id
    return {
        "url": "/v1/chat/completions",
        "json": {"model": "feature:search-answer", "messages": MESSAGES, "max_tokens": 8},
        "headers": headers,
    }


async def test_a_request_id_that_is_not_visible_ascii_is_refused_under_a_fresh_one(
    make_stack: StackFactory, emulators: RunningEmulators
):
    """A header has no character set: an id in UTF-8 would be stored as its bytes read in Latin-1."""
    stack = await make_stack()
    async with httpx.AsyncClient(base_url=stack.service.http_url or "") as http:
        answers = [await http.post(**chat(sent)) for sent in ("café-1".encode(), b"two words", b"tab\tbed")]
    for answer in answers:
        assert answer.status_code == 400
        assert answer.json()["error"] == {
            "message": "X-Request-Id: must be 1 to 128 visible ASCII characters (letters, digits, punctuation)",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request",
        }
        fresh = answer.headers["X-Request-Id"]
        assert fresh.isascii()
        assert len(fresh) == 32
    assert emulators.vertex.counters()["models"] == {}, "refused before any provider call"
    assert len(stack.service.buffer) == 0, "nothing of them waits for the audit log"


async def test_a_request_id_in_flight_is_refused_with_409_and_free_again_once_answered(
    make_stack: StackFactory, emulators: RunningEmulators
):
    """Two requests in flight under one id would write their stories into each other."""
    opened = await open_providers(example_policy(emulators.bedrock_url, emulators.vertex_url).providers)
    release, arrivals = asyncio.Event(), asyncio.Queue[str]()
    held = {name: HeldProvider(provider, release, arrivals) for name, provider in opened.items()}
    stack = await make_stack(providers=held)
    try:
        async with httpx.AsyncClient(base_url=stack.service.http_url or "") as http:
            first = asyncio.create_task(http.post(**chat("mine-1")))
            await asyncio.wait_for(arrivals.get(), timeout=10)
            again = await http.post(**chat("mine-1"))
            release.set()
            answered = await first
            later = await http.post(**chat("mine-1"))
    finally:
        release.set()
        await close_providers(opened)
    assert (again.status_code, again.headers["X-Request-Id"]) == (409, "mine-1")
    assert again.json()["error"] == {
        "message": "X-Request-Id: request 'mine-1' is in flight; send another id, or the same once it is answered",
        "type": "invalid_request_error",
        "param": None,
        "code": "request_id_in_use",
    }
    assert (answered.status_code, later.status_code) == (200, 200)
    story = [e.envelope.type for e in await stack.story("mine-1")]
    assert story == ["inference.completed", "inference.completed"], "one outcome per answer, none for the 409"


async def test_an_internal_error_carries_the_request_id(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
):
    stack = await make_stack()

    async def broken(request: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(stack.service.router, "infer", broken)
    async with httpx.AsyncClient(base_url=stack.service.http_url or "") as http:
        answer = await http.post(**chat("mine-500"))
    assert (answer.status_code, answer.headers.get("X-Request-Id")) == (500, "mine-500")
    assert answer.json()["error"]["code"] == "internal_error"


async def test_a_request_expecting_100_continue_with_a_bad_key_is_401_before_its_body(
    make_stack: StackFactory,
):
    stack = await make_stack()
    address = urlsplit(stack.service.http_url or "")
    assert address.hostname is not None
    assert address.port is not None
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 99\r\n"
    writer.write(head + b"Authorization: Bearer nope\r\n\r\n")
    refused = await asyncio.wait_for(reader.read(), 10)  # closed without waiting for the body
    writer.close()
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    writer.write(head + b"Authorization: Bearer team-search\r\n\r\n")
    go_on = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    writer.close()
    assert refused.startswith(b"HTTP/1.1 401 ")
    assert b"invalid_api_key" in refused
    assert go_on == b"HTTP/1.1 100 Continue\r\n\r\n"
