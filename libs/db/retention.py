"""Retention of the audit log and the bus plumbing (libs/core/retention.py says how long each is kept): run by
admission on a schedule, one replica at a time, and by `podway gc` on demand."""

from __future__ import annotations

from datetime import datetime, timedelta

from libs.core.retention import Horizons
from libs.db.ports import UnitOfWork
from libs.db.records import RetentionReport

RETENTION_LEASE = "retention"


async def prune(uow: UnitOfWork, horizons: Horizons) -> RetentionReport:
    """Delete audit events, published outbox rows, inbox marks and the tombstones of deleted objects past
    their horizons, commit, and say how many of each went."""
    report = RetentionReport(
        events=await uow.events.delete_older_than(horizons.events),
        outbox=await uow.outbox.delete_published_before(horizons.outbox),
        inbox=await uow.inbox.delete_older_than(horizons.inbox),
        tombstones=(
            await uow.revisions.compact_deleted_before(horizons.tombstones) if horizons.tombstones else 0
        ),
    )
    await uow.commit()
    return report


async def prune_if_leader(
    uow: UnitOfWork, horizons: Horizons, *, holder: str, now: datetime, lease: timedelta
) -> RetentionReport | None:
    """Prune under the `retention` lease, taken or renewed in the same transaction (its row stays locked until
    the commit, so two replicas never prune at once); None, with nothing done, while another replica holds it."""
    if await uow.leases.acquire_or_renew(RETENTION_LEASE, holder, now, lease) is None:
        await uow.rollback()
        return None
    return await prune(uow, horizons)
