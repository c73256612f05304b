"""A term's task ends when its leadership ends, even if one cancellation was swallowed on the way."""

import asyncio

from libs.runtime.leased_service import _cancelled


async def test_a_task_that_swallows_a_cancellation_is_cancelled_again_until_it_ends() -> None:
    swallowed = 0

    async def term() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1  # as asyncio.wait_for on 3.11 may, when its awaited event fires at once

    task = asyncio.create_task(term())
    await asyncio.sleep(0)
    await asyncio.wait_for(_cancelled(task), timeout=30)

    assert task.cancelled()
    assert swallowed == 1
