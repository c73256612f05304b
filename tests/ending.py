"""The end of a test that starts services: no task outlives it (see libs.runtime.shutdown)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from libs.runtime.shutdown import let_go_of_stragglers


@pytest.fixture(autouse=True)
async def _no_task_outlives_the_test() -> AsyncIterator[None]:
    """A task that ignores its cancellation after the services stopped is logged and let go of (as a
    service's process does), instead of holding the event loop's close for ever."""
    yield
    await let_go_of_stragglers(service="test")
