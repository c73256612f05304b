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
