"""Device allocations of ResourceClaims: the database refuses a second holder of an exclusive device and a
share beyond a shareable device's capacity (both raise ConflictError; the transaction is then lost)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.errors import ConflictError
from libs.db.records import DeviceHold, DeviceShare
from libs.db.repositories._sql import insert_ignoring_duplicates
from libs.db.schema import device_allocations, device_capacity


class SqlAlchemyDeviceAllocationRepository:
    """The `device_allocations` and `device_capacity` tables."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def hold(self, holds: Sequence[tuple[str, DeviceHold]], shares: Sequence[DeviceShare]) -> None:
        """Record claims' devices (`(claim, hold)` pairs) and consume their shares, in a few statements;
        ConflictError when an exclusive device is held already or a share does not fit what is left."""
        try:
            if holds:
                await self._session.execute(
                    device_allocations.insert(),
                    [
                        {
                            "claim": claim,
                            "device": hold.device,
                            "request": hold.request,
                            "exclusive": hold.exclusive,
                        }
                        for claim, hold in holds
                    ],
                )
            for share in shares:
                values = {"device": share.device, "name": share.name, "total": share.total, "consumed": 0}
                await self._session.execute(
                    insert_ignoring_duplicates(self._session, device_capacity, values)
                )
                await self._session.execute(
                    update(device_capacity)
                    .where(device_capacity.c.device == share.device, device_capacity.c.name == share.name)
                    .values(consumed=device_capacity.c.consumed + share.amount)
                )
        except IntegrityError as error:
            claims = sorted({claim for claim, _ in holds})
            raise ConflictError(
                f"ResourceClaims {', '.join(claims)}: a device is taken or short of capacity"
            ) from error

    async def release(self, claims: Sequence[str], shares: Sequence[DeviceShare]) -> None:
        """Forget claims' devices and give their shares back."""
        if claims:
            await self._session.execute(
                delete(device_allocations).where(device_allocations.c.claim.in_(list(claims)))
            )
        for share in shares:
            await self._session.execute(
                update(device_capacity)
                .where(device_capacity.c.device == share.device, device_capacity.c.name == share.name)
                .values(consumed=device_capacity.c.consumed - share.amount)
            )

    async def rows(self) -> list[tuple[str, str, bool]]:
        """Every device held: `(claim, device, exclusive)`, by claim and device."""
        result = await self._session.execute(
            select(
                device_allocations.c.claim, device_allocations.c.device, device_allocations.c.exclusive
            ).order_by(device_allocations.c.claim, device_allocations.c.device)
        )
        return [(claim, device, bool(exclusive)) for claim, device, exclusive in result]

    async def forget(self, rows: Sequence[tuple[str, str]]) -> None:
        """Delete device rows `(claim, device)` (no share is given back: see `set_consumed`)."""
        for start in range(0, len(rows), 500):
            chunk = list(rows[start : start + 500])
            await self._session.execute(
                delete(device_allocations).where(
                    tuple_(device_allocations.c.claim, device_allocations.c.device).in_(chunk)
                )
            )

    async def set_consumed(self, consumed: Sequence[tuple[str, str, int]]) -> None:
        """Set the consumed capacity of shareable devices: `(device, capacity, consumed)`."""
        for device, name, amount in consumed:
            await self._session.execute(
                update(device_capacity)
                .where(device_capacity.c.device == device, device_capacity.c.name == name)
                .values(consumed=amount)
            )

    async def holders(self, device: str) -> list[str]:
        """The claims holding a device, by name."""
        rows = await self._session.execute(
            select(device_allocations.c.claim)
            .where(device_allocations.c.device == device)
            .order_by(device_allocations.c.claim)
        )
        return list(rows.scalars())

    async def consumed(self, device: str, name: str) -> int:
        """How much of a shareable device's capacity its shares consume (milli-units)."""
        row = await self._session.execute(
            select(device_capacity.c.consumed).where(
                device_capacity.c.device == device, device_capacity.c.name == name
            )
        )
        return int(row.scalar() or 0)
