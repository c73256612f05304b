"""`EventConsumer`: an idempotent durable pull consumer with a dead-letter queue, wired as a faststream
subscriber so it runs the same on a real server and under `TestNatsBroker`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol

import nats.errors
from faststream import AckPolicy, Context
from faststream.message import StreamMessage
from faststream.nats import JStream, NatsBroker, PullSub
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from libs.db.errors import database_unreachable
from libs.db.ports import UnitOfWork, UnitOfWorkFactory
from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM, EventType
from libs.events.envelope import Envelope, EventPayload
from libs.events.registry import UnknownSchemaVersion, parse_payload
from libs.messaging.codec import raw_body
from libs.messaging.dead_letters import DeadLetterReason, dead_letter
from libs.messaging.delivery import Delivery, delivery_of
from libs.runtime.logging import correlated
from libs.runtime.metrics import DLQ_DEPTH, EVENTS_CONSUMED, EVENTS_DEAD_LETTERED
from libs.runtime.tracing import consuming, tracing_enabled

log = logging.getLogger(__name__)

CONSUMER_CHECK_S = 5.0
"""How long a pull loop may stay idle before it checks that its durable consumer still exists."""
RECOVER_WAIT_S = 0.5
"""The pause between attempts while the bus, the consumer or its stream is away."""
DLQ_CHECK_S = 15.0
"""How often a consumer reads the dead-letter stream's depth for the `podway_dlq_depth` gauge."""
STOP_GRACE_S = 1.0
"""How long a stopping pull loop may take beyond one pull to finish the batch in hand."""
DRAIN_TIMEOUT_S = 0.001
"""How long a batch waits for messages beyond the one that started it (the pull request's expiry). Short: a
gang's events arrive together, and what misses a batch is delivered into the next one, not lost."""


class EventHandler(Protocol):
    """What a service does with one event, inside the consumer's unit of work. It must not commit: the
    consumer commits the handler's writes together with the inbox mark, then acks."""

    async def __call__(self, envelope: Envelope, payload: EventPayload, uow: UnitOfWork) -> None: ...


class EventBatchHandler(Protocol):
    """What a service does with the fresh events of one fetched batch, in stream order, inside the consumer's
    unit of work (as `EventHandler`, it must not commit): one read and one write for many events."""

    async def __call__(self, events: Sequence[tuple[Envelope, EventPayload]], uow: UnitOfWork) -> None: ...


class EventBatchPreparer(Protocol):
    """What a service does with a fetched batch (duplicates included) before the unit of work that handles it
    opens, so that it waits for no database writer: reads of a snapshot, work outside the database (starting
    a process). It writes nothing to the database; the handler, which runs anyway, makes it count, so a
    preparer that fails or is skipped (a batch retried one by one) changes nothing but when the work starts."""

    async def __call__(self, events: Sequence[tuple[Envelope, EventPayload]]) -> None: ...


class ConsumeOutcome(StrEnum):
    """What became of one delivered message."""

    PROCESSED = "Processed"
    DUPLICATE = "Duplicate"
    RETRYING = "Retrying"
    DEAD_LETTERED = "DeadLettered"


