"""The outbox relay: publishes committed events to JetStream, each exactly once in the stream.

Order: each process's relay publishes the events its own process committed, in that process's commit order
(and so, since one process emits an aggregate's events of one kind of work, in order per aggregate and
producer). There is no global commit order in the stream: relays of different processes publish at once and
their events interleave in the order they reach NATS, so a row with a smaller `seq` committed elsewhere may
be in the stream after one with a larger `seq`. Across processes, only causality holds: an event caused by
a consumed event is published after its cause, which was already in the stream."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from nats.js import JetStreamContext
from nats.js.api import PubAck

from libs.db.ports import UnitOfWorkFactory
from libs.db.records import OutboxMessage
from libs.events.catalogue import EVENTS_STREAM
from libs.messaging.broker import UserJetStream
from libs.messaging.permissions import emitted_subjects
from libs.messaging.publisher import MSG_ID_HEADER
from libs.runtime.clock import Clock, utc_now
from libs.runtime.metrics import RELAY_FAILED, RELAY_PUBLISHED, RELAYS
from libs.runtime.tracing import record_published, tracing_enabled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RelayPass:
    """What one pass over the outbox did."""

    published: int
    duplicates: int
    failed: int = 0


PUBLISHES_PER_SLICE = 16
"""Messages sent between two yields to the event loop: a batch of hundreds takes milliseconds to send."""

MARK_DELAY_S = 0.25
"""How long the fast path lets published rows wait to be marked, so that one transaction marks many batches.
Well inside the poll path's hand-off grace, so a row is never published twice for being marked late; a
crash in between republishes it under the same Nats-Msg-Id, which JetStream drops as a duplicate."""


MARK_STOP_WAIT_S = 10.0
"""How long a stopping relay waits for its mark's transaction to end."""


