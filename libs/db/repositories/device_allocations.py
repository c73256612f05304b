"""Device allocations of ResourceClaims: the database refuses a second holder of an exclusive device and a
share beyond a shareable device's capacity (both raise ConflictError; the transaction is then lost)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select, update
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

    async def hold(self, claim: str, holds: Sequence[DeviceHold], shares: Sequence[DeviceShare]) -> None:
        """Record a claim's devices and consume its shares; ConflictError when an exclusive device is held
        already or a share does not fit what is left of a capacity."""
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
                        for hold in holds
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
            raise ConflictError(f"ResourceClaim {claim}: a device is taken or short of capacity") from error

    async def release(self, claim: str, shares: Sequence[DeviceShare]) -> None:
        """Forget a claim's devices and give its shares back."""
        await self._session.execute(delete(device_allocations).where(device_allocations.c.claim == claim))
        for share in shares:
            await self._session.execute(
                update(device_capacity)
                .where(device_capacity.c.device == share.device, device_capacity.c.name == share.name)
                .values(consumed=device_capacity.c.consumed - share.amount)
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
