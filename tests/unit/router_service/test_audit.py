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
    now = [10.0]
    buffer = EventBuffer()
    flusher = AuditFlusher(
        buffer, FlakyDatabase(), interval_s=0.05, linger_s=1.0, batch_events=3, clock=lambda: now[0]
    )
    buffer(completed("req-1"))
    assert flusher.due_in(10.0) == pytest.approx(1.0)
    assert flusher.due_in(10.6) == pytest.approx(0.4)
    assert flusher.due_in(11.0) <= 0
    buffer(completed("req-2"))
    buffer(completed("req-3"))
    assert flusher.due_in(10.0) <= 0, "a full batch does not linger"


def test_by_default_an_event_waits_at_most_50_ms_for_its_commit():
    now = [10.0]
    buffer = EventBuffer()
    flusher = AuditFlusher(buffer, FlakyDatabase(), clock=lambda: now[0])
    buffer(completed("req-1"))
    now[0] = 10.03
    buffer(completed("req-2"))
    assert flusher.due_in(10.03) == pytest.approx(0.02), "the oldest event sets the time"
    assert flusher.due_in(10.05) <= 0


class SimulatedTime:
    """A clock and a sleep for the flusher; the test moves the time on and wakes the sleepers."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.now + seconds, woken))
        await woken

    async def advance_to(self, moment: float) -> None:
        self.now = moment
        for wake_at, woken in list(self._sleepers):
            if wake_at <= moment:
                self._sleepers.remove((wake_at, woken))
                woken.set_result(None)
        for _ in range(20):  # let the flusher run until it sleeps again
            await asyncio.sleep(0)


class SlowCommitLog:
    """A unit-of-work factory whose commits take `commit_s` of simulated time; what they made durable."""

    def __init__(self, time: SimulatedTime, commit_s: float) -> None:
        self.time = time
        self.commit_s = commit_s
        self.durable: list[str] = []
        self._emitted: list[str] = []

    def __call__(self) -> SlowCommitLog:
        return self

    async def __aenter__(self) -> SlowCommitLog:
        self._emitted = []
        return self

    async def __aexit__(self, *_: object) -> None:
        self._emitted = []

    def emit(self, envelope) -> None:
        self._emitted.append(envelope.correlation_id)

    async def commit(self) -> None:
        await self.time.sleep(self.commit_s)
        self.durable += self._emitted


@pytest.mark.parametrize("kill_at", [0.4213, 0.9, 1.4999, 2.0507])
async def test_a_writer_killed_at_any_moment_loses_only_what_was_buffered_in_its_last_50_ms(kill_at: float):
    """Traffic thin (an answer every 30 ms) then busy (every 1 ms); the writer is cancelled at `kill_at`, as a
    process killed outright: every answer buffered earlier than one linger and one commit before is durable."""
    time = SimulatedTime()
    log = SlowCommitLog(time, commit_s=0.004)
    buffer = EventBuffer()
    flusher = AuditFlusher(buffer, log, clock=time, sleep=time.sleep)
    writer = asyncio.create_task(flusher.run())
    buffered_at: dict[str, float] = {}
    moment, step = 0.0, 0.001
    while moment < kill_at:
        tick = round(moment / step)
        if tick % 30 == 0 or moment > 1.0:
            request_id = f"req-{tick}"
            buffer(completed(request_id))
            buffered_at[request_id] = moment
        moment += step
        await time.advance_to(moment)
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    lost = {rid: at for rid, at in buffered_at.items() if rid not in set(log.durable)}
    assert len(log.durable) > len(buffered_at) / 2
    oldest_lost = min(lost.values(), default=kill_at)
    assert kill_at - oldest_lost <= flusher.linger_s + log.commit_s + step, sorted(lost.values())[:5]


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
