"""A JetStream work queue consumed exactly once, several items at a time: the async inference path.

Unlike `EventConsumer` (events in stream order, the handler inside the transaction), work items are processed
concurrently and their slow part runs outside any transaction: holding a transaction (on SQLite, the database
write lock) across an LLM call would stall every other writer. Only the outcome is written, in one transaction
with the inbox mark, and then the message is acked. An item redelivered after its outcome was committed (the
process died between commit and ack, or the commit's answer was lost), or sent again under another message id,
is recognised by the inbox before it is performed, and acked without being done again: no second provider
call, no second outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import nats.errors
from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from libs.db.ports import UnitOfWorkFactory
from libs.events.catalogue import DLQ_STREAM, WORK_STREAM
from libs.events.envelope import Envelope
from libs.messaging.consumer import ConsumeOutcome, exponential_backoff
from libs.messaging.dead_letters import DeadLetterReason, dead_letter
from libs.messaging.delivery import delivery_of
from libs.messaging.publisher import MSG_ID_HEADER
from libs.messaging.streams import require_streams

log = logging.getLogger(__name__)


class MalformedWork(ValueError):
    """The message cannot be understood; retrying will not help (it goes to the DLQ)."""


@dataclass(frozen=True, slots=True)
class Deferral:
    """Not now: put the item back for `delay_s` (e.g. its feature is over budget)."""

    delay_s: float
    reason: str


class WorkHandler(Protocol):
    """What a service does with one work item."""

    def identify(self, data: bytes) -> uuid.UUID:
        """The item's idempotency key; raises MalformedWork."""
        ...

    async def perform(self, data: bytes) -> Sequence[Envelope] | Deferral:
        """Do the work (outside any transaction) and return the events that record its outcome."""
        ...


async def enqueue(
    broker: NatsBroker, subject: str, data: bytes, *, work_id: uuid.UUID, timeout_s: float = 5.0
) -> None:
    """Put one item on the work queue; the work id is the Nats-Msg-Id, so a re-sent item is stored once."""
    await broker.publish(
        data, subject, headers={MSG_ID_HEADER: str(work_id)}, stream=WORK_STREAM, timeout=timeout_s
    )


