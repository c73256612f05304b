"""The fleet ledger: grants leased to router processes never let the fleet spend more than one bucket."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.api.router_policy.policy import Capacity
from libs.core.routing.capacity import CapacityTracker
from libs.core.routing.ledger import GrantRequest, LeasedBudget, LeaseTerms, LedgerState, settle

BUDGET = 60_000
TERMS = LeaseTerms(share=0.02, lease_s=10.0, margin_s=2.0, refresh_s=0.05)


class Fleet:
    """Router processes sharing one ledger; each settle is one compare-and-set on the bus."""

    def __init__(self, processes: int, budget: int = BUDGET) -> None:
        self.budget = budget
        self.state: LedgerState | None = None
        self.leases = {f"p{i}": LeasedBudget("feature.x", budget, TERMS, 0.0) for i in range(processes)}
        self.spent: list[tuple[float, float]] = []

    def refill(self, process: str, now: float) -> None:
        lease = self.leases[process]
        request = lease.request(process, now)
        self.state, grant = settle(
            self.state, request, tokens_per_minute=self.budget, now=now, lease_s=TERMS.lease_s
        )
        lease.apply(grant)

    def spend(self, process: str, estimate: int, used: int, now: float) -> bool:
        lease = self.leases[process]
        if not lease.try_take(estimate, now):
            return False
        lease.adjust(estimate - used, now)
        self.spent.append((now, used))
        return True

    def spent_between(self, start: float, end: float) -> float:
        return sum(used for at, used in self.spent if start <= at <= end)


def test_a_new_ledger_grants_a_share_and_keeps_the_rest_in_the_pool() -> None:
    state, grant = settle(None, GrantRequest("p0", 0, 0, 1200), tokens_per_minute=BUDGET, now=0.0, lease_s=10)
    assert grant.tokens == 1200
    assert state.pool == BUDGET - 1200
    assert state.held() == 1200


def test_the_pool_refills_only_up_to_a_minute_less_what_is_held() -> None:
    state, _ = settle(None, GrantRequest("p0", 0, 0, 1200), tokens_per_minute=BUDGET, now=0.0, lease_s=10)
    state, _grant = settle(state, GrantRequest("p1", 0, 0, 0), tokens_per_minute=BUDGET, now=5.0, lease_s=10)
    assert state.pool + state.held() == BUDGET


def test_a_dead_process_grants_make_room_again_when_they_expire() -> None:
    state, _ = settle(None, GrantRequest("dead", 0, 0, BUDGET), tokens_per_minute=BUDGET, now=0.0, lease_s=10)
    state, refused = settle(
        state, GrantRequest("p1", 0, 0, 500), tokens_per_minute=BUDGET, now=9.0, lease_s=10
    )
    assert refused.tokens == 0  # held by the dead process until its lease ends: the pool cannot refill
    state, grant = settle(
        state, GrantRequest("p1", 0, 0, 5000), tokens_per_minute=BUDGET, now=15.0, lease_s=10
    )
    assert grant.tokens == 5000  # five seconds of refill since the dead process's lease ended
    assert [h.process for h in state.holdings] == ["p1"]


def test_a_stopping_process_returns_what_it_did_not_spend() -> None:
    lease = LeasedBudget("feature.x", BUDGET, TERMS, 0.0)
    state, grant = settle(None, lease.request("p0", 0.0), tokens_per_minute=BUDGET, now=0.0, lease_s=10)
    lease.apply(grant)
    assert lease.try_take(200, 0.0)
    state, _ = settle(state, lease.release("p0", 0.1), tokens_per_minute=BUDGET, now=0.1, lease_s=10)
    assert state.holdings == ()
    assert state.pool == BUDGET - 200 + 100  # what it spent, less a tenth of a second's refill


def test_a_process_stops_spending_its_grant_before_the_ledger_takes_it_back() -> None:
    lease = LeasedBudget("feature.x", BUDGET, TERMS, 0.0)
    _state, grant = settle(None, lease.request("p0", 0.0), tokens_per_minute=BUDGET, now=0.0, lease_s=10)
    lease.apply(grant)
    assert lease.try_take(10, 7.9)
    assert not lease.try_take(10, 8.0)  # the margin before the ledger's expiry at 10 s
    assert lease.needs_grant(8.0)


def test_overuse_is_a_debt_paid_from_the_pool_not_twice() -> None:
    lease = LeasedBudget("feature.x", BUDGET, TERMS, 0.0)
    state, grant = settle(None, lease.request("p0", 0.0), tokens_per_minute=BUDGET, now=0.0, lease_s=10)
    lease.apply(grant)
    assert lease.try_take(1200, 0.0)
    lease.adjust(-300, 0.0)  # the answer used 300 tokens more than reserved
    request = lease.request("p0", 0.0)
    assert (request.unspent, request.debt) == (0, 300)
    state, grant = settle(state, request, tokens_per_minute=BUDGET, now=0.0, lease_s=10)
    lease.apply(grant)
    assert lease.held == grant.tokens == 1200
    assert state.pool == BUDGET - 1200 - 300 - 1200


def test_a_refusal_asks_for_at_least_the_refused_request_and_tells_when_to_come_back() -> None:
    lease = LeasedBudget("feature.x", BUDGET, TERMS, 0.0)
    assert not lease.try_take(5000, 0.0)
    assert lease.request("p0", 0.0).want == 5000
    assert lease.seconds_until(5000, 0.0) == 5000 / (BUDGET / 60)


def test_the_ledger_record_round_trips_through_json() -> None:
    state, _ = settle(None, GrantRequest("p0", 0, 0, 100), tokens_per_minute=BUDGET, now=3.0, lease_s=10)
    assert LedgerState.from_json(state.to_json()) == state


@settings(max_examples=25, deadline=None)
@given(processes=st.integers(1, 8), seed=st.integers(0, 2**32 - 1), deaths=st.integers(0, 3))
def test_the_fleet_never_spends_more_than_one_bucket_over_any_window(
    processes: int, seed: int, deaths: int
) -> None:
    rng = random.Random(seed)
    fleet = Fleet(processes)
    now = 0.0
    died: set[str] = set()
    for _ in range(1500):
        now += rng.expovariate(200.0)
        process = rng.choice(sorted(set(fleet.leases) - died))
        if deaths and rng.random() < 0.001 and len(died) < processes - 1:
            died.add(process)  # it holds its grant until the ledger expires it
            deaths -= 1
            continue
        if fleet.leases[process].needs_grant(now) and rng.random() < 0.5:
            fleet.refill(process, now)
        estimate = rng.randint(100, 3000)
        fleet.spend(process, estimate, rng.randint(0, estimate), now)
    for start in [0.0] + [rng.uniform(0, now) for _ in range(20)]:
        assert fleet.spent_between(start, now) <= BUDGET * (1 + (now - start) / 60) + 1e-6
    assert fleet.state is not None
    assert fleet.state.pool + fleet.state.held() <= BUDGET + 1e-6


def test_eight_processes_under_load_spend_a_minutes_budget_within_five_percent() -> None:
    rng = random.Random(7)
    fleet = Fleet(8)
    now, step_s = 0.0, 0.005
    while now < 60.0:
        for process in fleet.leases:
            if fleet.leases[process].needs_grant(now):
                fleet.refill(process, now)  # the background refresh, every tick
            estimate = rng.randint(1000, 4000)
            fleet.spend(process, estimate, estimate, now)
        now += step_s
    spent = fleet.spent_between(0.0, 60.0)
    assert spent <= 2 * BUDGET * 1.05  # the full bucket at the start, then a minute's refill
    assert spent >= 2 * BUDGET * 0.9  # and the grants do not strand it


def test_a_pt_deployments_concurrency_is_split_among_the_processes_leasing_it() -> None:
    fleet = Fleet(4, budget=BUDGET)
    for process in fleet.leases:
        fleet.refill(process, 0.0)
    assert fleet.leases["p0"].fleet_size == 1, "alone when it asked"
    fleet.refill("p0", 0.1)
    assert fleet.leases["p0"].fleet_size == 4
    tracker = CapacityTracker(Capacity(tokens_per_minute=BUDGET, concurrency=8), 0.0, fleet.leases["p0"])
    held = [tracker.try_reserve(10, 0.1) for _ in range(3)]
    assert [r is not None for r in held] == [True, True, False], "8 calls over 4 processes: 2 here"
    assert tracker.snapshot(0.1).concurrency == 2
    alone = CapacityTracker(Capacity(tokens_per_minute=BUDGET, concurrency=8), 0.0)
    assert alone.concurrency == 8
    crowded = Fleet(16)
    for process in crowded.leases:
        crowded.refill(process, 0.0)
    crowded.refill("p0", 0.1)
    tracker = CapacityTracker(Capacity(tokens_per_minute=BUDGET, concurrency=8), 0.0, crowded.leases["p0"])
    assert tracker.concurrency == 1, "every process may still send one call"


def test_a_dead_processes_share_of_the_concurrency_comes_back_once_its_lease_expired() -> None:
    fleet = Fleet(2, budget=BUDGET)
    fleet.refill("p0", 0.0)
    fleet.refill("p1", 0.0)
    fleet.refill("p0", 0.1)
    tracker = CapacityTracker(Capacity(tokens_per_minute=BUDGET, concurrency=8), 0.0, fleet.leases["p0"])
    assert tracker.concurrency == 4
    # p1 dies: it renews no more, and its holding expires on the ledger after the lease.
    fleet.refill("p0", TERMS.lease_s + 1.0)
    assert fleet.leases["p0"].fleet_size == 1
    assert tracker.concurrency == 8
