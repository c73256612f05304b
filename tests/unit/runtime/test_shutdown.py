"""Stopping in bounded time: a hanging step is cancelled and left behind, the stop goes on."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from libs.runtime.shutdown import bounded, cancel_tasks, let_go_of_stragglers


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


async def test_a_task_that_ignores_its_cancellation_is_let_go_of_so_the_loop_can_close() -> None:
    async def stubborn() -> None:
        while True:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()

    async def polite() -> None:
        await asyncio.Event().wait()

    stuck = asyncio.create_task(stubborn(), name="stubborn")
    gentle = asyncio.create_task(polite(), name="polite")
    await asyncio.sleep(0)  # both are waiting

    let_go = await let_go_of_stragglers(service="test", timeout_s=0)

    assert let_go == ["stubborn"]
    assert gentle.cancelled()
    assert stuck not in asyncio.all_tasks()  # the loop's close will not wait on it
    assert not stuck.done()
