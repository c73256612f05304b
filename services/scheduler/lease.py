"""Leader election on the fenced lease row: one active scheduler, standbys take over when it lapses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from libs.db.ports import Clock, UnitOfWorkFactory
from libs.db.records import Fence, Lease

log = logging.getLogger(__name__)


class LeaderElector:
    """Holds lease `name` for `holder`: takes it when it is free or has lapsed, renews it every third of
    its length, and reports each change: `on_elected(fence)` must return promptly (start work in a task),
    `on_deposed()` must stop every write at once. A renewal that fails, is refused or does not answer
    before the lease would lapse deposes this replica.
    """

    def __init__(
        self,
        uow_factory: UnitOfWorkFactory,
        *,
        name: str,
        holder: str,
        ttl: timedelta,
        clock: Clock,
        on_elected: Callable[[Fence], Awaitable[None]],
        on_deposed: Callable[[], Awaitable[None]],
    ) -> None:
        self._uow_factory = uow_factory
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self._clock = clock
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self.fence: Fence | None = None
        self.renew_every_s = ttl.total_seconds() / 3
        self.retry_every_s = ttl.total_seconds() / 3

    @property
    def leading(self) -> bool:
        return self.fence is not None

    async def run(self) -> None:
        """Elect and renew until cancelled."""
        while True:
            lease = await self._try()
            await self._settle(lease)
            await asyncio.sleep(self.renew_every_s if self.leading else self.retry_every_s)

    async def step_down(self) -> None:
        """Stop leading and let the lease lapse now, so a standby takes over without waiting."""
        if self.fence is None:
            return
        await self._depose()
        with contextlib.suppress(Exception):
            async with self._uow_factory() as uow:
                await uow.leases.release(self.name, self.holder, self._clock())
                await uow.commit()

    async def _try(self) -> Lease | None:
        try:
            async with asyncio.timeout(self.renew_every_s * 2):
                async with self._uow_factory() as uow:
                    lease = await uow.leases.acquire_or_renew(self.name, self.holder, self._clock(), self.ttl)
                    await uow.commit()
                    return lease
        except Exception as exc:
            log.warning("lease %s: acquire or renew failed: %r", self.name, exc)
            return None

    async def _settle(self, lease: Lease | None) -> None:
        if lease is None:
            if self.fence is not None:
                log.warning("lease %s lost at epoch %d; stopping", self.name, self.fence.epoch)
                await self._depose()
            return
        if self.fence is not None and self.fence.epoch == lease.epoch:
            return
        if self.fence is not None:
            # The lease lapsed and was taken again: someone may have led in between.
            await self._depose()
        self.fence = lease.fence
        log.info("lease %s acquired at epoch %d by %s", self.name, lease.epoch, self.holder)
        await self._on_elected(lease.fence)

    async def _depose(self) -> None:
        self.fence = None
        await self._on_deposed()
