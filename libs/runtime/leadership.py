"""Leader election on the fenced lease row: one active scheduler, standbys take over when it lapses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from libs.db.engine import create_engine, create_session_factory
from libs.db.ports import UnitOfWorkFactory
from libs.db.records import Fence, Lease
from libs.db.uow import unit_of_work_factory
from libs.runtime.clock import Clock
from libs.runtime.shutdown import STOP_STEP_TIMEOUT_S, bounded

log = logging.getLogger(__name__)

RETRY_AFTER_FAILURE_S = 0.5
"""A renewal that failed (the database refused a transaction or was away) is tried again this soon."""


class _RenewalFailed(Exception):
    """The attempt got no answer from the database: neither renewed nor refused."""


class LeaderElector:
    """Holds lease `name` for `holder`: takes it when it is free or has lapsed, renews it every third of
    its length, and reports each change: `on_elected(fence)` must return promptly (start work in a task),
    `on_deposed()` must stop every write at once. A renewal that is refused deposes this replica; one that
    fails (the database is locked, restarting, away) is tried again every `RETRY_AFTER_FAILURE_S` while the
    lease is known valid, as client-go's leader election retries until its renew deadline; only when none
    succeeded before the lease would lapse (by this process's monotonic clock, counted from when the last
    successful renewal was sent) is this replica deposed.
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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._uow_factory = uow_factory
        self._monotonic = monotonic
        self._retry_soon = False
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self._clock = clock
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self.fence: Fence | None = None
        self.renew_every_s = ttl.total_seconds() / 3
        self.retry_every_s = ttl.total_seconds() / 3
        self._valid_until = 0.0

    @property
    def leading(self) -> bool:
        return self.fence is not None

    async def run(self) -> None:
        """Elect and renew until cancelled."""
        while True:
            await self.tick()
            if self._retry_soon:
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            else:
                await asyncio.sleep(self.renew_every_s if self.leading else self.retry_every_s)

    async def tick(self) -> None:
        """One attempt: take or renew the lease, and report what changed."""
        try:
            lease = await self._try()
        except _RenewalFailed:
            self._retry_soon = self.leading
            if self.leading and self._monotonic() < self._valid_until:
                return  # still valid: keep leading, try again soon
            lease = None
        else:
            self._retry_soon = False
        await self._settle(lease)

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
        sent = self._monotonic()
        if not self.leading:
            self._valid_until = sent + self.ttl.total_seconds()
        attempt = asyncio.ensure_future(self._acquire_or_renew())
        # Wait as long as the lease is known to be valid: a write that renews it meanwhile (and holds the
        # lease row, so this attempt waits for it) extends the wait.
        while not attempt.done():
            remaining = self._valid_until - self._monotonic()
            if remaining <= 0:
                attempt.cancel()
                log.warning("lease %s: no answer before the lease would lapse", self.name)
                return None
            await asyncio.wait({attempt}, timeout=remaining)
        try:
            lease = attempt.result()
        except Exception as exc:
            log.warning("lease %s: acquire or renew failed: %r", self.name, exc)
            raise _RenewalFailed() from exc
        if lease is not None:
            self._valid_until = max(self._valid_until, sent + self.ttl.total_seconds())
        return lease

    async def _acquire_or_renew(self) -> Lease | None:
        async with self._uow_factory() as uow:
            lease = await uow.leases.acquire_or_renew(self.name, self.holder, self._clock(), self.ttl)
            await uow.commit()
            return lease

    def renewed(self, lease: Lease, sent: float) -> None:
        """The lease was renewed elsewhere (in a write transaction sent at monotonic time `sent`)."""
        if self.fence is not None and lease.epoch == self.fence.epoch:
            self._valid_until = max(self._valid_until, sent + self.ttl.total_seconds())

    def forget(self) -> None:
        """Stop counting as leader without the deposed callback (the service already stopped)."""
        self.fence = None

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


class LeaseThread:
    """A `LeaderElector` on a thread of its own, with its own event loop and database engine, so that
    renewals keep time however long the service's loop is busy (building a large world, decoding a big
    read). Leadership changes are handed to the service's loop and awaited there.
    """

    def __init__(
        self,
        database_url: str,
        *,
        name: str,
        holder: str,
        ttl: timedelta,
        clock: Clock,
        on_elected: Callable[[Fence], Awaitable[None]],
        on_deposed: Callable[[], Awaitable[None]],
    ) -> None:
        self._database_url = database_url
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self._clock = clock
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self.renew_every_s = ttl.total_seconds() / 3
        self._elector: LeaderElector | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._service_loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"lease-{name}", daemon=True)

    @property
    def fence(self) -> Fence | None:
        return self._elector.fence if self._elector is not None else None

    async def start(self) -> None:
        self._service_loop = asyncio.get_running_loop()
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)

    async def stop(self, *, release: bool) -> None:
        """Stop electing; with `release`, let the lease lapse now so a standby takes over at once."""
        if not self._thread.is_alive():
            return
        if release:
            await bounded(self._in_thread(self._step_down()), "stepping down", service=self.name)
        if self._loop is not None and self._task is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the thread's loop closed in between
                self._loop.call_soon_threadsafe(self._task.cancel)
        # A daemon thread: if its loop is stuck on a dead database, leave it behind rather than hang.
        await asyncio.to_thread(self._thread.join, STOP_STEP_TIMEOUT_S)
        if self._thread.is_alive():
            log.warning("lease %s thread did not stop in %.0f s; left behind", self.name, STOP_STEP_TIMEOUT_S)

    def renewed(self, lease: Lease, sent: float) -> None:
        """A write transaction renewed the lease (see `LeaderElector.renewed`)."""
        if self._loop is not None and self._elector is not None:
            self._loop.call_soon_threadsafe(self._elector.renewed, lease, sent)

    def forget(self) -> None:
        """The service found its epoch stale: lead again only after a fresh election."""
        if self._loop is not None and self._elector is not None:
            self._loop.call_soon_threadsafe(self._elector.forget)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        engine = create_engine(self._database_url)
        try:
            self._elector = LeaderElector(
                unit_of_work_factory(create_session_factory(engine), clock=self._clock),
                name=self.name,
                holder=self.holder,
                ttl=self.ttl,
                clock=self._clock,
                on_elected=lambda fence: self._in_service(self._on_elected(fence)),
                on_deposed=lambda: self._in_service(self._on_deposed()),
            )
            self._ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._elector.run()
        finally:
            self._ready.set()
            await engine.dispose()

    async def _step_down(self) -> None:
        if self._elector is not None:
            await self._elector.step_down()

    async def _in_service(self, coroutine: Awaitable[None]) -> None:
        assert self._service_loop is not None
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_run(coroutine), self._service_loop))

    async def _in_thread(self, coroutine: Awaitable[None]) -> None:
        assert self._loop is not None
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_run(coroutine), self._loop))


async def _run(coroutine: Awaitable[None]) -> None:
    await coroutine