class OutboxRelay:
    """Publishes outbox rows with `Nats-Msg-Id = event_id`, awaits the PubAcks, and marks the acknowledged
    rows published. The order it keeps is its own process's commit order, not a global one (see the module).

    Fast path: rows this process just committed are handed over by the unit of work (`kick(committed)`) and
    published at once from memory, without a locking read, then marked in a short transaction. Each batch
    goes out in `seq` order, and `seq` is commit order within the process (see `append`), so one process's
    events keep their order; relays of other processes publish theirs at the same time, so the stream
    interleaves processes in arrival order. Publishes within a batch are pipelined: sent in order,
    acknowledgements awaited together. A row whose publish failed is retried by a later polling pass,
    possibly after later rows: a failure is the one case where a process's own order is not kept.

    Polling pass: one transaction that locks the oldest unpublished rows (PostgreSQL `FOR UPDATE`, the SQLite
    write lock) while it publishes them, so polling relays never publish the same row at once. It runs every
    `poll_interval_s` for rows that a crashed or failing process left behind, leaving alone rows younger than
    `handoff_grace_s`: those are their own process's to publish, and taking them would lock rows that process
    is about to mark and publish them twice. A relay that dies after publishing and before marking leaves the
    rows unpublished; a pass publishes them again and JetStream drops the duplicates (same Msg-Id within the
    stream's duplicate window), so each event is in the stream once; a relay elsewhere that publishes a row
    first (or again) is harmless for the same reason.

    The outbox is shared by every service, but a service's NATS user may publish its own events only: polling
    passes take only rows on the subjects of the events the NATS user of `js` emits (`permissions.USERS`), or
    every row when it connected as no user (the embedded server).
    """

    def __init__(
        self,
        uow_factory: UnitOfWorkFactory,
        js: JetStreamContext,
        *,
        batch: int = 256,
        poll_interval_s: float = 0.25,
        ack_timeout_s: float = 2.0,
        error_backoff_s: float = 1.0,
        handoff_grace_s: float = 2.0,
        clock: Clock = utc_now,
        snapshot: UnitOfWorkFactory | None = None,
    ) -> None:
        self._uow_factory = uow_factory
        self._snapshot = snapshot
        self._js = js
        self._subjects = emitted_subjects(js.user if isinstance(js, UserJetStream) else None)
        self._batch = batch
        self._poll_interval_s = poll_interval_s
        self._ack_timeout_s = ack_timeout_s
        self._error_backoff_s = error_backoff_s
        self._clock = clock
        self._kicked = asyncio.Event()
        self._handoff_grace = timedelta(seconds=handoff_grace_s)
        self._committed: list[OutboxMessage] = []
        self._polled_at = -math.inf
        self._asked_to_poll = False
        self._unmarked: list[int] = []
        self._unmarked_since = 0.0
        self._marking: asyncio.Task[None] | None = None
        RELAYS.relays.add(self)

    def backlog(self) -> tuple[int, float | None]:
        """(rows handed over and not yet published, wall time the oldest was committed): the relay's lag."""
        committed = self._committed
        if not committed:
            return 0, None
        return len(committed), min(m.created_at for m in committed).timestamp()

    def kick(self, committed: Sequence[OutboxMessage] = ()) -> None:
        """Publish soon (`committed`: rows just committed, published without reading them back): pass this as
        the unit of work's `after_commit`."""
        self._committed.extend(committed)
        self._asked_to_poll = self._asked_to_poll or not committed
        self._kicked.set()

    async def publish_committed(self, *, mark_now: bool = True) -> RelayPass:
        """Publish the rows handed over by `kick` (up to `batch`, in seq order) and mark those acknowledged:
        at once, or with `mark_now=False` later, many batches in one transaction (`mark_published`)."""
        self._committed.sort(key=lambda m: m.seq)
        messages, self._committed = self._committed[: self._batch], self._committed[self._batch :]
        if not messages:
            return RelayPass(published=0, duplicates=0)
        acks = await self._publish(messages)
        acked = [m.seq for m, ack in zip(messages, acks, strict=True) if isinstance(ack, PubAck)]
        if not self._unmarked:
            self._unmarked_since = time.monotonic()
        self._unmarked.extend(acked)
        if mark_now or len(self._unmarked) >= self._batch:
            await self.mark_published()
        return _outcome(messages, acks, len(acked))

    async def mark_published(self) -> None:
        """Mark the rows published since the last mark. Rows never marked (a crash in between) are published
        again by a polling pass after the grace period, and JetStream drops the copies (same Msg-Id)."""
        seqs, self._unmarked = self._unmarked, []
        if not seqs:
            return
        try:
            async with self._uow_factory() as uow:
                await uow.outbox.mark_published(seqs, self._clock())
                await uow.commit()
        except BaseException:
            self._unmarked[:0] = seqs
            raise

    async def publish_pending(self, *, created_before: datetime | None = None) -> RelayPass:
        """One pass: publish up to `batch` unpublished events (created before `created_before`, if given) and
        mark those JetStream acknowledged. With a `snapshot`, a read that takes no lock first asks whether
        there is any: on SQLite, a pass that finds nothing then never queues for the database lock."""
        if self._snapshot is not None:
            async with self._snapshot() as snapshot:
                if not await snapshot.outbox.any_unpublished(
                    created_before=created_before, subjects=self._subjects
                ):
                    return RelayPass(published=0, duplicates=0)
        async with self._uow_factory() as uow:
            messages = await uow.outbox.unpublished(
                self._batch, created_before=created_before, subjects=self._subjects
            )
            if not messages:
                return RelayPass(published=0, duplicates=0)
            acks = await self._publish(messages)
            acked = [m.seq for m, ack in zip(messages, acks, strict=True) if isinstance(ack, PubAck)]
            await uow.outbox.mark_published(acked, self._clock())
            await uow.commit()
        if self._committed:  # handed over too, and published by this pass: no need to send them again
            done = set(acked)
            self._committed = [m for m in self._committed if m.seq not in done]
        return _outcome(messages, acks, len(acked))

    async def run(self) -> None:
        """Relay until cancelled: handed-over rows at once, and a polling pass every `poll_interval_s` (or
        on a kick without rows) for rows no fast path published. Marking runs beside publishing: rows
        committed meanwhile go out while the mark waits for the database lock."""
        try:
            await self._relay()
        finally:
            if self._marking is not None:
                self._marking.cancel()
                # Its transaction ends (rolled back) before the relay is done: no connection left in use; but
                # a stop waits a bounded time for it (a database that does not answer must not keep a service
                # from stopping: the rows stay unmarked and are marked again, idempotently, later).
                done, _ = await asyncio.wait({self._marking}, timeout=MARK_STOP_WAIT_S)
                if not done:
                    log.warning("outbox relay stopped with its mark's transaction still open")
                elif not self._marking.cancelled():
                    with contextlib.suppress(Exception):
                        self._marking.result()

    async def _relay(self) -> None:
        backlog = False  # the last polling pass filled its batch: go on polling at once
        while True:
            self._kicked.clear()
            now = time.monotonic()
            wait_s = self._polled_at + self._poll_interval_s - now
            polling = backlog or self._asked_to_poll or wait_s <= 0
            marking = self._marking is not None and not self._marking.done()
            due = self._unmarked and not marking
            mark_in_s = self._unmarked_since + MARK_DELAY_S - now if due else math.inf
            if not polling and not self._committed and mark_in_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._kicked.wait(), min(wait_s, mark_in_s))
                continue
            try:
                if mark_in_s <= 0 or (polling and due):
                    self._marking = asyncio.create_task(self._mark_beside(), name="outbox-marks")
                    continue
                if polling:
                    self._polled_at = time.monotonic()
                    asked, self._asked_to_poll = self._asked_to_poll, False
                    done = await self.publish_pending(
                        created_before=None if asked else self._clock() - self._handoff_grace
                    )
                    backlog = done.published + done.failed >= self._batch
                else:
                    done = await self.publish_committed(mark_now=False)
            except Exception:
                log.exception("outbox relay pass failed")
                await asyncio.sleep(self._error_backoff_s)
                continue
            if done.failed:
                await asyncio.sleep(self._error_backoff_s)

    async def _mark_beside(self) -> None:
        try:
            await self.mark_published()
        except Exception:
            log.exception("marking published outbox rows failed")
            await asyncio.sleep(self._error_backoff_s)
        finally:
            self._kicked.set()  # rows left unmarked are due again

    async def _publish(self, messages: Sequence[OutboxMessage]) -> list[PubAck | BaseException]:
        futures = []
        traced = tracing_enabled()
        for position, message in enumerate(
            messages
        ):  # sent in seq order; JetStream stores them in that order
            if position and position % PUBLISHES_PER_SLICE == 0:
                await asyncio.sleep(0)  # let the process's other work run between slices of a large batch
            headers = {MSG_ID_HEADER: str(message.event_id)}
            if traced and (context := record_published(message.data)):
                headers |= context
            futures.append(
                await self._js.publish_async(
                    message.subject, message.data, stream=EVENTS_STREAM, headers=headers
                )
            )
        try:
            async with asyncio.timeout(self._ack_timeout_s):
                return await asyncio.gather(*futures, return_exceptions=True)
        except TimeoutError:
            for future in futures:
                future.cancel()
            return [_result_or_error(future) for future in futures]


def _outcome(
    messages: Sequence[OutboxMessage], acks: Sequence[PubAck | BaseException], acked: int
) -> RelayPass:
    duplicates = sum(1 for ack in acks if isinstance(ack, PubAck) and ack.duplicate)
    failed = len(messages) - acked
    RELAY_PUBLISHED.inc(acked)
    RELAY_FAILED.inc(failed)
    if failed:
        error = next((ack for ack in acks if isinstance(ack, BaseException)), None)
        log.warning(
            "outbox relay: %d of %d publishes failed; retrying next pass (%s: %s)",
            failed,
            len(messages),
            type(error).__name__,
            error,
        )
    return RelayPass(published=acked, duplicates=duplicates, failed=failed)


def _result_or_error(future: asyncio.Future[PubAck]) -> PubAck | BaseException:
    if future.cancelled():
        return TimeoutError("no PubAck before the deadline")
    return future.exception() or future.result()
