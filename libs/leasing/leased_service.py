"""A service with one active replica on a fenced lease, around a core state machine.

While it holds the lease (`libs.leasing.leadership.LeaseThread`) the service consumes events into an
in-memory world (a state machine of `libs/core`), runs its passes, and writes each pass's outputs in one
fenced transaction that also renews the lease; a standby only retries the lease. Each term starts by
listening, then loads its world from the database, then applies what arrived meanwhile. A write that fails
loses the pass's assumptions, so the world is loaded again; a stale epoch ends the term. The scheduler, the
preemptor and the DRA allocator are such services: each says what its world is and how it maps events and
writes outputs (the hooks below), and none holds a rule of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from libs.db.engine import create_engine, create_session_factory, dispose_snapshot, snapshot_engine
from libs.db.errors import StaleEpochError
from libs.db.ports import UnitOfWork
from libs.db.reachability import database_check
from libs.db.records import Fence, OutboxMessage
from libs.db.uow import unit_of_work_factory
from libs.events.envelope import Envelope, EventPayload
from libs.leasing.leadership import LeaseThread
from libs.leasing.memory_inbox import MemoryInbox, MemoryUnitOfWork
from libs.messaging.broker import bus_state, jetstream, make_broker, start_broker
from libs.messaging.consumer import EventConsumer
from libs.messaging.held_acks import HeldAcks
from libs.messaging.relay import OutboxRelay
from libs.runtime.clock import Clock, utc_now
from libs.runtime.health import beat, health_file, process_name
from libs.runtime.memory import freeze_long_lived
from libs.runtime.metrics import LEADER, PASS_SECONDS
from libs.runtime.settings import PodwaySettings
from libs.runtime.shutdown import bounded, cancel_tasks

log = logging.getLogger(__name__)

World = TypeVar("World")
Decision = TypeVar("Decision")


class _Reload(Exception):
    """A pass could not be written: its assumptions are lost, so the world is read again; `lost` are the
    outputs it could not write."""

    def __init__(self, lost: Sequence[object] = ()) -> None:
        super().__init__()
        self.lost = list(lost)


@dataclass(eq=False)
class _Term(Generic[World]):
    """One leadership term: its fence, its consumer, its world and its loop."""

    fence: Fence
    inbox: MemoryInbox = field(default_factory=MemoryInbox)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    buffer: list[tuple[Envelope, EventPayload]] = field(default_factory=list)
    world: World | None = None
    task: asyncio.Task[None] | None = None
    broker: Any = None
    consumer: EventConsumer | None = None
    reset: bool = False
    """Its consumer lost events (created again): the world is loaded again from the database."""
    acks: HeldAcks = field(default_factory=HeldAcks)
    """What the world applied, acknowledged only once a fenced write begun after it committed."""
    checkpoint_due: float = 0.0
    observe_due: float = 0.0


class LeasedService(ABC, Generic[World, Decision]):
    """`start()` / `stop()`; `clock` times the lease, the world and every written timestamp.

    Subclasses name themselves (`name`: the lease, the durable consumer and the logs), list the event
    subjects they consume, and implement the hooks: `load`, `apply`, `run_pass`, `next_wakeup`, `write`.
    """

    name: str
    subjects: Sequence[str]
    consumer_batch = 64
    checkpoint_s = 0.1
    """How long applied events wait for a fenced write to acknowledge them before a checkpoint (a renewal
    of the lease alone) is written for them."""
    checkpoint_events = 256
    """Held acknowledgements that make a checkpoint due at once (the consumer delivers at most 1,000)."""
    observe_every_s: float | None = None
    """How often `observe` reads what no event tells (None: never)."""

    def __init__(
        self,
        settings: PodwaySettings,
        *,
        clock: Clock = utc_now,
        holder: str | None = None,
        tick_s: float = 0.05,
    ) -> None:
        if not settings.nats_url:
            raise ValueError(f"the {self.name} needs PODWAY_NATS_URL")
        self.settings = settings
        self.clock = clock
        self.tick_s = tick_s
        self.engine = create_engine(settings.resolved_database_url())
        self.sessions = create_session_factory(self.engine)
        self.snapshot_engine = snapshot_engine(settings.resolved_database_url(), self.engine)
        self.broker = make_broker(settings.nats_url, f"{self.name}-{settings.instance}")
        self.relay: OutboxRelay | None = None
        self.plain_uow = unit_of_work_factory(self.sessions, clock=clock)
        self.uow = unit_of_work_factory(
            self.sessions, clock=clock, fence=self._current_fence, after_commit=self._kick_relay
        )
        self.holder = (
            holder or f"{socket.gethostname()}:{os.getpid()}:{settings.instance}:{uuid.uuid4().hex[:6]}"
        )
        self.elector = LeaseThread(
            settings.resolved_database_url(),
            name=self.name,
            holder=self.holder,
            ttl=timedelta(seconds=settings.lease_seconds),
            clock=clock,
            on_elected=self._elected,
            on_deposed=self._deposed,
        )
        self._term: _Term[World] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- hooks ----------------------------------------------------------------------------------------------

    @abstractmethod
    async def load(self, uow: UnitOfWork, now: float) -> World:
        """The world a new term starts from, read in one unit of work."""

    @abstractmethod
    def apply(self, world: World, envelope: Envelope, payload: EventPayload, now: float) -> None:
        """A consumed event into the world."""

    @abstractmethod
    def run_pass(self, world: World, now: float) -> list[Decision]:
        """What the world decides now, to be written."""

    @abstractmethod
    def next_wakeup(self, world: World) -> float | None:
        """When a pass next has something to do on time alone."""

    @abstractmethod
    async def write(self, uow: UnitOfWork, outputs: list[Decision], fence: Fence) -> None:
        """Write a pass's outputs in the unit of work (the service renews the lease and commits)."""

    async def observe(self, world: World, now: float) -> None:
        """Read into the world what no event tells (e.g. node heartbeats), every `observe_every_s`."""

    def lost(self, world: World, outputs: list[Decision]) -> None:
        """The outputs of a pass that could not be written, handed to the world read again after it: what
        they answered that the database does not keep must be decided again (default: nothing)."""

    def written(self, outputs: list[Decision], took_s: float) -> None:
        """A pass's outputs were committed (for metrics)."""

    def leadership_changed(self, leading: bool) -> None:
        """This replica started or stopped leading (for metrics)."""

    def health(self) -> dict[str, object]:
        """Extra detail for the health beat."""
        return {}

    # -- life cycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        await start_broker(self.broker)
        self.relay = OutboxRelay(
            self.plain_uow,
            jetstream(self.broker),
            clock=self.clock,
            snapshot=unit_of_work_factory(create_session_factory(self.snapshot_engine), clock=self.clock),
        )
        self._tasks = [asyncio.create_task(self.relay.run(), name="outbox-relay")]
        await self.elector.start()
        if self.settings.data_dir:
            self._tasks.append(asyncio.create_task(self._beat(), name="health"))
        log.info("%s started", self.name, extra={"holder": self.holder})

    async def stop(self, *, release_lease: bool = True) -> None:
        """Stop; with `release_lease=False` the lease is left to lapse, as when the process dies."""
        await bounded(self.elector.stop(release=release_lease), "stopping the election", service=self.name)
        await cancel_tasks(self._tasks, service=self.name)
        await bounded(self._deposed(), "ending the term", service=self.name)
        await bounded(self.broker.stop(), "stopping the broker", service=self.name)
        await bounded(self.engine.dispose(), "closing the database pool", service=self.name)
        await bounded(
            dispose_snapshot(self.snapshot_engine, self.engine),
            "closing the snapshot pool",
            service=self.name,
        )

    @property
    def leading(self) -> bool:
        return self._term is not None

    @property
    def world(self) -> World | None:
        """The current term's world (for tests and diagnostics)."""
        return self._term.world if self._term is not None else None

    @property
    def ack_wait_s(self) -> float:
        """How long the service's consumer leaves an event unacknowledged before the server delivers it again:
        a lease, so that what a leader held when it stopped returns to its successor at the latest then."""
        return max(5.0, self.settings.lease_seconds)

    def wake(self) -> None:
        """Run a pass now (e.g. after a test moved the clock)."""
        if self._term is not None:
            self._term.wake.set()

    def seconds(self) -> float:
        return self.clock().timestamp()

    def _current_fence(self) -> Fence | None:
        return self._term.fence if self._term is not None else None

    def _kick_relay(self, committed: Sequence[OutboxMessage]) -> None:
        if self.relay is not None:
            self.relay.kick(committed)

    def connected(self) -> bool:
        """Whether the service's NATS connection is up or coming back (not closed for good)."""
        return bus_state(self.broker) != "closed"

    async def _beat(self) -> None:
        # Beats under the name `podway up` supervises the process by (the module's, one file per replica).
        process = process_name(self.name.replace("-", "_"), self.settings.instance)
        path = health_file(Path(self.settings.run_dir), process)
        database = database_check(self.engine)
        while True:
            if self.connected():
                detail: dict[str, object] = {
                    "leader": self.leading,
                    "nats": bus_state(self.broker),
                    "database": await database(),
                    **self.health(),
                }
                if self._term is not None:
                    detail["epoch"] = self._term.fence.epoch
                beat(path, detail=detail)
            await asyncio.sleep(1.0)

    # -- leadership -----------------------------------------------------------------------------------------

    async def _elected(self, fence: Fence) -> None:
        term: _Term[World] = _Term(fence)
        self._term = term
        LEADER.labels(self.name).set(1)
        self.leadership_changed(True)
        term.task = asyncio.create_task(self._lead(term), name=f"{self.name}-term-{fence.epoch}")

    async def _deposed(self) -> None:
        term, self._term = self._term, None
        if term is None:
            return
        log.info("%s term %d stopping", self.name, term.fence.epoch)
        LEADER.labels(self.name).set(0)
        self.leadership_changed(False)
        if term.task is not None and term.task is not asyncio.current_task():
            await _cancelled(term.task)
        await self._stop_consumer(term)

    async def _lead(self, term: _Term[World]) -> None:
        try:
            await self._start_consumer(term)
            lost: list[Decision] = []
            while self._term is term:
                await self._load(term)
                if lost:
                    assert term.world is not None
                    self.lost(term.world, lost)
                try:
                    await self._run_forever(term)
                except _Reload as reload:
                    lost = cast(list[Decision], reload.lost)
        except StaleEpochError:
            log.warning("%s epoch %d is stale: another replica leads; stopping", self.name, term.fence.epoch)
            self.elector.forget()
            await self._deposed()
        except Exception:
            log.exception("%s term %d failed; starting a new one", self.name, term.fence.epoch)
            self.elector.forget()
            await self._deposed()

    async def _start_consumer(self, term: _Term[World]) -> None:
        """Listen before loading, so nothing published while the world is read is missed."""
        assert self.settings.nats_url is not None
        broker = make_broker(self.settings.nats_url, f"{self.name}-{self.settings.instance}-events")
        consumer = EventConsumer(
            name=self.name,
            subjects=list(self.subjects),
            handler=lambda envelope, payload, _uow: self._on_event(term, envelope, payload),
            uow_factory=lambda: MemoryUnitOfWork(term.inbox),
            ack_wait_s=self.ack_wait_s,
            batch_size=self.consumer_batch,
            fetch_timeout_s=0.5,
            on_reset=lambda: self._reset(term),
            settle=term.acks.hold,
        )
        consumer.subscribe(broker)
        term.broker, term.consumer = broker, consumer
        await start_broker(broker, [consumer])

    async def _reset(self, term: _Term[World]) -> None:
        term.reset = True
        term.wake.set()

    async def _stop_consumer(self, term: _Term[World]) -> None:
        broker, consumer = term.broker, term.consumer
        term.broker = term.consumer = None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()
            # While the connection is up: what the term held goes to whoever leads next.
            await term.acks.give_back(delay_s=consumer.release_delay_s)
        if broker is not None:
            with contextlib.suppress(Exception):
                await broker.stop()

    async def _on_event(self, term: _Term[World], envelope: Envelope, payload: EventPayload) -> None:
        if self._term is not term:
            return  # the term is over: its held acknowledgements go back to the stream for the next leader
        if term.world is None:
            term.buffer.append((envelope, payload))
            return
        self.apply(term.world, envelope, payload, self.seconds())
        term.wake.set()
        # A batch is handled in one go; let a pass's write proceed between its events.
        await asyncio.sleep(0)

    async def _load(self, term: _Term[World]) -> None:
        term.world = None
        started = time.perf_counter()
        async with self.plain_uow() as uow:
            world = await self.load(uow, self.seconds())
        for envelope, payload in term.buffer:
            self.apply(world, envelope, payload, self.seconds())
        term.buffer.clear()
        term.world = world
        freeze_long_lived()
        log.info(
            "%s world loaded",
            self.name,
            extra={"epoch": term.fence.epoch, "load_ms": round((time.perf_counter() - started) * 1000, 1)},
        )

    # -- passes ---------------------------------------------------------------------------------------------

    async def _run_forever(self, term: _Term[World]) -> None:
        world = term.world
        assert world is not None
        while self._term is term:
            if term.reset:
                term.reset = False
                log.warning("%s: events were lost with the stream; loading the world again", self.name)
                raise _Reload()
            now = self.seconds()
            if self.observe_every_s is not None and time.monotonic() >= term.observe_due:
                term.observe_due = time.monotonic() + self.observe_every_s
                try:
                    await self.observe(world, now)
                except Exception as exc:  # the database is away: observe again next time
                    log.warning("%s: observing failed (%r); trying again later", self.name, exc)
            applied = term.acks.take()
            outputs = self.run_pass(world, now)
            if outputs:
                await self._write(term, outputs, applied)
                continue
            await self._settle(term, applied)
            term.wake.clear()
            timeout = self.tick_s
            wakeup = self.next_wakeup(world)
            if wakeup is not None:
                timeout = max(0.0, min(timeout, wakeup - now))
            if len(term.acks):
                timeout = min(timeout, max(0.0, term.checkpoint_due - time.monotonic()))
            if self.observe_every_s is not None:
                timeout = min(timeout, max(0.0, term.observe_due - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(term.wake.wait(), timeout)

    async def _settle(self, term: _Term[World], applied: list[Any]) -> None:
        """Acknowledge events a pass with nothing to write followed, once a checkpoint commits: at most every
        `checkpoint_s`, or at once when many are held."""
        if not applied:
            return
        if len(term.acks) + len(applied) < self.checkpoint_events and time.monotonic() < term.checkpoint_due:
            term.acks.put_back(applied)
            return
        try:
            await self._checkpoint(term)
        except StaleEpochError:
            term.acks.put_back(applied)  # given back once the term's consumer has stopped
            raise
        except Exception:
            log.warning("%s: a checkpoint failed; its events stay unacknowledged", self.name, exc_info=True)
            term.acks.put_back(applied)
            return
        await term.acks.ack(applied)

    async def _checkpoint(self, term: _Term[World]) -> None:
        """A fenced renewal of the lease: the events applied before it began are the term's to keep."""
        sent = time.monotonic()
        term.checkpoint_due = sent + self.checkpoint_s
        async with self.uow() as uow:
            lease = await uow.leases.renew(term.fence, self.holder, self.clock(), self.elector.ttl)
            if lease is None:
                raise StaleEpochError(f"lease {self.name} is no longer held at epoch {term.fence.epoch}")
            await uow.commit()
        self.elector.renewed(lease, sent)

    async def _write(self, term: _Term[World], outputs: list[Decision], applied: list[Any]) -> None:
        """One fenced transaction per pass, which also renews the lease: a write holds the lease row until
        it commits, so a renewal of its own would only wait for it. The events applied before the pass are
        acknowledged once it commits."""
        sent = time.monotonic()
        term.checkpoint_due = sent + self.checkpoint_s
        try:
            async with self.uow() as uow:
                await self.write(uow, outputs, term.fence)
                # Lapsed or taken, the term is over: taking the lease afresh would start a new epoch.
                lease = await uow.leases.renew(term.fence, self.holder, self.clock(), self.elector.ttl)
                if lease is None:
                    raise StaleEpochError(f"lease {self.name} is no longer held at epoch {term.fence.epoch}")
                await uow.commit()
        except StaleEpochError:
            term.acks.put_back(applied)
            raise
        except Exception as exc:
            log.exception("%s: writing %d outputs failed; loading the world again", self.name, len(outputs))
            # The events come again, to the world read again, so that it answers them (and `lost` decides
            # again what the pass answered that no event will ask again).
            term.inbox = MemoryInbox()
            await term.acks.give_back(applied)
            raise _Reload(outputs) from exc
        await term.acks.ack(applied)
        self.elector.renewed(lease, sent)
        took = time.monotonic() - sent
        if took > self.elector.renew_every_s:
            log.warning(
                "%s: a write took %.0f ms (%d outputs): lease renewals wait for it",
                self.name, took * 1000, len(outputs),
            )  # fmt: skip
        PASS_SECONDS.labels(self.name).observe(took)
        self.written(outputs, took)


async def _cancelled(task: asyncio.Task[None]) -> None:
    """Cancel a term's task once and wait until it ended. Once: a second cancellation could cut short the
    rollback of a transaction the first one interrupted. On Python 3.11 `asyncio.wait_for` may swallow a
    cancellation that arrives as the awaited event fires; the term's loops then end on their own at their
    next turn (at most `tick_s` away), as it is no longer the service's term."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # the caller itself is being cancelled
    except Exception:
        log.debug("a term ended with an error as it was cancelled", exc_info=True)
