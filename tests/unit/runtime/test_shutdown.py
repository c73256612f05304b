"""Stopping in bounded time: a hanging step is cancelled and left behind, the stop goes on."""

from __future__ import annotations

import asyncio
import logging

import pytest

from libs.runtime.shutdown import bounded, cancel_tasks


async def test_a_step_that_never_finishes_is_cancelled_and_reported() -> None:
    hung: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    finished = await bounded(hung, "waiting on a dead peer", service="svc", timeout_s=0)

    assert finished is False
    await asyncio.sleep(0)  # let the cancellation land
    assert hung.cancelled()


async def test_a_step_that_finishes_is_awaited_to_its_end() -> None:
    done: list[str] = []

    async def step() -> None:
        await asyncio.sleep(0)
        done.append("closed")

    assert await bounded(step(), "closing", service="svc") is True
    assert done == ["closed"]


async def test_a_failing_step_is_logged_and_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    async def step() -> None:
        raise ConnectionError("peer gone")

    with caplog.at_level(logging.ERROR, logger="libs.runtime.shutdown"):
        assert await bounded(step(), "closing the pool", service="svc") is True

    assert "svc stop: closing the pool failed" in caplog.text


async def test_tasks_that_ignore_cancellation_are_left_behind(caplog: pytest.LogCaptureFixture) -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    async def polite() -> None:
        await asyncio.Event().wait()

    tasks = [asyncio.create_task(stubborn(), name="stubborn"), asyncio.create_task(polite(), name="polite")]
    await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING, logger="libs.runtime.shutdown"):
        await cancel_tasks(tasks, service="svc", timeout_s=0)
        await asyncio.sleep(0)

    assert tasks[1].cancelled()
    assert not tasks[0].done()
    assert "task stubborn did not unwind" in caplog.text
    release.set()
    await tasks[0]
