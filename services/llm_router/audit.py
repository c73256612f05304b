"""The router's audit trail: where its events go, how they become envelopes, and the group commit.

The router appends events to a sink and never waits: sync requests must not wait on the database. The sink
counts each event in the metrics, then either hands it to an async request that captures its own story (it is
written in the same transaction as that request's outcome) or appends it to a bounded buffer that the flusher
drains into one unit of work at least every `interval_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime

from pydantic import ValidationError

from libs.db.ports import UnitOfWorkFactory
from libs.events.catalogue import EventType
from libs.events.envelope import AggregateRef, Envelope
from libs.events.inference import ROUTER_PRODUCER
from libs.events.registry import PAYLOAD_MODELS
from libs.router import EventBuffer, RouterEvent

log = logging.getLogger(__name__)

_BREAKER_TYPES = {
    EventType.ROUTER_BREAKER_OPENED,
    EventType.ROUTER_BREAKER_HALF_OPENED,
    EventType.ROUTER_BREAKER_CLOSED,
}
OUTCOME_TYPES = {EventType.INFERENCE_COMPLETED, EventType.INFERENCE_FAILED}
ENVELOPES_PER_SLICE = 16  # about 0.6 ms of work


class AuditSink:
    """The router's `event_sink`: observe, then capture (async requests) or buffer (everything else)."""

    def __init__(self, buffer: EventBuffer, observe: Callable[[RouterEvent], None] | None = None) -> None:
        self.buffer = buffer
        self._observe = observe
        self._captures: dict[str, list[RouterEvent]] = {}

    def __call__(self, event: RouterEvent) -> None:
        if self._observe is not None:
            self._observe(event)
        captured = self._captures.get(event.correlation_id)
        if captured is not None:
            captured.append(event)
        else:
            self.buffer(event)

    @contextlib.contextmanager
    def capture(self, request_id: str) -> Iterator[list[RouterEvent]]:
        """Collect the events of request `request_id` instead of buffering them, while the block runs."""
        if request_id in self._captures:
            raise RuntimeError(f"request {request_id} is already being handled in this process")
        captured: list[RouterEvent] = []
        self._captures[request_id] = captured
        try:
            yield captured
        finally:
            del self._captures[request_id]


def _subject(event: RouterEvent) -> AggregateRef | None:
    if event.type in _BREAKER_TYPES:
        return AggregateRef(kind="Deployment", name=event.correlation_id)
    if event.type in (EventType.ROUTER_POLICY_RELOADED, EventType.ROUTER_EXPERIMENT_CONCLUDED):
        return AggregateRef(kind="RoutingPolicy", name=event.correlation_id)
    return AggregateRef(kind="InferenceRequest", name=event.correlation_id)


def to_envelope(event: RouterEvent, *, causation_id: str | None = None) -> Envelope:
    """The audit-log envelope of one router event; raises ValidationError if the payload is not the model's."""
    payload = PAYLOAD_MODELS[event.type].model_validate(event.payload)
    return Envelope.wrap(
        payload,
        producer=ROUTER_PRODUCER,
        correlation_id=event.correlation_id,
        occurred_at=datetime.fromtimestamp(event.occurred_at, UTC),
        causation_id=causation_id,
        subject=_subject(event),
    )


class CausalChain:
    """Names each event's cause: the previous event of the same story (request, deployment or policy).

    Bounded: the oldest stories are forgotten first; a request's story ends with its outcome.
    """

    def __init__(self, max_stories: int = 50_000) -> None:
        self._last: OrderedDict[str, str] = OrderedDict()
        self._max = max_stories

    def start(self, correlation_id: str, cause: str) -> None:
        """Begin a story with a cause from outside the log (e.g. the work item that asked for it)."""
        self._remember(correlation_id, cause)

    def envelopes(self, events: Sequence[RouterEvent]) -> list[Envelope]:
        """Envelopes of `events`, in order, each naming its cause; events whose payload does not fit their
        model are logged and left out rather than holding back the others."""
        envelopes: list[Envelope] = []
        for event in events:
            try:
                envelope = to_envelope(event, causation_id=self._last.get(event.correlation_id))
            except ValidationError:
                log.exception("router event %s does not fit its model; not audited", event.type)
                continue
            envelopes.append(envelope)
            if event.type in OUTCOME_TYPES:
                self._last.pop(event.correlation_id, None)
            else:
                self._remember(event.correlation_id, str(envelope.event_id))
        return envelopes

    def _remember(self, correlation_id: str, event_id: str) -> None:
        self._last[correlation_id] = event_id
        self._last.move_to_end(correlation_id)
        while len(self._last) > self._max:
            self._last.popitem(last=False)


