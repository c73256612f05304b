"""The router service on a real nats-server and a real database, the real SDKs against the emulators."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from libs.client.client import PodwayClient
from libs.client.commands.router import RouterClient, user_call
from libs.db.engine import create_engine, create_session_factory
from libs.db.records import StoredEvent
from libs.db.uow import unit_of_work_factory
from libs.emulators import RunningEmulators, serve
from libs.events.inference import InferenceCall
from libs.providers import Chunk, Completion, Provider, ProviderRequest
from libs.router import ManualClock
from libs.router.example_policy import example_policy_document
from services.llm_router.app import RouterService
from services.llm_router.settings import RouterSettings
from tests.support import eventually

CLAUDE_FIRST = ["claude-haiku", "gemini-flash"]
GEMINI_FIRST = ["gemini-flash", "claude-haiku"]


@pytest.fixture
async def emulators() -> AsyncIterator[RunningEmulators]:
    running = await serve()
    yield running
    await running.close()


def policy_document(emulators: RunningEmulators, models: list[str], **feature: Any) -> dict[str, Any]:
    """The example policy on the emulators, `search-answer` routed to one model chain."""
    document = example_policy_document(emulators.bedrock_url, emulators.vertex_url)
    search = document["features"]["search-answer"]
    search["routes"] = [{"weight": 1, "models": models}]
    search.update(feature)
    return document


def write_policy(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@dataclass
class RouterStack:
    """A started router service, a client connection, and what the test needs to look at."""

    service: RouterService
    client: PodwayClient
    router: RouterClient
    emulators: RunningEmulators
    clock: ManualClock
    policy_path: Path
    database_url: str

    async def story(self, correlation_id: str) -> list[StoredEvent]:
        """The audit log of one request (or deployment), after a group commit."""
        await self.service.flush_audit()
        engine = create_engine(self.database_url)
        try:
            async with unit_of_work_factory(create_session_factory(engine))() as uow:
                return await uow.events.by_correlation(correlation_id)
        finally:
            await engine.dispose()

    async def eventual_story(
        self, correlation_id: str, done: Callable[[list[str]], bool]
    ) -> list[StoredEvent]:
        """The story once `done(types)` holds (async requests are written by the work consumer)."""
        return await eventually(
            lambda: self.story(correlation_id), lambda s: done([e.envelope.type for e in s])
        )


StackFactory = Callable[..., Any]


@pytest.fixture
async def make_stack(
    nats_url: str, database_url: str, emulators: RunningEmulators, tmp_path: Path
) -> AsyncIterator[StackFactory]:
    started: list[tuple[RouterService, PodwayClient]] = []

    async def build(
        models: list[str] | None = None,
        *,
        providers: dict[str, Provider] | None = None,
        feature: dict[str, Any] | None = None,
        document: dict[str, Any] | None = None,
        clock: ManualClock | None = None,
        **settings: Any,
    ) -> RouterStack:
        document = document or policy_document(emulators, models or GEMINI_FIRST, **(feature or {}))
        path = write_policy(tmp_path / "policy.yaml", document)
        # Decisions on a hand-moved clock whose wall starts now; replicas of one fleet may share one.
        clock = clock or ManualClock(wall_start=time.time())
        service = RouterService(
            RouterSettings(
                nats_url=nats_url,
                database_url=database_url,
                data_dir=tmp_path / "data",
                router_policy=path,
                metrics_port=-1,
                # Load shedding on the loop's lateness is specified in the unit tests; here a slow CI host must
                # not turn into refused requests.
                router_max_loop_lag_ms=0,
                **settings,
            ),
            clock=clock,
            providers=providers,
        )
        await service.start()
        client = PodwayClient(nats_url)
        await client.__aenter__()
        started.append((service, client))
        return RouterStack(
            service, client, RouterClient(client, timeout_s=10), emulators, clock, path, database_url
        )

    yield build
    for service, client in started:
        await client.__aexit__(None, None, None)
        await service.stop()


def ask(text: str = "What is a gang?", **options: Any) -> InferenceCall:
    call = user_call("search-answer", text, max_tokens=options.pop("max_tokens", 64))
    return call.model_copy(update=options)


class HeldProvider:
    """A real provider whose calls wait until the test lets them through."""

    def __init__(self, inner: Provider, release: asyncio.Event, arrivals: asyncio.Queue[str]) -> None:
        self.name = inner.name
        self._inner = inner
        self._release = release
        self._arrivals = arrivals

    async def complete(self, request: ProviderRequest) -> Completion:
        self._arrivals.put_nowait(request.model)
        await self._release.wait()
        return await self._inner.complete(request)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[Chunk]:
        self._arrivals.put_nowait(request.model)
        await self._release.wait()
        async with contextlib.aclosing(self._inner.stream(request)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
