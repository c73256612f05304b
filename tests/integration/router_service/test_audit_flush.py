"""The audit group commit on a real database: a flush retried after its commit's acknowledgement was lost
writes each event once and goes on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from libs.db.uow import SqlAlchemyUnitOfWork
from libs.router import EventBuffer
from services.llm_router.audit import AuditFlusher
from tests.support import AcknowledgementLost
from tests.unit.router_service.test_audit import completed, failover


async def test_a_flush_retried_after_a_lost_commit_acknowledgement_writes_each_event_once(
    uow_factory: Callable[[], SqlAlchemyUnitOfWork],
):
    buffer = EventBuffer()
    flusher = AuditFlusher(buffer, AcknowledgementLost(uow_factory))
    buffer(failover("req-1"))
    buffer(completed("req-1"))
    with pytest.raises(ConnectionResetError):
        await flusher.flush()

    buffer(completed("req-2"))
    assert await flusher.flush() == 3, "the retry carries the batch in doubt and what came after it"
    assert await flusher.flush() == 0
    async with uow_factory() as uow:
        first = await uow.events.by_correlation("req-1")
        second = await uow.events.by_correlation("req-2")
    assert [e.envelope.type for e in first] == ["router.failover", "inference.completed"]
    assert [e.envelope.type for e in second] == ["inference.completed"]
    assert flusher.dropped == 0
