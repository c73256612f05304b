"""Stopping a service in bounded time.

A service's stop runs several steps (cancel loops, drain the broker, close pools). Any of them can hang on
a peer that stopped answering; a supervisor or a test waiting on `stop()` must not hang with it. Each step
gets a deadline: past it, the step is cancelled, logged and left behind, and the stop goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import Any

log = logging.getLogger(__name__)

STOP_STEP_TIMEOUT_S = 10.0


async def bounded(
    step: Awaitable[Any], what: str, *, service: str, timeout_s: float = STOP_STEP_TIMEOUT_S
) -> bool:
    """Await `step` for at most `timeout_s`; True when it finished (well or with a logged error).

    `asyncio.wait` rather than `wait_for`: the latter waits for the cancelled step to unwind, which a step
    stuck on a dead peer may never do."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        task.cancel()
        log.warning("%s stop: %s took longer than %.0f s; going on", service, what, timeout_s)
        return False
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("%s stop: %s failed; going on", service, what, exc_info=error)
    return True


async def cancel_tasks(
    tasks: Iterable[asyncio.Task[Any]], *, service: str, timeout_s: float = STOP_STEP_TIMEOUT_S
) -> None:
    """Cancel `tasks` and give them `timeout_s` in all to unwind."""
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return
    _, stuck = await asyncio.wait(pending, timeout=timeout_s)
    for task in stuck:
        log.warning(
            "%s stop: task %s did not unwind in %.0f s; left behind", service, task.get_name(), timeout_s
        )


async def let_go_of_stragglers(*, service: str, timeout_s: float = STOP_STEP_TIMEOUT_S) -> list[str]:
    """After a stop: every task still running (left behind by a step that timed out, or a library's) is
    cancelled and given `timeout_s`; one that still runs (a library that swallows its cancellation) is logged
    with where it waits and let go of, so that the loop closes. `asyncio.run` otherwise cancels it again and
    waits for it for ever, and the process never exits. Returns the names of the tasks let go of."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return []
    await asyncio.sleep(0)  # the cancellations land: a task that honours it is done now
    pending = [task for task in pending if not task.done()]
    stuck: set[asyncio.Task[Any]] = set()
    if pending:
        _, stuck = await asyncio.wait(pending, timeout=timeout_s)
    for task in stuck:
        frames = task.get_stack(limit=3)
        where = " <- ".join(f"{f.f_code.co_filename}:{f.f_lineno}" for f in frames) or "unknown"
        log.warning(
            "%s stop: task %s ignores its cancellation (at %s); let go", service, task.get_name(), where
        )
        # The one way to keep the loop's close from waiting on it: it is no longer one of the loop's tasks.
        asyncio.tasks._unregister_task(task)
    return sorted(task.get_name() for task in stuck)
