"""Leases with fencing epochs: one active replica per leased service, and no writes from a deposed one.

The epoch changes exactly when a lease is (re)acquired after it lapsed. Leased writers carry their epoch and
call `assert_epoch` in the same transaction as their writes; on PostgreSQL it locks the lease row
(`SELECT ... FOR UPDATE`) so a takeover cannot commit between the check and the write. On SQLite every
transaction holds the database write lock from BEGIN (IMMEDIATE), which gives the same guarantee.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.errors import StaleEpochError
from libs.db.records import Fence, Lease
from libs.db.repositories._sql import insert_ignoring_duplicates, rowcount
from libs.db.schema import leases


async def acquire_or_renew(
    session: AsyncSession, name: str, holder: str, now: datetime, ttl: timedelta
) -> Lease | None:
    """Take the lease (new, or lapsed: epoch + 1) or renew it if `holder` still has it; None if someone else
    holds it. Commit the session for the result to count."""
    current = await _get(session, name, for_update=True)
    if current is None:
        return await _create(session, name, holder, now, ttl)
    if current.expires_at > now:
        if current.holder != holder:
            return None
        return await _compare_and_set(session, current, holder=holder, epoch=current.epoch, now=now, ttl=ttl)
    return await _compare_and_set(session, current, holder=holder, epoch=current.epoch + 1, now=now, ttl=ttl)


async def assert_epoch(session: AsyncSession, name: str, epoch: int) -> None:
    """Raise StaleEpochError unless lease `name` is at `epoch`; locks the lease row until the transaction ends."""
    query = select(leases.c.epoch).where(leases.c.name == name).with_for_update()
    current = (await session.execute(query)).scalar_one_or_none()
    if current != epoch:
        raise StaleEpochError(f"lease {name} is at epoch {current}, not {epoch}")


async def release(session: AsyncSession, name: str, holder: str, now: datetime) -> None:
    """Let the lease lapse now if `holder` has it, so a standby takes over without waiting for the TTL."""
    await session.execute(
        update(leases).where(leases.c.name == name, leases.c.holder == holder).values(expires_at=now)
    )


class SqlAlchemyLeaseRepository:
    """The `leases` table, for a unit of work."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session
        self.renewed: Fence | None = None
        """The fence this transaction renewed the lease under: its epoch is verified and its row locked."""

    async def acquire_or_renew(self, name: str, holder: str, now: datetime, ttl: timedelta) -> Lease | None:
        """See `acquire_or_renew`."""
        lease = await acquire_or_renew(self._session, name, holder, now, ttl)
        if lease is not None:
            self.renewed = lease.fence
        return lease

    async def renew(self, fence: Fence, holder: str, now: datetime, ttl: timedelta) -> Lease | None:
        """Extend a lease `holder` holds, unexpired, at the fence's epoch, in one statement; None otherwise
        (lapsed, or taken: `acquire_or_renew` tells which)."""
        expires_at = now + ttl
        result = await self._session.execute(
            update(leases)
            .where(
                leases.c.name == fence.lease,
                leases.c.epoch == fence.epoch,
                leases.c.holder == holder,
                leases.c.expires_at > now,
            )
            .values(expires_at=expires_at)
        )
        if rowcount(result) != 1:
            return None
        self.renewed = fence
        return Lease(name=fence.lease, holder=holder, epoch=fence.epoch, expires_at=expires_at)

    async def release(self, name: str, holder: str, now: datetime) -> None:
        """See `release`."""
        await release(self._session, name, holder, now)

    async def get(self, name: str) -> Lease | None:
        """The lease as stored, expired or not."""
        return await _get(self._session, name, for_update=False)

    async def assert_epoch(self, fence: Fence) -> None:
        """See `assert_epoch`."""
        await assert_epoch(self._session, fence.lease, fence.epoch)


async def _get(session: AsyncSession, name: str, *, for_update: bool) -> Lease | None:
    query = select(leases).where(leases.c.name == name)
    if for_update:
        query = query.with_for_update()
    row = (await session.execute(query)).first()
    return _to_lease(row) if row else None


async def _create(
    session: AsyncSession, name: str, holder: str, now: datetime, ttl: timedelta
) -> Lease | None:
    values = {"name": name, "holder": holder, "epoch": 1, "expires_at": now + ttl, "acquired_at": now}
    result = await session.execute(insert_ignoring_duplicates(session, leases, values))
    if rowcount(result) != 1:
        return None  # another replica created it first
    return Lease(name=name, holder=holder, epoch=1, expires_at=now + ttl)


async def _compare_and_set(
    session: AsyncSession, current: Lease, *, holder: str, epoch: int, now: datetime, ttl: timedelta
) -> Lease | None:
    values: dict[str, Any] = {"holder": holder, "epoch": epoch, "expires_at": now + ttl}
    if epoch != current.epoch:
        values["acquired_at"] = now
    result = await session.execute(
        update(leases).where(leases.c.name == current.name, leases.c.epoch == current.epoch).values(values)
    )
    if rowcount(result) != 1:
        return None
    return Lease(name=current.name, holder=holder, epoch=epoch, expires_at=now + ttl)


def _to_lease(row: Row[Any]) -> Lease:
    return Lease(name=row.name, holder=row.holder, epoch=row.epoch, expires_at=row.expires_at)
