"""The lease refresher against in-memory ledger records: grants, releases, and a bus that is away."""

from __future__ import annotations

from collections.abc import Callable

from libs.core.routing import LeaseBook, LedgerKind, LedgerState
from libs.router import ManualClock
from services.llm_router.ledger import LeaseRefresher

BUDGET = 60_000


class MemoryRecords:
    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.away = False

    async def change(self, key: str, change: Callable[[bytes | None], bytes]) -> bytes:
        if self.away:
            raise ConnectionError("no bus")
        self.values[key] = change(self.values.get(key))
        return self.values[key]

    def ledger(self, key: str) -> LedgerState:
        return LedgerState.from_json(self.values[key])


def refresher(process: str, records: MemoryRecords, clock: ManualClock) -> tuple[LeaseBook, LeaseRefresher]:
    book = LeaseBook(process)
    book.lease(LedgerKind.FEATURE, "search-answer", BUDGET, clock.now())
    return book, LeaseRefresher(book, records, clock)


async def test_two_processes_hold_their_shares_of_one_ledger_and_return_them_at_stop() -> None:
    records, clock = MemoryRecords(), ManualClock()
    first_book, first = refresher("a", records, clock)
    _, second = refresher("b", records, clock)
    await first.refresh()
    await second.refresh()
    ledger = records.ledger("feature.search-answer")
    assert sorted(h.process for h in ledger.holdings) == ["a", "b"]
    assert first_book.leases["feature.search-answer"].level_at(clock.now()) == BUDGET * 0.02
    await first.release_all()
    assert [h.process for h in records.ledger("feature.search-answer").holdings] == ["b"]
    assert records.ledger("feature.search-answer").pool == BUDGET * 0.98


async def test_a_debt_stays_with_the_process_while_the_bus_is_away() -> None:
    records, clock = MemoryRecords(), ManualClock()
    book, lease_refresher = refresher("a", records, clock)
    await lease_refresher.refresh()
    lease = book.leases["feature.search-answer"]
    lease.adjust(-BUDGET, clock.now())  # answers used far more than reserved
    records.away = True
    await lease_refresher.refresh()
    assert lease_refresher.failed == 1
    assert lease.level_at(clock.now()) < 0
