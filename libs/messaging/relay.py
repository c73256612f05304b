"""The outbox relay: publishes committed events to JetStream in order, exactly once in the stream."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.api import PubAck

from libs.db.ports import Clock, UnitOfWorkFactory, utc_now
from libs.db.records import OutboxMessage
from libs.events.catalogue import EVENTS_STREAM
from libs.messaging.publisher import MSG_ID_HEADER

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RelayPass:
    """What one pass over the outbox did."""

    published: int
    duplicates: int
    failed: int = 0


class OutboxRelay:
    """Reads unpublished outbox rows in `seq` order, publishes each with `Nats-Msg-Id = event_id`, awaits the
    PubAcks, and marks the acknowledged rows published.

    One pass is one transaction: the rows are locked while they are published (PostgreSQL `FOR UPDATE`, the
    SQLite write lock), so relays in several processes take turns and keep `seq` order. A relay that dies after
    publishing and before marking leaves the rows unpublished; the next pass publishes them again and JetStream
    drops the duplicates (same Msg-Id within the stream's duplicate window), so each event is in the stream once.
    Publishes within a pass are pipelined: sent in order, acknowledgements awaited together. After a failed
    publish the failed rows are retried on the next pass, possibly after later rows of the same pass.
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
        clock: Clock = utc_now,
    ) -> None:
        self._uow_factory = uow_factory
        self._js = js
        self._batch = batch
        self._poll_interval_s = poll_interval_s
        self._ack_timeout_s = ack_timeout_s
        self._error_backoff_s = error_backoff_s
        self._clock = clock
        self._kicked = asyncio.Event()

    def kick(self) -> None:
        """Publish soon: pass this as the unit of work's `after_commit`."""
        self._kicked.set()

    async def publish_pending(self) -> RelayPass:
        """One pass: publish up to `batch` unpublished events and mark those JetStream acknowledged."""
        async with self._uow_factory() as uow:
            messages = await uow.outbox.unpublished(self._batch)
            if not messages:
                return RelayPass(published=0, duplicates=0)
            acks = await self._publish(messages)
            acked = [m.seq for m, ack in zip(messages, acks, strict=True) if isinstance(ack, PubAck)]
            await uow.outbox.mark_published(acked, self._clock())
            await uow.commit()
        duplicates = sum(1 for ack in acks if isinstance(ack, PubAck) and ack.duplicate)
        failed = len(messages) - len(acked)
        if failed:
            log.warning("outbox relay: %d of %d publishes failed; retrying next pass", failed, len(messages))
        return RelayPass(published=len(acked), duplicates=duplicates, failed=failed)

    async def run(self) -> None:
        """Relay until cancelled: a pass on every kick, and every `poll_interval_s` for other processes' rows."""
        while True:
            self._kicked.clear()
            try:
                done = await self.publish_pending()
            except Exception:
                log.exception("outbox relay pass failed")
                await asyncio.sleep(self._error_backoff_s)
                continue
            if done.failed:
                await asyncio.sleep(self._error_backoff_s)
            elif done.published + done.failed < self._batch:
                await self._wait_for_kick()

    async def _wait_for_kick(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._kicked.wait(), self._poll_interval_s)

    async def _publish(self, messages: Sequence[OutboxMessage]) -> list[PubAck | BaseException]:
        futures = []
        for message in messages:  # sent in seq order; JetStream stores them in arrival order
            futures.append(
                await self._js.publish_async(
                    message.subject,
                    message.data,
                    stream=EVENTS_STREAM,
                    headers={MSG_ID_HEADER: str(message.event_id)},
                )
            )
        try:
            async with asyncio.timeout(self._ack_timeout_s):
                return await asyncio.gather(*futures, return_exceptions=True)
        except TimeoutError:
            for future in futures:
                future.cancel()
            return [_result_or_error(future) for future in futures]


def _result_or_error(future: asyncio.Future[PubAck]) -> PubAck | BaseException:
    if future.cancelled():
        return TimeoutError("no PubAck before the deadline")
    return future.exception() or future.result()
