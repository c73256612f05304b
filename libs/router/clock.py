"""Time for routing decisions, injected so that tests and the simulator drive breakers without sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class RouterClock(Protocol):
    """`now()` is monotonic seconds for decisions; `wall()` is Unix seconds for event timestamps."""

    def now(self) -> float: ...

    def wall(self) -> float: ...


class SystemClock:
    """The real clocks."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 0.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self._now += seconds
