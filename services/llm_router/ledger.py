"""Budgets and PT capacity shared by every router process: this process's leases (libs.core.routing.ledger)
topped up from the ledgers in the bus's key-value bucket, off the request path.

A pass settles each lease that runs low, was refused, or is half-way to its expiry: one compare-and-set of its
ledger record. The refresher wakes when a lease asks (never polls while idle) and at most every `refresh_s`;
leases are renewed before they expire even when idle, so the first request after a quiet spell finds tokens.
At stop, every lease is given back. A pass that cannot reach the bus keeps the leases as they are: they run
down and expire, and the process then refuses with 429 rather than spending what the fleet has not granted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Protocol

from libs.core.routing import Grant, GrantRequest, LeaseBook, LeasedBudget, LedgerState, settle
from libs.events.inference import BudgetHolder, BudgetStatus
from libs.router import RouterClock

log = logging.getLogger(__name__)


class LedgerRecords(Protocol):
    """Records changed by compare-and-set (KvRecords on the bus, a dict in tests)."""

    async def change(self, key: str, change: Callable[[bytes | None], bytes]) -> bytes: ...

    async def read(self, key: str) -> bytes | None: ...


class LeaseRefresher:
    """`await refresh()` for one pass (tests, start-up), `run()` as a task, `await release_all()` at stop."""

    def __init__(self, book: LeaseBook, records: LedgerRecords, clock: RouterClock) -> None:
        self._book = book
        self._records = records
        self._clock = clock
        self._wanted = asyncio.Event()
        book.on_low = self._wanted.set
        for lease in book.leases.values():
            lease.on_low = self._wanted.set
        self.settled = 0
        self.failed = 0
        self._one_pass = asyncio.Lock()

    async def run(self) -> None:
        terms = self._book.terms
        while True:
            try:
                async with asyncio.timeout(self._until_renewal()):
                    await self._wanted.wait()
            except TimeoutError:
                pass
            self._wanted.clear()
            await self.refresh()
            await asyncio.sleep(terms.refresh_s)

    async def refresh(self) -> None:
        """Give back retired leases, and top up every lease that needs a grant. Passes run one at a time: two
        settles of one lease in flight at once would each report the same unspent tokens."""
        async with self._one_pass:
            while self._book.retired:
                lease = self._book.retired.pop()
                await self._settle(lease, lease.release(self._book.process, self._clock.now()))
            for lease in list(self._book.leases.values()):
                now = self._clock.now()
                if lease.needs_grant(now):
                    await self._settle(lease, lease.request(self._book.process, now))

    async def ledgers(self) -> list[BudgetStatus]:
        """Every ledger this process leases from, with the whole fleet's holdings (`podway router status`)."""
        rows = []
        for key in sorted(self._book.leases):
            data = await self._records.read(key)
            if data is None:
                continue
            state = LedgerState.from_json(data)
            holders = [BudgetHolder(process=h.process, tokens=round(h.tokens, 1)) for h in state.holdings]
            rows.append(
                BudgetStatus(
                    key=key,
                    tokens_per_minute=state.tokens_per_minute,
                    pool=round(state.pool, 1),
                    holders=holders,
                )
            )
        return rows

    async def grant_now(self) -> None:
        """A pass for a request whose lease was short; a request giving up waiting does not cut the pass."""
        await asyncio.shield(self.refresh())

    async def release_all(self) -> None:
        """Return every lease's unspent tokens to the fleet (the process stops)."""
        self._book.keep_only(set())
        await self.refresh()

    def _until_renewal(self) -> float:
        now = self._clock.now()
        half = self._book.terms.lease_s / 2
        renewals = [lease.expires_at - half - now for lease in self._book.leases.values()]
        return max(min(renewals, default=half), self._book.terms.refresh_s)

    async def _settle(self, lease: LeasedBudget, request: GrantRequest) -> None:
        wall, now = self._clock.wall(), self._clock.now()
        granted: list[Grant] = []

        def change(current: bytes | None) -> bytes:
            state = LedgerState.from_json(current) if current is not None else None
            ledger, grant = settle(
                state,
                request,
                tokens_per_minute=lease.tokens_per_minute,
                now=wall,
                lease_s=self._book.terms.lease_s,
            )
            granted[:] = [grant]  # a retried compare-and-set recomputes it
            return ledger.to_json()

        try:
            await self._records.change(lease.key, change)
        except asyncio.CancelledError:
            lease.abandon(request)  # if the write went through, the debt is paid twice: never spent twice
            raise
        except Exception as exc:  # the bus is away: keep the debt here, spend what is held until it expires
            lease.abandon(request)
            self.failed += 1
            log.warning("budget lease %s not refreshed: %r", lease.key, exc)
            return
        self.settled += 1
        if not request.releasing:
            grant = granted[0]
            # The ledger's expiry is in wall time; the lease counts in this process's decision clock.
            lease.apply(dataclasses.replace(grant, expires_at=grant.expires_at - wall + now))
