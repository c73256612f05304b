"""The audit trail: the sink never blocks the router, async requests capture their own story, the flusher
group-commits and never loses a batch to a failed commit."""

from __future__ import annotations

import asyncio

import pytest

from libs.core.routing import BreakerState, BreakerTransition, TripReason
from libs.db.testing import in_memory_unit_of_work_factory
from libs.events.catalogue import EventType
from libs.router import EventBuffer, RouterEvent
from libs.router.events import breaker_event
from services.llm_router.audit import AuditFlusher, AuditSink, CausalChain, to_envelope

T = 1_800_000_000.0


def completed(request_id: str) -> RouterEvent:
    payload = {
        "request_id": request_id,
        "feature": "search-answer",
        "route_index": 0,
        "model": "gemini-flash",
        "deployment": "gemini-flash-pt",
        "provider": "vertex",
        "requested_tier": "provisioned",
        "served_tier": "provisioned",
        "input_tokens": 4,
        "output_tokens": 8,
        "latency_ms": 3.2,
        "first_byte_ms": 3.1,
        "added_ms": 0.4,
        "cost": 0.0,
        "attempts": 1,
        "stream": False,
    }
    return RouterEvent(EventType.INFERENCE_COMPLETED, request_id, T, payload)


def failover(request_id: str) -> RouterEvent:
    payload = {
        "request_id": request_id,
        "feature": "search-answer",
        "from_deployment": "claude-haiku-pt",
        "to_deployment": "claude-haiku-od",
        "reason": "unavailable",
        "breaker_state": "closed",
        "code": "ServiceUnavailableException",
        "status": 503,
        "elapsed_ms": 1.5,
        "dispatch_ms": 0.05,
    }
    return RouterEvent(EventType.ROUTER_FAILOVER, request_id, T, payload)


def opened(deployment: str) -> RouterEvent:
    transition = BreakerTransition(
        deployment, BreakerState.CLOSED, BreakerState.OPEN, TripReason.CONSECUTIVE_FAILURES, 0.0, 5, 1.0, 5.0
    )
    return breaker_event(transition, T)


def test_events_of_a_captured_request_bypass_the_buffer():
    buffer, seen = EventBuffer(), []
    sink = AuditSink(buffer, observe=seen.append)
    with sink.capture("req-async") as captured:
        sink(failover("req-async"))
        sink(completed("req-sync"))
        sink(opened("claude-haiku-pt"))
    sink(completed("req-async"))
    assert [e.type for e in captured] == [EventType.ROUTER_FAILOVER]
    assert [e.correlation_id for e in buffer.drain()] == ["req-sync", "claude-haiku-pt", "req-async"]
    assert len(seen) == 4, "every event is observed (metrics), captured or not"


def test_one_request_cannot_be_captured_twice_at_once():
    sink = AuditSink(EventBuffer())
    with (
        sink.capture("req-1"),
        pytest.raises(RuntimeError, match="already being handled"),
        sink.capture("req-1"),
    ):
        pass


def test_each_event_names_the_previous_event_of_its_story_as_its_cause():
    chain = CausalChain()
    chain.start("req-1", "work-item-1")
    first, second = chain.envelopes([failover("req-1"), completed("req-1")])
    assert first.causation_id == "work-item-1"
    assert second.causation_id == str(first.event_id)
    [after] = chain.envelopes([failover("req-1")])
    assert after.causation_id is None, "a story ends with its outcome"


def test_router_events_become_envelopes_about_their_aggregate():
    breaker = to_envelope(opened("claude-haiku-pt"))
    assert (breaker.type, breaker.correlation_id, breaker.producer) == (
        "router.breaker.opened",
        "claude-haiku-pt",
        "llm_router",
    )
    assert breaker.subject is not None
    assert (breaker.subject.kind, breaker.subject.name) == ("Deployment", "claude-haiku-pt")
    assert breaker.occurred_at.timestamp() == T


