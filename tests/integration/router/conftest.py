"""Fixtures for router tests against the emulators, through the real SDKs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from libs.core.routing import RoutingPolicy, parse_policy
from libs.emulators import RunningEmulators, serve
from libs.providers import Message, Provider, close_providers, open_providers
from libs.router import EventBuffer, InferRequest, ManualClock, Router
from libs.router.example_policy import example_policy, example_policy_document

CLAUDE_FIRST = ["claude-haiku", "gemini-flash"]
GEMINI_FIRST = ["gemini-flash", "claude-haiku"]


@pytest.fixture
async def emulators() -> AsyncIterator[RunningEmulators]:
    running = await serve()
    yield running
    await running.close()


@pytest.fixture
async def providers(emulators: RunningEmulators) -> AsyncIterator[dict[str, Provider]]:
    opened = await open_providers(example_policy(emulators.bedrock_url, emulators.vertex_url).providers)
    yield opened
    await close_providers(opened)


@pytest.fixture
def events() -> EventBuffer:
    return EventBuffer()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def make_policy(
    emulators: RunningEmulators,
    models: list[str],
    *,
    feature: dict[str, Any] | None = None,
    deployments: dict[str, dict[str, Any]] | None = None,
    breaker: dict[str, Any] | None = None,
) -> RoutingPolicy:
    """The example policy on the emulators, `search-answer` routed to one model chain."""
    document = example_policy_document(emulators.bedrock_url, emulators.vertex_url)
    search = document["features"]["search-answer"]
    search["routes"] = [{"weight": 1, "models": models}]
    search.update(feature or {})
    for name, changes in (deployments or {}).items():
        document["deployments"][name].update(changes)
    document["breaker"].update(breaker or {})
    return parse_policy(document)


RouterFactory = Callable[..., Router]


@pytest.fixture
def make_router(
    emulators: RunningEmulators, providers: dict[str, Provider], events: EventBuffer, clock: ManualClock
) -> RouterFactory:
    def build(models: list[str] | None = None, **policy_options: Any) -> Router:
        policy = make_policy(emulators, models or GEMINI_FIRST, **policy_options)
        return Router(policy, providers, clock=clock, event_sink=events)

    return build


def ask(text: str = "What is a gang?", *, feature: str = "search-answer", **options: Any) -> InferRequest:
    """A one-message request."""
    return InferRequest(feature, (Message("user", text),), **options)
