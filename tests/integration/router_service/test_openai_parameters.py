"""What the OpenAI front checks, passes on to the providers and refuses: a parameter is honoured or refused with
400 in OpenAI's error shape naming it, before any provider call, never silently ignored."""

from __future__ import annotations

from typing import Any

import httpx

from libs.emulators import RunningEmulators
from tests.conftest import SQLITE_ONLY
from tests.integration.router_service.conftest import RouterStack, StackFactory

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