class AuditFlusher:
    """Group commit of the buffered events: a commit begins at most `linger_s` (50 ms) after the oldest event
    it carries was buffered, or earlier once `batch_events` are buffered (but no more often than every
    `interval_s`). The durability point is the commit of that unit of work: an event is in the audit log once
    the commit carrying it returns, so a process killed outright loses the events of its last `linger_s` and of
    the commit in progress, never more. A commit has a fixed cost of about 1.5 ms of CPU whatever it carries:
    lingering bounds that cost at 20 commits a second however thin the traffic. Sync requests never wait for it.

    A failed commit keeps its envelopes and retries them first next time (up to `max_pending`; beyond that the
    oldest are dropped and counted, so a database outage cannot exhaust memory or stall routing). A commit can
    fail after the database made it durable (the answer was lost); the retry writes nothing twice because
    appends skip event ids already in the log.

    `clock` and `sleep` are injected by tests that kill the writer at a chosen moment of a simulated run.
    """

    def __init__(
        self,
        buffer: EventBuffer,
        uow_factory: UnitOfWorkFactory,
        *,
        interval_s: float = 0.05,
        linger_s: float = 0.05,
        batch_events: int = 64,
        max_batch: int = 10_000,
        max_pending: int = 100_000,
        on_flush: Callable[[int, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] | None = None,
    ) -> None:
        self.buffer = buffer
        self.interval_s = interval_s
        self.linger_s = max(linger_s, interval_s)
        self.batch_events = batch_events
        self.dropped = 0
        self.written = 0
        self._uow_factory = uow_factory
        self._max_batch = max_batch
        self._max_pending = max_pending
        self._pending: list[Envelope] = []
        self._chain = CausalChain()
        self._on_flush = on_flush
        self._clock = clock
        self._sleep_for = sleep
        self._closing = asyncio.Event()
        self._due = asyncio.Event()  # something to write, or closing
        self._oldest_at: float | None = None  # when the oldest event not yet committed was buffered
        self._flushed_at = -math.inf
        buffer.on_nonempty = self._buffered
        self._lock = asyncio.Lock()

    def _buffered(self) -> None:
        if self._oldest_at is None:
            self._oldest_at = self._clock()
        self._due.set()

    async def flush(self) -> int:
        """Write everything buffered (and anything a failed flush left) in one transaction; returns how many."""
        async with self._lock:  # one flush at a time: a batch is written once
            return await self._flush()

    async def _flush(self) -> int:
        self._flushed_at = self._clock()
        drained = self.buffer.drain(self._max_batch)
        for start in range(0, len(drained), ENVELOPES_PER_SLICE):
            if start:  # let requests in flight run between slices: a batch's envelopes take milliseconds
                await asyncio.sleep(0)
            self._pending += self._chain.envelopes(drained[start : start + ENVELOPES_PER_SLICE])
        if len(self._pending) > self._max_pending:
            excess = len(self._pending) - self._max_pending
            self.dropped += excess
            del self._pending[:excess]
            log.error("audit backlog over %d events; dropped the oldest %d", self._max_pending, excess)
        if not self._pending:
            self._oldest_at = self._flushed_at if self.buffer else None
            return 0
        started = time.perf_counter()
        batch = self._pending
        async with self._uow_factory() as uow:
            for envelope in batch:
                uow.emit(envelope)
            await uow.commit()
        self._pending = []
        # What was buffered while this commit ran waits since at most the commit's start.
        self._oldest_at = self._flushed_at if self.buffer else None
        self.written += len(batch)
        if self._on_flush is not None:
            self._on_flush(len(batch), time.perf_counter() - started)
        return len(batch)

    async def run(self) -> None:
        """Flush as the class says until `close()`, then once more; sleep while there is nothing to write.
        Closing instead of cancelling never interrupts a commit halfway."""
        while not self._closing.is_set():
            if not self.buffer and not self._pending:
                self._due.clear()
                await self._due.wait()
                continue
            wait_s = self.due_in(self._clock())
            if wait_s > 0:
                await self._sleep(min(wait_s, self.interval_s))  # re-check the batch every interval
                continue
            try:
                await self.flush()
            except Exception:
                log.exception("audit flush failed; retrying")
        await self.flush()

    def due_in(self, now: float) -> float:
        """Seconds until the next group commit is due (<= 0: now)."""
        spacing = self._flushed_at + self.interval_s - now
        if len(self.buffer) + len(self._pending) >= self.batch_events:
            return spacing
        oldest_at = now if self._oldest_at is None else self._oldest_at
        return max(spacing, oldest_at + self.linger_s - now)

    async def _sleep(self, seconds: float) -> None:
        """Sleep `seconds`, or less if closing."""
        if self._sleep_for is not None:
            await self._sleep_for(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    def close(self) -> None:
        """Ask `run()` to write what is left and return."""
        self._closing.set()
        self._due.set()