class MalformedEvent(ValueError):
    """The message cannot be understood; retrying will not help."""

    def __init__(self, reason: DeadLetterReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def exponential_backoff(attempt: int, *, base_s: float = 1.0, cap_s: float = 60.0) -> float:
    """Redelivery delay after failed attempt `attempt` (1-based): 1 s, 2 s, 4 s, ... capped at a minute."""
    return float(min(cap_s, base_s * 2 ** (attempt - 1)))


MAX_DELIVER = 5
ACK_WAIT_S = 30.0


def redelivery_window_s(
    max_deliver: int = MAX_DELIVER,
    ack_wait_s: float = ACK_WAIT_S,
    retry_delay: Callable[[int], float] = exponential_backoff,
) -> float:
    """The longest an event can still be delivered to a consumer after its first delivery: each attempt
    waits out its ack, then its backoff. Past it, the consumer's inbox mark of the event is no longer needed."""
    return max_deliver * ack_wait_s + sum(retry_delay(attempt) for attempt in range(1, max_deliver))


class EventConsumer:
    """A durable JetStream pull consumer that processes each event once.

    For each message, in stream order: parse the envelope and payload (unparseable → DLQ, ack); open a unit of
    work; if `inbox.seen(name, event_id)` already, ack without effect; else run the handler, commit, ack. When
    the handler raises, nak with `retry_delay(attempt)`; on attempt `max_deliver` publish to the DLQ and ack,
    unless the database was unreachable (`database_unreachable`): that event is tried again until it is back.
    The server-side consumer has no delivery limit: the limit is enforced here, where the DLQ is.
    With a `batch_handler` instead of a `handler`, the fresh events of a batch are handed over together, so that
    a service reads and writes once for all of them.

    The batched pull loop outlives the bus: while nats-server is away it waits and pulls again once the
    connection is back; if the durable consumer is gone (the stream was deleted or the server lost its
    store) it creates it again and calls `on_reset`, since the events published meanwhile are lost and the
    service must re-derive its pending work from the database (PostgreSQL is the truth, JetStream transport).
    """

    def __init__(
        self,
        *,
        name: str,
        subjects: Sequence[str],
        handler: EventHandler | None = None,
        batch_handler: EventBatchHandler | None = None,
        uow_factory: UnitOfWorkFactory,
        stream: str = EVENTS_STREAM,
        max_deliver: int = MAX_DELIVER,
        ack_wait_s: float = ACK_WAIT_S,
        retry_delay: Callable[[int], float] = exponential_backoff,
        fetch_timeout_s: float = 1.0,
        payload_parser: Callable[[Envelope], EventPayload] = parse_payload,
        batch_size: int = 1,
        on_reset: Callable[[], Awaitable[None]] | None = None,
        settle: Callable[[Sequence[Msg]], Awaitable[None]] | None = None,
        prepare: EventBatchPreparer | None = None,
    ) -> None:
        if not subjects:
            raise ValueError("a consumer needs at least one subject")
        if (handler is None) == (batch_handler is None):
            raise ValueError("a consumer needs a handler or a batch handler, not both")
        self.name = name
        self.subjects = list(subjects)
        self.stream = stream
        self.max_deliver = max_deliver
        self.ack_wait_s = ack_wait_s
        self.fetch_timeout_s = fetch_timeout_s
        self._handler = handler
        self._batch_handler = batch_handler
        self._uow_factory = uow_factory
        self._retry_delay = retry_delay
        self._payload_parser = payload_parser
        self._broker: NatsBroker | None = None
        self.batch_size = batch_size
        self._on_reset = on_reset
        self._settle = settle
        self._prepare = prepare
        """Work done for a fetched batch before its unit of work opens (see `EventBatchPreparer`)."""
        """Who acknowledges handled messages (default: the consumer, at once); see `HeldAcks`."""
        self._pull_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._waiting = False
        """The pull loop waits for a first message: nothing fetched is in hand."""
        self._dlq_task: asyncio.Task[None] | None = None
        self.replay_since: Callable[[], datetime] = _replay_since
        """Where a durable consumer created again starts: the redelivery window before now."""

    async def ensure(self, js: JetStreamContext) -> None:
        """Create the durable consumer, or update it to this configuration (new subjects, ack wait).

        Call it before the broker starts: faststream binds to an existing durable without updating it.
        """
        await js.add_consumer(self.stream, self._consumer_config())

    def subscribe(self, broker: NatsBroker) -> None:
        """Register on `broker`; the durable consumer is created (if absent) when the broker starts.

        Each fetch is a long poll for one message (`fetch_timeout_s`), so messages are handled one after
        another in stream order and a message is handled as soon as it arrives. Larger faststream fetches
        were measured and rejected: a non-batch fetch of N is handled concurrently (order lost), and a
        batch fetch stalls for seconds when nats-py raises a bare TimeoutError near the batch deadline
        (faststream only catches nats' TimeoutError and restarts its consume task with a backoff).
        """
        self._broker = broker
        if self.batch_size > 1:
            return  # the batched pull loop starts in start(), once the broker is connected

        async def on_message(message: StreamMessage[Msg] = Context("message")) -> None:
            await self._process_or_release(message.raw_message)

        broker.subscriber(
            "",
            stream=JStream(self.stream, declare=False),
            durable=self.name,
            config=self._consumer_config(),
            pull_sub=PullSub(batch_size=1, timeout=self.fetch_timeout_s),
            ack_policy=AckPolicy.MANUAL,
            decoder=raw_body,
            title=f"{self.name}:consume",
            description=f"Durable consumer {self.name} of {', '.join(self.subjects)}",
        )(on_message)

    async def start(self) -> None:
        """Start the batched pull loop (batch_size > 1; faststream drives the others) and the reading of the
        dead-letter stream's depth."""
        if self._broker is not None and self._dlq_task is None:
            self._dlq_task = asyncio.create_task(self._watch_dead_letters(), name=f"dlq-{self.name}")
        if self.batch_size <= 1 or self._pull_task is not None:
            return
        self._stopping = False
        if self._broker is None:
            raise RuntimeError(f"consumer {self.name} is not subscribed to a broker")
        subscription = await self._broker.connection.jetstream().pull_subscribe_bind(
            durable=self.name, stream=self.stream
        )
        self._pull_task = asyncio.create_task(self._pull_loop(subscription), name=f"consume-{self.name}")

    async def stop(self) -> None:
        """Stop the batched pull loop: a loop waiting for a first message is cancelled at once (what the
        server sent meanwhile waits in the subscription's queue and goes back); otherwise it ends after the
        batch in hand (what it fetches from then on goes back to the stream), or is cancelled if that takes
        longer than a pull."""
        if self._dlq_task is not None:
            # Not awaited: a cancelled nats-py request may swallow the cancellation; the task ends at its next
            # wake-up, when it sees it was cancelled.
            self._dlq_task.cancel()
            self._dlq_task = None
        task, self._pull_task = self._pull_task, None
        if task is None:
            return
        self._stopping = True
        if not self._waiting:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), timeout=self.fetch_timeout_s + STOP_GRACE_S)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _watch_dead_letters(self) -> None:
        broker = self._broker
        assert broker is not None
        delay = 1.0
        while self._dlq_task is asyncio.current_task():
            await asyncio.sleep(delay)
            delay = DLQ_CHECK_S
            if self._dlq_task is not asyncio.current_task() or not broker.connection.is_connected:
                continue
            with contextlib.suppress(Exception):
                info = await broker.connection.jetstream(timeout=2.0).stream_info(DLQ_STREAM)
                DLQ_DEPTH.set(info.state.messages)

    async def _pull_loop(self, subscription: JetStreamContext.PullSubscription) -> None:
        idle_since = time.monotonic()
        try:
            while not self._stopping:
                try:
                    messages = await self._next_batch(subscription)
                except (TimeoutError, nats.errors.TimeoutError):
                    # An idle pull cannot tell a quiet stream from a consumer that vanished: look now and then.
                    if time.monotonic() - idle_since > CONSUMER_CHECK_S and not self._stopping:
                        idle_since = time.monotonic()
                        subscription = await self._recover(subscription, None)
                    continue
                except Exception as exc:  # the bus went away, or the consumer or its stream did
                    if self._stopping:
                        # A stop's cancellation can come back as a timeout or a connection error from
                        # nats-py (Python 3.11's wait_for may swallow it): no recovery, the loop ends.
                        return
                    subscription = await self._recover(subscription, exc)
                    continue
                idle_since = time.monotonic()
                if self._stopping:
                    await self._release(messages)
                    return
                try:
                    await self.process_batch(messages)
                except asyncio.CancelledError:
                    await self._release(messages)
                    raise
                except Exception:
                    log.exception("%s: a batch could not be settled; releasing it", self.name)
                    for msg in messages:
                        with contextlib.suppress(Exception):
                            await msg.nak(delay=self._retry_delay(delivery_of(msg).attempt))
        finally:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()
            await self._release_undelivered(subscription)

    async def _release_undelivered(self, subscription: JetStreamContext.PullSubscription) -> None:
        """Messages the server delivered to this consumer that no fetch took (they came for a pull that was
        cancelled) go back soon, not after the ack wait. nats-py keeps them in the subscription's queue."""
        queue = getattr(getattr(subscription, "_sub", None), "_pending_queue", None)
        undelivered = []
        while queue is not None and not queue.empty():
            msg = queue.get_nowait()
            if msg.reply and msg.reply.startswith("$JS.ACK."):
                undelivered.append(msg)
        await self._release(undelivered)

    async def _release(self, messages: Sequence[Msg]) -> None:
        """Fetched messages this consumer will not handle go back soon, not after the ack wait (and not to
        its last pull request, which outlives it on the server by its expiry)."""
        for msg in messages:
            with contextlib.suppress(Exception):
                await msg.nak(delay=self.release_delay_s)

    async def _recover(
        self, subscription: JetStreamContext.PullSubscription, error: Exception | None
    ) -> JetStreamContext.PullSubscription:
        """The subscription to pull from next: the same one while the bus is away or all is well; a new one on
        a durable consumer created again when it was gone (then `on_reset`)."""
        assert self._broker is not None
        client = self._broker.connection
        if not client.is_connected:
            await asyncio.sleep(RECOVER_WAIT_S)
            return subscription
        js = client.jetstream()
        try:
            await js.consumer_info(self.stream, self.name)
            if error is not None:
                log.warning("%s: pulling failed (%r); pulling again", self.name, error)
                await asyncio.sleep(RECOVER_WAIT_S)
            return subscription
        except NotFoundError:
            pass
        except Exception as exc:
            log.warning("%s: the consumer cannot be checked yet (%r)", self.name, exc)
            await asyncio.sleep(RECOVER_WAIT_S)
            return subscription
        try:
            # Its position is lost: take up again only what the inbox may still remember (what retention
            # keeps), not the stream's whole history; `on_reset` re-derives the rest from the database.
            await js.add_consumer(self.stream, self._consumer_config(since=self.replay_since()))
            renewed = await js.pull_subscribe_bind(durable=self.name, stream=self.stream)
        except Exception as exc:
            log.warning("%s: the consumer cannot be created again yet (%r)", self.name, exc)
            await asyncio.sleep(RECOVER_WAIT_S)
            return subscription
        log.warning(
            "%s: the durable consumer was gone and is created again; re-deriving pending work", self.name
        )
        with contextlib.suppress(Exception):
            await subscription.unsubscribe()
        if self._on_reset is not None and not self._stopping:
            await self._on_reset()
        return renewed

    async def _next_batch(self, subscription: JetStreamContext.PullSubscription) -> list[Msg]:
        """Wait for one message, then take what else is already there, up to the batch size.

        A single `fetch(batch_size)` that starts on an empty stream keeps its pull open until the whole batch
        has arrived or the fetch times out: events trickling in would wait for those that come after them.
        """
        self._waiting = True
        try:
            first = await subscription.fetch(1, timeout=self.fetch_timeout_s)
        finally:
            self._waiting = False
        try:
            return first + await subscription.fetch(self.batch_size - 1, timeout=DRAIN_TIMEOUT_S)
        except (TimeoutError, nats.errors.TimeoutError):
            return first

    async def process_batch(self, messages: Sequence[Msg]) -> list[ConsumeOutcome]:
        """Handle fetched messages in stream order in ONE unit of work, then ack them all.

        Malformed messages go to the DLQ first. If any handler raises, the whole transaction is rolled back and
        the messages are handled one by one (`process`), so a poison message is retried and dead-lettered alone
        while the others still land. Handlers must therefore tolerate being called again after a rollback.
        """
        good: list[tuple[int, Msg, Envelope, EventPayload]] = []
        outcomes: dict[int, ConsumeOutcome] = {}
        for index, msg in enumerate(messages):
            try:
                envelope, payload = self._parse(msg.data)
            except MalformedEvent as exc:
                await self._dead_letter(msg, delivery_of(msg), exc.reason, str(exc))
                outcomes[index] = ConsumeOutcome.DEAD_LETTERED
                continue
            good.append((index, msg, envelope, payload))
        await self._prepare_batch([(e, p) for _, _, e, p in good])
        try:
            duplicates = await self._handle_all([(e, p, m.headers) for _, m, e, p in good])
        except Exception:
            log.warning("%s: a batch of %d failed; handling its messages one by one", self.name, len(good))
            parsed = {id(m) for _, m, _, _ in good}  # Msg is unhashable: match by identity
            return [await self.process(msg) for msg in messages if id(msg) in parsed]
        await self._acknowledge([msg for _, msg, _, _ in good])
        for (index, _msg, envelope, _), duplicate in zip(good, duplicates, strict=True):
            outcome = ConsumeOutcome.DUPLICATE if duplicate else ConsumeOutcome.PROCESSED
            outcomes[index] = outcome
            EVENTS_CONSUMED.labels(self.name, envelope.type, outcome.value).inc()
        return [outcomes[i] for i in sorted(outcomes)]

    async def _prepare_batch(self, events: Sequence[tuple[Envelope, EventPayload]]) -> None:
        if self._prepare is None or not events:
            return
        try:
            await self._prepare(events)
        except Exception:
            # Preparing only gets ahead of the handler, which does the work anyway.
            log.exception("%s: preparing a batch of %d failed", self.name, len(events))

    async def _handle_all(
        self, events: Sequence[tuple[Envelope, EventPayload, dict[str, str] | None]]
    ) -> list[bool]:
        async with self._uow_factory() as uow:
            duplicates = await uow.inbox.seen_many(
                self.name, [envelope.event_id for envelope, _, _ in events]
            )
            fresh = [event for event, seen in zip(events, duplicates, strict=True) if not seen]
            await self._handle_fresh(fresh, uow)
            await uow.commit()
        return duplicates

    async def _handle_fresh(
        self, events: Sequence[tuple[Envelope, EventPayload, dict[str, str] | None]], uow: UnitOfWork
    ) -> None:
        if self._batch_handler is not None:
            if tracing_enabled():
                for envelope, _, headers in events:
                    with self._story(envelope, headers):
                        pass  # each event's consumption is still a span of its story; the work is done below
            if events:
                await self._batch_handler([(envelope, payload) for envelope, payload, _ in events], uow)
            return
        assert self._handler is not None
        for envelope, payload, headers in events:
            with self._story(envelope, headers):
                await self._handler(envelope, payload, uow)

    async def process(self, msg: Msg) -> ConsumeOutcome:
        """Handle one delivered message and settle it (ack, nak, or dead-letter and ack)."""
        delivery = delivery_of(msg)
        try:
            envelope, payload = self._parse(msg.data)
        except MalformedEvent as exc:
            log.warning("%s: dead-lettering malformed message on %s: %s", self.name, msg.subject, exc)
            await self._dead_letter(msg, delivery, exc.reason, str(exc))
            return ConsumeOutcome.DEAD_LETTERED
        try:
            with self._story(envelope, msg.headers):
                duplicate = await self._handle_once(envelope, payload)
        except Exception as exc:
            outcome = await self._retry_or_dead_letter(msg, delivery, envelope, exc)
            EVENTS_CONSUMED.labels(self.name, envelope.type, outcome.value).inc()
            return outcome
        await self._acknowledge([msg])
        outcome = ConsumeOutcome.DUPLICATE if duplicate else ConsumeOutcome.PROCESSED
        EVENTS_CONSUMED.labels(self.name, envelope.type, outcome.value).inc()
        return outcome

    async def _acknowledge(self, handled: Sequence[Msg]) -> None:
        if self._settle is not None:
            await self._settle(handled)
            return
        for msg in handled:
            await msg.ack()

    @contextlib.contextmanager
    def _story(self, envelope: Envelope, headers: dict[str, str] | None) -> Iterator[None]:
        """Logs carry the event's correlation id, and its handling is a span of the story's trace."""
        correlation = envelope.correlation_id
        with correlated(correlation):
            if not tracing_enabled():
                yield
                return
            with consuming(self.name, envelope.type, str(envelope.event_id), correlation, headers):
                yield

    async def _process_or_release(self, msg: Msg) -> None:
        """`process`, and if even settling failed (bus or DLQ down), release the message for a later retry."""
        try:
            await self.process(msg)
        except Exception:
            log.exception("%s: could not settle a message on %s; releasing it", self.name, msg.subject)
            with contextlib.suppress(Exception):
                await msg.nak(delay=self._retry_delay(delivery_of(msg).attempt))

    def _parse(self, data: bytes) -> tuple[Envelope, EventPayload]:
        return parse_message(data, self._payload_parser)

    async def _handle_once(self, envelope: Envelope, payload: EventPayload) -> bool:
        """Run the handler unless the inbox says this consumer already did; True for a duplicate."""
        async with self._uow_factory() as uow:
            if await uow.inbox.seen(self.name, envelope.event_id):
                return True
            if self._batch_handler is not None:
                await self._batch_handler([(envelope, payload)], uow)
            else:
                assert self._handler is not None
                await self._handler(envelope, payload, uow)
            await uow.commit()
        return False

    async def _retry_or_dead_letter(
        self, msg: Msg, delivery: Delivery, envelope: Envelope, error: Exception
    ) -> ConsumeOutcome:
        # An event is not poison because the database was away (a restart, a failover): it waits for it.
        if delivery.attempt >= self.max_deliver and not database_unreachable(error):
            log.error(
                "%s: %s %s failed %d times, dead-lettering",
                self.name, envelope.type, envelope.event_id, delivery.attempt, exc_info=error,
            )  # fmt: skip
            await self._dead_letter(
                msg, delivery, DeadLetterReason.HANDLER_FAILED, f"{type(error).__name__}: {error}"
            )
            return ConsumeOutcome.DEAD_LETTERED
        log.warning(
            "%s: %s %s failed (attempt %d of %d), will retry: %r",
            self.name, envelope.type, envelope.event_id, delivery.attempt, self.max_deliver, error,
        )  # fmt: skip
        await msg.nak(delay=self._retry_delay(delivery.attempt))
        return ConsumeOutcome.RETRYING

    async def _dead_letter(self, msg: Msg, delivery: Delivery, reason: DeadLetterReason, detail: str) -> None:
        if self._broker is None:
            raise RuntimeError(f"consumer {self.name} is not subscribed to a broker")
        await dead_letter(self._broker, self.name, msg, delivery, reason, detail)
        EVENTS_DEAD_LETTERED.labels(self.name, reason.value).inc()
        await msg.ack()

    @property
    def release_delay_s(self) -> float:
        """How long a message given back by a consumer that stops waits before it is delivered again: longer
        than the consumer's last pull request may wait on the server."""
        return 2 * self.fetch_timeout_s

    def _consumer_config(self, since: datetime | None = None) -> ConsumerConfig:
        return ConsumerConfig(
            durable_name=self.name,
            filter_subjects=self.subjects,
            deliver_policy=DeliverPolicy.ALL if since is None else DeliverPolicy.BY_START_TIME,
            opt_start_time=since,
            ack_policy=JsAckPolicy.EXPLICIT,
            ack_wait=self.ack_wait_s,
            max_deliver=-1,
            max_ack_pending=1000,
        )