class WorkQueueConsumer:
    """A durable pull consumer on the work stream that handles up to `concurrency` items at once.

    Per item: identify it (malformed → DLQ), ack it at once if the inbox says its outcome is written, else
    perform it while telling JetStream it is in progress, then in one unit of work mark the inbox and emit the
    outcome, commit, ack. A Deferral naks with its delay; an exception naks with backoff, and on attempt
    `max_deliver` the item goes to the DLQ.
    """

    def __init__(
        self,
        *,
        name: str,
        subject: str,
        handler: WorkHandler,
        uow_factory: UnitOfWorkFactory,
        concurrency: int = 16,
        ack_wait_s: float = 30.0,
        max_deliver: int = 5,
        retry_delay: Callable[[int], float] = exponential_backoff,
        fetch_timeout_s: float = 1.0,
        stream: str = WORK_STREAM,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.name = name
        self.subject = subject
        self.stream = stream
        self.concurrency = concurrency
        self.ack_wait_s = ack_wait_s
        self.max_deliver = max_deliver
        self.fetch_timeout_s = fetch_timeout_s
        self._handler = handler
        self._performing: set[uuid.UUID] = set()
        self._uow_factory = uow_factory
        self._retry_delay = retry_delay
        self._broker: NatsBroker | None = None
        self._pull_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[ConsumeOutcome]] = set()
        self._slot_freed = asyncio.Event()

    @property
    def in_progress(self) -> int:
        """Items being worked on now."""
        return len(self._tasks)

    async def ensure(self, js: JetStreamContext) -> None:
        """Create the durable consumer, or update it to this configuration."""
        await js.add_consumer(
            self.stream,
            ConsumerConfig(
                durable_name=self.name,
                filter_subjects=[self.subject],
                deliver_policy=DeliverPolicy.ALL,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=self.ack_wait_s,
                max_deliver=-1,
                max_ack_pending=max(1000, self.concurrency * 4),
            ),
        )

    async def start(self, broker: NatsBroker) -> None:
        """Check the work and dead-letter streams exist, provision the durable consumer and start pulling (the
        broker must be connected)."""
        self._broker = broker
        js = broker.connection.jetstream()
        await require_streams(js, [self.stream, DLQ_STREAM])
        await self.ensure(js)
        subscription = await js.pull_subscribe_bind(durable=self.name, stream=self.stream)
        self._pull_task = asyncio.create_task(self._pull_loop(subscription), name=f"work-{self.name}")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop pulling, let items in progress finish (within `grace_s`), cancel the rest (they are redelivered)."""
        if self._pull_task is not None:
            self._pull_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pull_task
            self._pull_task = None
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _pull_loop(self, subscription: JetStreamContext.PullSubscription) -> None:
        try:
            while True:
                free = self.concurrency - len(self._tasks)
                if free <= 0:
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                    continue
                try:
                    messages = await subscription.fetch(free, timeout=self.fetch_timeout_s)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                for msg in messages:
                    task = asyncio.create_task(self._process_or_release(msg))
                    self._tasks.add(task)
                    task.add_done_callback(self._done)
        finally:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    def _done(self, task: asyncio.Task[ConsumeOutcome]) -> None:
        self._tasks.discard(task)
        self._slot_freed.set()

    async def _process_or_release(self, msg: Msg) -> ConsumeOutcome:
        try:
            return await self.process(msg)
        except Exception:
            log.exception("%s: could not settle a work item; releasing it", self.name)
            with contextlib.suppress(Exception):
                await msg.nak(delay=self._retry_delay(delivery_of(msg).attempt))
            return ConsumeOutcome.RETRYING

    async def process(self, msg: Msg) -> ConsumeOutcome:
        """Handle one delivered item and settle it (ack, nak, or dead-letter and ack)."""
        delivery = delivery_of(msg)
        try:
            work_id = self._handler.identify(msg.data)
        except MalformedWork as exc:
            log.warning("%s: dead-lettering malformed work: %s", self.name, exc)
            await self._dead_letter(msg, DeadLetterReason.INVALID_PAYLOAD, str(exc))
            return ConsumeOutcome.DEAD_LETTERED
        if work_id in self._performing:
            # Another copy of the item (a redelivery) is being performed here now: let JetStream bring this
            # one back later, when the inbox will say whether the outcome was written.
            await msg.nak(delay=self._retry_delay(delivery.attempt))
            return ConsumeOutcome.RETRYING
        self._performing.add(work_id)
        try:
            return await self._process(msg, work_id)
        finally:
            self._performing.discard(work_id)

    async def _process(self, msg: Msg, work_id: uuid.UUID) -> ConsumeOutcome:
        delivery = delivery_of(msg)
        try:
            if await self._recorded(work_id):
                await msg.ack()
                return ConsumeOutcome.DUPLICATE
            async with self._in_progress(msg):
                outcome = await self._handler.perform(msg.data)
            if isinstance(outcome, Deferral):
                await msg.nak(delay=outcome.delay_s)
                return ConsumeOutcome.RETRYING
            duplicate = await self._record(work_id, outcome)
        except Exception as exc:
            if delivery.attempt >= self.max_deliver:
                log.error("%s: work %s failed %d times, dead-lettering", self.name, work_id, delivery.attempt)
                await self._dead_letter(msg, DeadLetterReason.HANDLER_FAILED, f"{type(exc).__name__}: {exc}")
                return ConsumeOutcome.DEAD_LETTERED
            log.warning(
                "%s: work %s failed (attempt %d), will retry: %r", self.name, work_id, delivery.attempt, exc
            )
            await msg.nak(delay=self._retry_delay(delivery.attempt))
            return ConsumeOutcome.RETRYING
        await msg.ack()
        return ConsumeOutcome.DUPLICATE if duplicate else ConsumeOutcome.PROCESSED

    async def _recorded(self, work_id: uuid.UUID) -> bool:
        """Whether the outcome of `work_id` is written already. Asked by marking the inbox in a transaction that
        is rolled back, so the mark is only ever committed with the outcome."""
        async with self._uow_factory() as uow:
            return await uow.inbox.seen(self.name, work_id)

    async def _record(self, work_id: uuid.UUID, envelopes: Sequence[Envelope]) -> bool:
        """Mark the inbox and write the outcome in one transaction; True if it was already recorded."""
        async with self._uow_factory() as uow:
            if await uow.inbox.seen(self.name, work_id):
                return True
            for envelope in envelopes:
                uow.emit(envelope)
            await uow.commit()
        return False

    @contextlib.asynccontextmanager
    async def _in_progress(self, msg: Msg) -> AsyncIterator[None]:
        """Keep telling JetStream the item is being worked on, so a long call is not redelivered meanwhile."""

        async def beat() -> None:
            while True:
                await asyncio.sleep(self.ack_wait_s / 3)
                with contextlib.suppress(Exception):
                    await msg.in_progress()

        beating = asyncio.create_task(beat())
        try:
            yield
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def _dead_letter(self, msg: Msg, reason: DeadLetterReason, detail: str) -> None:
        if self._broker is None:
            raise RuntimeError(f"consumer {self.name} is not started")
        await dead_letter(self._broker, self.name, msg, delivery_of(msg), reason, detail)
        await msg.ack()
