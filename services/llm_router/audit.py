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
from collections.abc import Callable, Iterator, Sequence
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
    """Group commit of the buffered events, sized to the traffic: one unit of work once `batch_events` are
    buffered (but no more often than every `interval_s`), or once the oldest buffered event has waited
    `linger_s`, whichever comes first. A commit has a fixed cost of about 1.5 ms of CPU whatever it carries,
    so a fixed short interval made a router answering 50 requests/s spend more on committing than on routing;
    lingering bounds that cost per event while a busy router still commits every `interval_s`. Sync requests
    never wait for it; what a crash can lose is at most the events of one linger.

    A failed commit keeps its envelopes and retries them first next time (up to `max_pending`; beyond that the
    oldest are dropped and counted, so a database outage cannot exhaust memory or stall routing). A commit can
    fail after the database made it durable (the answer was lost); the retry writes nothing twice because
    appends skip event ids already in the log.
    """

    def __init__(
        self,
        buffer: EventBuffer,
        uow_factory: UnitOfWorkFactory,
        *,
        interval_s: float = 0.05,
        linger_s: float = 1.0,
        batch_events: int = 64,
        max_batch: int = 10_000,
        max_pending: int = 100_000,
        on_flush: Callable[[int, float], None] | None = None,
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
        self._closing = asyncio.Event()
        self._due = asyncio.Event()  # something to write, or closing
        buffer.on_nonempty = self._due.set
        self._lock = asyncio.Lock()

    async def flush(self) -> int:
        """Write everything buffered (and anything a failed flush left) in one transaction; returns how many."""
        async with self._lock:  # one flush at a time: a batch is written once
            return await self._flush()

    async def _flush(self) -> int:
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
            return 0
        started = time.perf_counter()
        batch = self._pending
        async with self._uow_factory() as uow:
            for envelope in batch:
                uow.emit(envelope)
            await uow.commit()
        self._pending = []
        self.written += len(batch)
        if self._on_flush is not None:
            self._on_flush(len(batch), time.perf_counter() - started)
        return len(batch)

    async def run(self) -> None:
        """Flush as the class says until `close()`, then once more; sleep while there is nothing to write.
        Closing instead of cancelling never interrupts a commit halfway."""
        loop = asyncio.get_running_loop()
        flushed_at = -math.inf
        while not self._closing.is_set():
            if not self.buffer and not self._pending:
                self._due.clear()
                await self._due.wait()
            first_at = loop.time()
            while not self._closing.is_set():
                wait_s = self.due_in(loop.time(), first_at=first_at, flushed_at=flushed_at)
                if wait_s <= 0:
                    break
                await self._sleep(min(wait_s, self.interval_s))  # re-check the batch every interval
            if self._closing.is_set():
                break
            flushed_at = loop.time()
            try:
                await self.flush()
            except Exception:
                log.exception("audit flush failed; retrying")
        await self.flush()

    def due_in(self, now: float, *, first_at: float, flushed_at: float) -> float:
        """Seconds until the next group commit is due (<= 0: now), for events waiting since `first_at`."""
        spacing = flushed_at + self.interval_s - now
        if len(self.buffer) + len(self._pending) >= self.batch_events:
            return spacing
        return max(spacing, first_at + self.linger_s - now)

    async def _sleep(self, seconds: float) -> None:
        """Sleep `seconds`, or less if closing."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    def close(self) -> None:
        """Ask `run()` to write what is left and return."""
        self._closing.set()
        self._due.set()