def _replay_since() -> datetime:
    return datetime.now(UTC) - timedelta(seconds=redelivery_window_s())


def parse_message(
    data: bytes, payload_parser: Callable[[Envelope], EventPayload]
) -> tuple[Envelope, EventPayload]:
    """The envelope and typed payload of a message's bytes; raises MalformedEvent (the dead-letter reason and
    the first problem) for anything that is not one of the catalogue's events, and nothing else."""
    try:
        envelope = Envelope.from_bytes(data)
    except ValidationError as exc:
        raise MalformedEvent(DeadLetterReason.MALFORMED_ENVELOPE, _first_error(exc)) from exc
    try:
        EventType(envelope.type)
    except ValueError as exc:
        raise MalformedEvent(DeadLetterReason.UNKNOWN_EVENT_TYPE, envelope.type) from exc
    try:
        return envelope, payload_parser(envelope)
    except UnknownSchemaVersion as exc:
        raise MalformedEvent(DeadLetterReason.UNKNOWN_SCHEMA_VERSION, str(exc)) from exc
    except ValidationError as exc:
        raise MalformedEvent(DeadLetterReason.INVALID_PAYLOAD, _first_error(exc)) from exc
    except KeyError as exc:
        raise MalformedEvent(
            DeadLetterReason.INVALID_PAYLOAD, f"no payload model for {envelope.type}"
        ) from exc


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    return f"{location}: {first['msg']}" if location else str(first["msg"])
