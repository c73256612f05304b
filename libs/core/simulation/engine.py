"""A discrete-event engine on a virtual clock: events at times, taken in time order, ties in the order they
were scheduled, so that a run is the same for the same inputs."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Event = TypeVar("Event")


@dataclass
class EventQueue(Generic[Event]):
    """Events by virtual time; `now` is the time of the last event taken."""

    now: float = 0.0
    _heap: list[tuple[float, int, Event]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)

    def at(self, time: float, event: Event) -> None:
        """Schedule an event (never before `now`: the past cannot change)."""
        heapq.heappush(self._heap, (max(time, self.now), next(self._order), event))

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def take_due(self) -> tuple[float, list[Event]]:
        """Every event at the earliest time, in scheduling order; the clock moves to that time."""
        time = self._heap[0][0]
        due = []
        while self._heap and self._heap[0][0] == time:
            due.append(heapq.heappop(self._heap)[2])
        self.now = time
        return time, due

    def __len__(self) -> int:
        return len(self._heap)
