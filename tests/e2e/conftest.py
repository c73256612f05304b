"""Every test here ends with no task left running: a task that ignores its cancellation after the services
stopped is logged and let go of (as a service's process does), instead of holding the event loop's close
for ever."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from libs.runtime.shutdown import let_go_of_stragglers


@pytest.fixture(autouse=True)
async def _no_task_outlives_the_test() -> AsyncIterator[None]:
    yield
    await let_go_of_stragglers(service="test")
