"""What the OpenAI front checks, passes on to the providers and refuses: a parameter is honoured or refused with
400 in OpenAI's error shape naming it, before any provider call, never silently ignored."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from libs.emulators import RunningEmulators
from tests.conftest import SQLITE_ONLY
from tests.integration.router_service.conftest import CLAUDE_FIRST, GEMINI_FIRST, RouterStack, StackFactory

pytestmark = SQLITE_ONLY

MESSAGES = [{"role": "user", "content": "What is a gang?"}]


async def post(stack: RouterStack, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.service.http_url or "") as http:
        return await http.post(
            "/v1/chat/completions",
            json={"model": "feature:search-answer", "messages": MESSAGES} | body,
            headers={"Authorization": "Bearer team-search"},
        )


def provider_calls(emulators: RunningEmulators) -> int:
    return sum(
        control.counters()["total"].get("requests", 0) for control in (emulators.bedrock, emulators.vertex)
    )


async def refusals(stack: RouterStack, cases: list[tuple[dict[str, Any], str, str]]) -> list[str]:
    """The cases whose answer was not a 400 naming the param, with the message expected."""
    wrong = []
    for body, param, message in cases:
        answer = await post(stack, body)
        is_json = answer.headers.get("Content-Type") == "application/json"
        error = (answer.json().get("error") or {}) if is_json else {}
        got = (answer.status_code, error.get("type"), error.get("param"), error.get("message"))
        if got != (400, "invalid_request_error", param, message):
            wrong.append(f"{body}: {got}")
    return wrong


async def test_values_outside_openais_types_and_ranges_are_400_before_any_provider_call(
    make_stack: StackFactory, emulators: RunningEmulators
):
    stack = await make_stack()
    cases = [
        (
            {"messages": []},
            "messages",
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array "
            "instead.",
        ),
        (
            {"max_tokens": 0},
            "max_tokens",
            "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead.",
        ),
        (
            {"max_completion_tokens": 0},
            "max_completion_tokens",
            "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, "
            "but got 0 instead.",
        ),
        (
            {"max_tokens": True},
            "max_tokens",
            "Invalid type for 'max_tokens': expected an integer, but got a boolean instead.",
        ),
        (
            {"max_tokens": 1.5},
            "max_tokens",
            "Invalid type for 'max_tokens': expected an integer, but got a decimal instead.",
        ),
        (
            {"temperature": 5},
            "temperature",
            "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 5 instead.",
        ),
        (
            {"temperature": -1},
            "temperature",
            "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead.",
        ),
        (
            {"temperature": "0.5"},
            "temperature",
            "Invalid type for 'temperature': expected a decimal, but got a string instead.",
        ),
        (
            {"top_p": 1.5},
            "top_p",
            "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 1.5 instead.",
        ),
        (
            {"stream": "false"},
            "stream",
            "Invalid type for 'stream': expected a boolean, but got a string instead.",
        ),
        (
            {"stream_options": {"include_usage": True}},
            "stream_options",
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        ),
        (
            {"stream": True, "stream_options": "yes"},
            "stream_options",
            "Invalid type for 'stream_options': expected an object, but got a string instead.",
        ),
        (
            {"stream": True, "stream_options": {"include_usage": "yes"}},
            "stream_options.include_usage",
            "Invalid type for 'stream_options.include_usage': expected a boolean, but got a string instead.",
        ),
        (
            {"stream": True, "stream_options": {"include_usage": True, "usage": True}},
            "stream_options.usage",
            "Unknown parameter: 'stream_options.usage'.",
        ),
    ]
    assert await refusals(stack, cases) == []
    assert provider_calls(emulators) == 0, "refused before any provider call"


async def test_values_at_the_edges_of_openais_ranges_are_answered(make_stack: StackFactory):
    stack = await make_stack()
    for body in (
        {"max_tokens": 1, "temperature": 0, "top_p": 0},
        {"max_completion_tokens": 4, "temperature": 2, "top_p": 1, "stream": False},
        {"max_tokens": None, "temperature": None, "stream": None, "stream_options": None},
    ):
        answer = await post(stack, body)
        assert answer.status_code == 200, (body, answer.text)
    streamed = await post(stack, {"stream": True, "stream_options": {"include_usage": False}})
    assert streamed.status_code == 200
    assert streamed.headers["Content-Type"] == "text/event-stream"


def openai_client(stack: RouterStack) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{stack.service.http_url}/v1", api_key="team-search", max_retries=0)


@pytest.mark.parametrize(
    ("models", "cloud", "config"),
    [
        (CLAUDE_FIRST, "bedrock", {"maxTokens": 16, "topP": 0.5, "stopSequences": ["charlie", "zulu"]}),
        (GEMINI_FIRST, "vertex", {"maxOutputTokens": 16, "topP": 0.5, "stopSequences": ["charlie", "zulu"]}),
    ],
)
async def test_stop_sequences_and_top_p_reach_the_provider_whole_and_streamed(
    make_stack: StackFactory,
    emulators: RunningEmulators,
    models: list[str],
    cloud: str,
    config: dict[str, Any],
):
    stack = await make_stack(models)
    async with openai_client(stack) as client:
        whole = await client.chat.completions.create(
            model="feature:search-answer",
            messages=MESSAGES,
            max_tokens=16,
            top_p=0.5,
            stop=["charlie", "zulu"],
        )
        stream = await client.chat.completions.create(
            model="feature:search-answer", messages=MESSAGES, max_tokens=16, stop="charlie", stream=True
        )
        chunks = [chunk async for chunk in stream]
    assert (whole.choices[0].message.content, whole.choices[0].finish_reason) == ("alpha bravo ", "stop")
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "alpha bravo "
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    first, second = getattr(emulators, cloud).requests()
    assert first[CONFIG_FIELD[cloud]] == config, "what reached the provider"
    assert second[CONFIG_FIELD[cloud]]["stopSequences"] == ["charlie"]


CONFIG_FIELD = {"bedrock": "inferenceConfig", "vertex": "generationConfig"}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


async def test_parameters_the_router_cannot_honour_are_400_naming_them_before_any_provider_call(
    make_stack: StackFactory, emulators: RunningEmulators
):
    stack = await make_stack()
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    cases = [
        (
            {"n": 2},
            "n",
            "Unsupported value: 'n' does not support 2 on this router; it answers with one choice (1).",
        ),
        (
            {"logprobs": True},
            "logprobs",
            "Unsupported value: 'logprobs' does not support true on this router; it returns no log "
            "probabilities (false).",
        ),
        (
            {"top_logprobs": 2},
            "top_logprobs",
            "Unsupported parameter: 'top_logprobs' is not supported on this router; it returns no log "
            "probabilities.",
        ),
        (
            {"response_format": {"type": "json_object"}},
            "response_format",
            'Unsupported value: \'response_format\' does not support {"type":"json_object"} on this router; '
            'it answers in text ({"type":"text"}).',
        ),
        (
            {"tools": [tool]},
            "tools",
            "Unsupported parameter: 'tools' is not supported on this router; it does not pass tools to the "
            "providers.",
        ),
        (
            {"tool_choice": "auto"},
            "tool_choice",
            "Unsupported value: 'tool_choice' does not support \"auto\" on this router; it does not pass tools "
            'to the providers ("none").',
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, IMAGE]}]},
            "messages[0].content[1].type",
            "Unsupported value: 'messages[0].content[1].type' does not support \"image_url\" on this router; "
            "only 'text' parts are passed to the providers.",
        ),
        (
            {"stop": ["a", "b", "c", "d", "e"]},
            "stop",
            "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with "
            "length 5 instead.",
        ),
        (
            {"stop": 7},
            "stop",
            "Invalid type for 'stop': expected a string or an array of strings, but got an integer instead.",
        ),
        ({"best_of": 2}, "best_of", "Unknown parameter: 'best_of'."),
    ]
    assert await refusals(stack, cases) == []
    assert provider_calls(emulators) == 0, "refused before any provider call"


async def test_parameters_at_the_value_the_router_gives_are_answered(make_stack: StackFactory):
    stack = await make_stack()
    answer = await post(
        stack,
        {
            "n": 1,
            "logprobs": False,
            "response_format": {"type": "text"},
            "tools": None,
            "tool_choice": "none",
            "user": "someone",
            "metadata": {"team": "search"},
            "store": False,
            "stop": None,
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"]
