"""The scheduler service: kube-scheduler with gang and topology-aware placement, one active replica.

Wiring only. While this replica holds the fenced lease it maps consumed events onto the inputs of the
core's `SchedulerStateMachine`, runs its passes, and writes each pass's outputs in one fenced transaction;
a standby only retries the lease. No scheduling rule lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from libs.core.scheduling import MachineSettings, SchedulerStateMachine
from libs.core.scheduling.outputs import CycleRan, Output
from libs.db.engine import create_engine, create_session_factory
from libs.db.errors import StaleEpochError
from libs.db.records import Fence, OutboxMessage
from libs.db.uow import unit_of_work_factory
from libs.events.envelope import Envelope, EventPayload
from libs.messaging.broker import jetstream, make_broker, start_broker
from libs.messaging.consumer import EventConsumer
from libs.messaging.relay import OutboxRelay
from libs.messaging.streams import ensure_streams
from libs.runtime.health import beat, health_file
from libs.runtime.leadership import LeaseThread
from libs.runtime.memory import freeze_long_lived
from libs.runtime.settings import PodwaySettings
from libs.runtime.shutdown import bounded, cancel_tasks
from services.scheduler.handlers import SUBJECTS, machine_input
from services.scheduler.memory_inbox import MemoryInbox, MemoryUnitOfWork
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.store import load_world, write_outputs

log = logging.getLogger(__name__)

SERVICE = "scheduler"

LEASE_NAME = "scheduler"
CONSUMER_NAME = "scheduler"
CONSUMER_BATCH = 64
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class _Reload(Exception):
    """A pass could not be written: its assumptions are lost, so the world is read again."""


@dataclass(eq=False)
class _Term:
    """One leadership term: its fence, its consumer, its world and its scheduling loop."""

    fence: Fence
    inbox: MemoryInbox = field(default_factory=MemoryInbox)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    buffer: list[tuple[Envelope, EventPayload]] = field(default_factory=list)
    scheduler: SchedulerStateMachine | None = None
    task: asyncio.Task[None] | None = None
    broker: Any = None
    consumer: EventConsumer | None = None


class SchedulerService:
    """`start()` / `stop()`; `clock` times leases, the queue and every written timestamp."""

    def __init__(
        self,
        settings: PodwaySettings,
        *,
        clock: Clock = utc_now,
        holder: str | None = None,
        tick_s: float = 0.05,
        machine_settings: MachineSettings | None = None,
    ) -> None:
        if not settings.nats_url:
            raise ValueError("the scheduler needs PODWAY_NATS_URL")
        self.settings = settings
        self.clock = clock
        self.tick_s = tick_s
        self.machine_settings = machine_settings or MachineSettings(
            claims_timeout_s=settings.claims_timeout_seconds
        )
        self.engine = create_engine(settings.resolved_database_url())
        self.sessions = create_session_factory(self.engine)
        self.broker = make_broker(settings.nats_url, f"scheduler-{settings.instance}")
        self.relay: OutboxRelay | None = None
        self.plain_uow = unit_of_work_factory(self.sessions, clock=clock)
        self.uow = unit_of_work_factory(
            self.sessions, clock=clock, fence=self._current_fence, after_commit=self._kick_relay
        )
        self.metrics = SchedulerMetrics()
        self.metrics_port: int | None = None
        self.holder = (
            holder or f"{socket.gethostname()}:{os.getpid()}:{settings.instance}:{uuid.uuid4().hex[:6]}"
        )
        self.elector = LeaseThread(
            settings.resolved_database_url(),
            name=LEASE_NAME,
            holder=self.holder,
            ttl=timedelta(seconds=settings.lease_seconds),
            clock=clock,
            on_elected=self._elected,
            on_deposed=self._deposed,
        )
        self._term: _Term | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- life cycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.broker.connect()
        js = jetstream(self.broker)
        await ensure_streams(js)
        self.relay = OutboxRelay(self.plain_uow, js, clock=self.clock)
        await self.broker.start()
        if self.settings.metrics_port >= 0:
            self.metrics_port = self.metrics.serve(self.settings.metrics_port)
        self._tasks = [asyncio.create_task(self.relay.run(), name="outbox-relay")]
        await self.elector.start()
        if self.settings.data_dir:
            self._tasks.append(asyncio.create_task(self._beat(), name="health"))
        log.info("scheduler started", extra={"holder": self.holder, "metrics_port": self.metrics_port})

    async def stop(self, *, release_lease: bool = True) -> None:
        """Stop; with `release_lease=False` the lease is left to lapse, as when the process dies."""
        await bounded(self.elector.stop(release=release_lease), "stopping the election", service=SERVICE)
        await cancel_tasks(self._tasks, service=SERVICE)
        await bounded(self._deposed(), "ending the term", service=SERVICE)
        await bounded(self.broker.stop(), "stopping the broker", service=SERVICE)
        await bounded(self.engine.dispose(), "closing the database pool", service=SERVICE)
        self.metrics.close()

    @property
    def leading(self) -> bool:
        return self._term is not None

    @property
    def world(self) -> SchedulerStateMachine | None:
        """The current term's world (for tests and diagnostics)."""
        return self._term.scheduler if self._term is not None else None

    def wake(self) -> None:
        """Run a pass now (e.g. after a test moved the clock)."""
        if self._term is not None:
            self._term.wake.set()

    def _current_fence(self) -> Fence | None:
        return self._term.fence if self._term is not None else None

    def _kick_relay(self, committed: Sequence[OutboxMessage]) -> None:
        if self.relay is not None:
            self.relay.kick(committed)

    def _seconds(self) -> float:
        return self.clock().timestamp()

    async def _beat(self) -> None:
        path = health_file(Path(self.settings.run_dir), "scheduler")
        while True:
            detail: dict[str, object] = {"metrics_port": self.metrics_port, "leader": self.leading}
            if self._term is not None:
                detail["epoch"] = self._term.fence.epoch
            beat(path, detail=detail)
            await asyncio.sleep(1.0)

    # -- leadership -------------------------------------------------------------------------------------

    async def _elected(self, fence: Fence) -> None:
        term = _Term(fence)
        self._term = term
        self.metrics.leader.set(1)
        term.task = asyncio.create_task(self._lead(term), name=f"scheduler-term-{fence.epoch}")

    async def _deposed(self) -> None:
        term, self._term = self._term, None
        if term is None:
            return
        log.info("scheduler term %d stopping", term.fence.epoch)
        self.metrics.leader.set(0)
        if term.task is not None and term.task is not asyncio.current_task():
            term.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await term.task
        await self._stop_consumer(term)

    async def _lead(self, term: _Term) -> None:
        try:
            await self._start_consumer(term)
            while True:
                await self._load(term)
                try:
                    await self._schedule_forever(term)
                except _Reload:
                    continue
        except StaleEpochError:
            log.warning("scheduler epoch %d is stale: another replica leads; stopping", term.fence.epoch)
            self.elector.forget()
            await self._deposed()
        except Exception:
            log.exception("scheduler term %d failed; starting a new one", term.fence.epoch)
            self.elector.forget()
            await self._deposed()

    async def _start_consumer(self, term: _Term) -> None:
        """Listen before loading, so nothing published while the world is read is missed."""
        assert self.settings.nats_url is not None
        broker = make_broker(self.settings.nats_url, f"scheduler-{self.settings.instance}-events")
        consumer = EventConsumer(
            name=CONSUMER_NAME,
            subjects=SUBJECTS,
            handler=lambda envelope, payload, _uow: self._on_event(term, envelope, payload),
            uow_factory=lambda: MemoryUnitOfWork(term.inbox),
            ack_wait_s=max(5.0, self.settings.lease_seconds),
            batch_size=CONSUMER_BATCH,
            fetch_timeout_s=0.5,
        )
        consumer.subscribe(broker)
        term.broker, term.consumer = broker, consumer
        await start_broker(broker, [consumer])

    async def _stop_consumer(self, term: _Term) -> None:
        broker, consumer = term.broker, term.consumer
        term.broker = term.consumer = None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()
        if broker is not None:
            with contextlib.suppress(Exception):
                await broker.stop()

    async def _on_event(self, term: _Term, envelope: Envelope, payload: EventPayload) -> None:
        if self._term is not term:
            raise RuntimeError("no longer the leader; leave the event to the one that is")
        if term.scheduler is None:
            term.buffer.append((envelope, payload))
            return
        self._apply(term.scheduler, envelope, payload)
        term.wake.set()
        # A batch is handled in one go; let a pass's write proceed between its events.
        await asyncio.sleep(0)

    async def _load(self, term: _Term) -> None:
        term.scheduler = None
        started = time.perf_counter()
        async with self.plain_uow() as uow:
            world = await load_world(uow, self.clock())
        scheduler = SchedulerStateMachine(self.machine_settings, timer=time.perf_counter)
        # In a thread, so that lease renewals keep their pace while a large world is built.
        await asyncio.to_thread(scheduler.load, world, now=self._seconds())
        for envelope, payload in term.buffer:
            self._apply(scheduler, envelope, payload)
        term.buffer.clear()
        term.scheduler = scheduler
        freeze_long_lived()
        log.info(
            "scheduler world loaded",
            extra={
                "epoch": term.fence.epoch,
                "nodes": len(scheduler.snapshot),
                "pods": len(scheduler.book.pods),
                "load_ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )

    # -- scheduling -------------------------------------------------------------------------------------

    async def _schedule_forever(self, term: _Term) -> None:
        scheduler = term.scheduler
        assert scheduler is not None
        while True:
            now = self._seconds()
            outcomes = scheduler.run_pass(now)
            self.metrics.queue_depth.set(len(scheduler.queue))
            if outcomes:
                await self._write(term, outcomes)
                continue
            term.wake.clear()
            timeout = self.tick_s
            wakeup = scheduler.next_wakeup()
            if wakeup is not None:
                timeout = max(0.0, min(timeout, wakeup - now))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(term.wake.wait(), timeout)

    def _apply(self, machine: SchedulerStateMachine, envelope: Envelope, payload: EventPayload) -> None:
        event = machine_input(envelope, payload)
        if event is not None:
            machine.handle(event, now=self._seconds())

    async def _write(self, term: _Term, outcomes: list[Output]) -> None:
        """One fenced transaction per pass, which also renews the lease: a write holds the lease row until
        it commits, so a renewal of its own would only wait for it."""
        sent = time.monotonic()
        try:
            async with self.uow() as uow:
                now = self.clock()
                bound = await write_outputs(uow, outcomes, fence=term.fence, now=now)
                # Lapsed or taken, the term is over: taking the lease afresh would start a new epoch.
                lease = await uow.leases.renew(term.fence, self.holder, now, self.elector.ttl)
                if lease is None:
                    raise StaleEpochError(f"lease {LEASE_NAME} is no longer held at epoch {term.fence.epoch}")
                await uow.commit()
        except StaleEpochError:
            raise
        except Exception as exc:
            log.exception("writing %d scheduling outcomes failed; reloading the world", len(outcomes))
            raise _Reload() from exc
        self.elector.renewed(lease, sent)
        self.metrics.pods_bound.inc(bound)
        took = time.monotonic() - sent
        if took > self.elector.renew_every_s:
            log.warning(
                "a scheduling write took %.0f ms (%d outcomes, %d pods bound): renewals wait for it",
                took * 1000, len(outcomes), bound,
            )  # fmt: skip
        for outcome in outcomes:
            if isinstance(outcome, CycleRan):
                result = "placed" if outcome.decision.placed else "unschedulable"
                self.metrics.cycle_seconds.labels(result).observe(outcome.cycle_ms / 1000)
