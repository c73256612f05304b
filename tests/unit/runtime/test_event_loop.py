"""Services run on the event loop their settings name: the router on uvloop by default, the others on
asyncio's."""

from __future__ import annotations

import asyncio

import uvloop

from libs.runtime.service import run_on
from services.llm_router.settings import RouterSettings


async def loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_run_on_uvloop_runs_the_coroutine_on_a_uvloop_loop():
    assert run_on("uvloop", loop_type()) is uvloop.Loop


def test_run_on_asyncio_runs_the_coroutine_on_asyncios_loop():
    kind = run_on("asyncio", loop_type())
    assert issubclass(kind, asyncio.BaseEventLoop)
    assert kind is not uvloop.Loop


def test_the_router_runs_on_uvloop_unless_told_otherwise(monkeypatch):
    assert RouterSettings().router_event_loop == "uvloop"
    monkeypatch.setenv("PODWAY_ROUTER_EVENT_LOOP", "asyncio")
    assert RouterSettings().router_event_loop == "asyncio"
