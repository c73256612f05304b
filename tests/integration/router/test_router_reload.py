"""Hot reload: an atomic swap that keeps in-flight requests and the state of unchanged deployments."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from libs.core.routing import PolicyError, parse_policy
from libs.emulators import RunningEmulators
from libs.events.catalogue import EventType
from libs.router import EventBuffer
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN, GEMINI_FLASH
from libs.router.policy_file import PolicyFileWatcher
from tests.integration.router.conftest import CLAUDE_FIRST, GEMINI_FIRST, RouterFactory, ask, make_policy


async def test_reload_swaps_routes_without_dropping_in_flight_requests(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    router = make_router(GEMINI_FIRST)
    emulators.vertex.set_latency(GEMINI_FLASH, ttft_ms=150)
    in_flight = asyncio.create_task(router.infer(ask()))
    await asyncio.sleep(0.02)
    router.reload(make_policy(emulators, CLAUDE_FIRST))
    after = await router.infer(ask())
    before = await in_flight
    assert before.deployment == "gemini-flash-pt"
    assert after.deployment == "claude-haiku-pt"
    [reloaded] = events.of_type(EventType.ROUTER_POLICY_RELOADED)
    assert reloaded.payload["kept_state"] == [
        "claude-haiku-od",
        "claude-haiku-pt",
        "gemini-flash-od",
        "gemini-flash-pt",
    ]


async def test_reload_keeps_breaker_state_only_for_unchanged_deployments(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = make_router(CLAUDE_FIRST)
    emulators.bedrock.inject_error(503, "ServiceUnavailableException", model=CLAUDE_HAIKU_PT_ARN, count=2)
    await router.infer(ask())
    await router.infer(ask())
    assert router.breakers()["claude-haiku-pt"].consecutive_failures == 2

    router.reload(make_policy(emulators, GEMINI_FIRST))
    assert router.breakers()["claude-haiku-pt"].consecutive_failures == 2

    resized = {"claude-haiku-pt": {"capacity": {"tokens_per_minute": 1000}}}
    router.reload(make_policy(emulators, GEMINI_FIRST, deployments=resized))
    assert router.breakers()["claude-haiku-pt"].consecutive_failures == 0
    assert router.capacity()["claude-haiku-pt"].tokens_per_minute == 1000


async def test_reload_refuses_a_policy_without_provider_adapters(
    make_router: RouterFactory, emulators: RunningEmulators
) -> None:
    router = make_router()
    policy = make_policy(emulators, GEMINI_FIRST)
    with pytest.raises(ValueError, match="no provider adapter"):
        router.reload(policy, providers={})
    assert router.policy is not policy


async def test_policy_file_changes_are_reloaded_and_bad_edits_are_refused(
    make_router: RouterFactory, emulators: RunningEmulators, tmp_path: Path
) -> None:
    router = make_router(GEMINI_FIRST)
    path = tmp_path / "policy.yaml"
    document = make_policy(emulators, CLAUDE_FIRST).model_dump(mode="json")
    path.write_text(yaml.safe_dump(document))
    errors: list[PolicyError] = []
    watcher = PolicyFileWatcher(router, path, on_error=errors.append)
    assert watcher.check() is False, "unchanged since the watcher started"

    document["features"]["search-answer"]["routes"][0]["weight"] = 0
    path.write_text(yaml.safe_dump(document))
    assert watcher.check() is False
    assert str(errors[0]) == f"{path}: features.search-answer.routes[0].weight: must be > 0"

    document["features"]["search-answer"]["routes"][0]["weight"] = 1
    path.write_text(yaml.safe_dump(document) + "\n")
    assert watcher.check() is True
    assert (await router.infer(ask())).deployment == "claude-haiku-pt"


async def test_a_changed_provider_without_a_new_client_is_reloaded_with_a_warning(
    make_router: RouterFactory, emulators: RunningEmulators, events: EventBuffer
) -> None:
    """The router itself opens no client: a provider edited under it still sends where it did, and says so."""
    router = make_router(GEMINI_FIRST)
    document = make_policy(emulators, GEMINI_FIRST).model_dump(mode="json")
    document["providers"]["vertex"]["api_endpoint"] = "http://127.0.0.1:9"
    router.reload(parse_policy(document))
    [reloaded] = events.of_type(EventType.ROUTER_POLICY_RELOADED)
    assert reloaded.payload["warnings"] == [
        f"providers.vertex: changed, but its client was not reopened: calls still go to {emulators.vertex_url}"
    ]
    assert reloaded.payload["reopened_providers"] == []
