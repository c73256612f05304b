"""Router events (spillover, failover, breaker transitions, completions) and the non-blocking sink they go to.

The router only appends to a buffer; a service drains it and group-commits to the audit log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from libs.core.routing import BreakerState, BreakerTransition
from libs.events.catalogue import EventType


@dataclass(frozen=True, slots=True)
class RouterEvent:
    """One fact for the audit log; `correlation_id` is the request id, or the deployment for breaker events."""

    type: EventType
    correlation_id: str
    occurred_at: float
    payload: dict[str, Any]


EventSink = Callable[[RouterEvent], None]

BREAKER_EVENT_TYPES = {
    BreakerState.OPEN: EventType.ROUTER_BREAKER_OPENED,
    BreakerState.HALF_OPEN: EventType.ROUTER_BREAKER_HALF_OPENED,
    BreakerState.CLOSED: EventType.ROUTER_BREAKER_CLOSED,
}


def breaker_event(transition: BreakerTransition, occurred_at: float) -> RouterEvent:
    """The `router.breaker.*` event of a transition."""
    return RouterEvent(
        type=BREAKER_EVENT_TYPES[transition.to_state],
        correlation_id=transition.deployment,
        occurred_at=occurred_at,
        payload={
            "deployment": transition.deployment,
            "from_state": transition.from_state.value,
            "to_state": transition.to_state.value,
            "reason": transition.reason.value,
            "window_requests": transition.window_requests,
            "window_error_rate": round(transition.window_error_rate, 4),
            "open_for_s": transition.open_for_s,
        },
    )


class EventBuffer:
    """A bounded in-memory sink: `__call__` appends in O(1) and never blocks; `drain()` hands the batch over.

    When full, the oldest events are dropped and counted, so a stalled consumer cannot stall routing.
    `on_nonempty`, if set, is called when an event lands in an empty buffer: a consumer waits for it instead
    of polling an idle buffer.
    """

    def __init__(self, max_events: int = 100_000) -> None:
        self._events: deque[RouterEvent] = deque()
        self._max = max_events
        self.dropped = 0
        self.on_nonempty: Callable[[], None] | None = None

    def __call__(self, event: RouterEvent) -> None:
        if not self._events and self.on_nonempty is not None:
            self.on_nonempty()
        if len(self._events) >= self._max:
            self._events.popleft()
            self.dropped += 1
        self._events.append(event)

    def __len__(self) -> int:
        return len(self._events)

    def drain(self, limit: int | None = None) -> list[RouterEvent]:
        """Remove and return up to `limit` events, oldest first."""
        count = len(self._events) if limit is None else min(limit, len(self._events))
        return [self._events.popleft() for _ in range(count)]

    def of_type(self, event_type: EventType) -> list[RouterEvent]:
        """The buffered events of one type, without removing them."""
        return [event for event in self._events if event.type is event_type]