async def test_the_flusher_writes_everything_buffered_in_one_transaction():
    buffer = EventBuffer()
    for request_id in ("req-1", "req-2"):
        buffer(failover(request_id))
        buffer(completed(request_id))
    async with in_memory_unit_of_work_factory() as uow_factory:
        flusher = AuditFlusher(buffer, uow_factory)
        assert await flusher.flush() == 4
        assert await flusher.flush() == 0
        async with uow_factory() as uow:
            story = await uow.events.by_correlation("req-2")
    assert [e.envelope.type for e in story] == ["router.failover", "inference.completed"]
    assert story[1].envelope.causation_id == str(story[0].envelope.event_id)


class FlakyDatabase:
    """A unit-of-work factory whose database is unreachable while `down`."""

    def __init__(self, real=None) -> None:
        self.real = real
        self.down = True

    def __call__(self):
        if self.down:
            return self
        return self.real()

    async def __aenter__(self):
        raise ConnectionError("database unreachable")

    async def __aexit__(self, *_: object) -> None:
        return None


async def test_a_failed_commit_keeps_its_events_for_the_next_flush():
    buffer = EventBuffer()
    buffer(completed("req-1"))
    async with in_memory_unit_of_work_factory() as uow_factory:
        database = FlakyDatabase(uow_factory)
        flusher = AuditFlusher(buffer, database)
        with pytest.raises(ConnectionError):
            await flusher.flush()
        buffer(completed("req-2"))
        database.down = False
        assert await flusher.flush() == 2
        async with uow_factory() as uow:
            assert len(await uow.events.by_type("inference.completed")) == 2


async def test_an_unbounded_backlog_drops_the_oldest_events_and_counts_them():
    buffer = EventBuffer()
    flusher = AuditFlusher(buffer, FlakyDatabase(), max_pending=2)
    for request_id in ("req-1", "req-2", "req-3"):
        buffer(completed(request_id))
    with pytest.raises(ConnectionError):
        await flusher.flush()
    assert flusher.dropped == 1


class CountingDatabase:
    """Counts the units of work opened on a real in-memory log."""

    def __init__(self, real) -> None:
        self.real = real
        self.opened = 0

    def __call__(self):
        self.opened += 1
        return self.real()


def test_a_few_events_linger_and_a_full_batch_is_due_once_the_spacing_allows():
    buffer = EventBuffer()
    flusher = AuditFlusher(buffer, FlakyDatabase(), interval_s=0.05, linger_s=1.0, batch_events=3)
    buffer(completed("req-1"))
    assert flusher.due_in(10.0, first_at=10.0, flushed_at=9.0) == pytest.approx(1.0)
    assert flusher.due_in(10.6, first_at=10.0, flushed_at=9.0) == pytest.approx(0.4)
    assert flusher.due_in(11.0, first_at=10.0, flushed_at=9.0) <= 0
    buffer(completed("req-2"))
    buffer(completed("req-3"))
    assert flusher.due_in(10.0, first_at=10.0, flushed_at=9.0) <= 0, "a full batch does not linger"
    assert flusher.due_in(10.0, first_at=10.0, flushed_at=9.98) == pytest.approx(0.03), (
        "but keeps the spacing"
    )


async def test_an_idle_flusher_opens_no_unit_of_work_and_closing_writes_what_lingers():
    buffer = EventBuffer()
    async with in_memory_unit_of_work_factory() as uow_factory:
        database = CountingDatabase(uow_factory)
        flusher = AuditFlusher(buffer, database, linger_s=3600.0, batch_events=100)
        running = asyncio.create_task(flusher.run())
        for _ in range(20):
            await asyncio.sleep(0)
        assert database.opened == 0
        buffer(completed("req-1"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert database.opened == 0, "one event lingers for its batch"
        flusher.close()
        await asyncio.wait_for(running, 10)
        assert flusher.written == 1


async def test_a_full_batch_is_written_without_waiting_for_the_linger():
    buffer = EventBuffer()
    async with in_memory_unit_of_work_factory() as uow_factory:
        written = asyncio.Event()
        flusher = AuditFlusher(
            buffer,
            uow_factory,
            interval_s=0.001,
            linger_s=3600.0,
            batch_events=2,
            on_flush=lambda events, seconds: written.set(),
        )
        running = asyncio.create_task(flusher.run())
        buffer(completed("req-1"))
        buffer(completed("req-2"))
        await asyncio.wait_for(written.wait(), 10)
        assert flusher.written == 2
        flusher.close()
        await asyncio.wait_for(running, 10)
