"""The router's event sink: O(1) appends that never block, bounded, drained in batches."""

from __future__ import annotations

from libs.events.catalogue import EventType
from libs.router import EventBuffer, RouterEvent


def make_event(n: int) -> RouterEvent:
    return RouterEvent(EventType.ROUTER_FAILOVER, f"req-{n}", 0.0, {"n": n})


def test_buffer_drains_in_order_and_in_batches() -> None:
    buffer = EventBuffer()
    for n in range(5):
        buffer(make_event(n))
    assert [e.payload["n"] for e in buffer.drain(3)] == [0, 1, 2]
    assert [e.payload["n"] for e in buffer.drain()] == [3, 4]
    assert len(buffer) == 0


def test_full_buffer_drops_the_oldest_and_counts_them() -> None:
    buffer = EventBuffer(max_events=2)
    for n in range(5):
        buffer(make_event(n))
    assert buffer.dropped == 3
    assert [e.payload["n"] for e in buffer.drain()] == [3, 4]


def test_a_consumer_hears_when_an_event_lands_in_an_empty_buffer_only() -> None:
    buffer = EventBuffer()
    heard: list[int] = []
    buffer.on_nonempty = lambda: heard.append(len(buffer))
    buffer(make_event(0))
    buffer(make_event(1))
    assert heard == [0]
    buffer.drain()
    buffer(make_event(2))
    assert heard == [0, 0]
