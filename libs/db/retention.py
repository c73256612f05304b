"""Retention of the audit log: explicit (`podway gc --older-than`), never silent."""

from __future__ import annotations

from datetime import datetime

from libs.db.ports import UnitOfWork
from libs.db.records import RetentionReport


async def delete_events_older_than(uow: UnitOfWork, cutoff: datetime) -> RetentionReport:
    """Retention (`podway gc --older-than`): delete audit events, published outbox rows and inbox marks older
    than `cutoff`, commit, and say how many of each went. Never runs on its own."""
    report = RetentionReport(
        events=await uow.events.delete_older_than(cutoff),
        outbox=await uow.outbox.delete_published_before(cutoff),
        inbox=await uow.inbox.delete_older_than(cutoff),
    )
    await uow.commit()
    return report
