"""Who goes first: a StrictFIFO queue's head blocks what is behind it, a BestEffortFIFO queue's does not, and
with fair sharing the head whose queue would have the lower share of the cohort borrows first."""

from __future__ import annotations

from decimal import Decimal

from libs.core.quota import admit, preemption_targets
from libs.core.quota.model import Preemption
from libs.core.quota.ordering import admitted_after, goes_first, heads, queue_order
from tests.unit.quota.builders import gang, make_queue, running, snapshot


def test_within_a_queue_higher_priority_then_earlier_then_name_comes_first():
    late_high = gang("team-a", 1, priority=10, minute=50, name="late-high")
    early_low = gang("team-a", 1, priority=0, minute=1, name="early-low")
    twin_b = gang("team-a", 1, priority=0, minute=1, name="twin-b")
    other = gang("team-b", 1, minute=0, name="other")

    assert sorted([twin_b, early_low, late_high], key=queue_order) == [late_high, early_low, twin_b]
    assert heads([twin_b, early_low, late_high, other]) == {"team-a": late_high, "team-b": other}


def test_a_strict_fifo_head_that_does_not_fit_blocks_a_later_gang_that_would():
    queues = [make_queue("team-a", 8, cohort=None, strict_fifo=True)]
    state = snapshot(queues, [running("busy", "team-a", 6)])
    head = gang("team-a", 4, minute=1, name="big")
    later = gang("team-a", 2, minute=2, name="small")
    decision = admit(state, later)
    assert decision.fits

    ahead = goes_first(state, later, decision, [head, later], fair_sharing=False)

    assert ahead is not None
    assert ahead.workload == "big"
    assert ahead.message == "StrictFIFO: big is ahead of it in ClusterQueue team-a"
    assert goes_first(state, head, admit(state, head), [head, later], fair_sharing=False) is None


def test_best_effort_fifo_lets_a_gang_that_fits_go_ahead_of_a_head_that_does_not():
    queues = [make_queue("team-a", 8, cohort=None)]
    state = snapshot(queues, [running("busy", "team-a", 6)])
    head = gang("team-a", 4, minute=1, name="big")
    later = gang("team-a", 2, minute=2, name="small")

    assert goes_first(state, later, admit(state, later), [head, later], fair_sharing=False) is None


def test_with_fair_sharing_the_head_whose_queue_would_borrow_less_goes_first():
    queues = [make_queue("team-a", 4), make_queue("team-b", 4), make_queue("idle", 8)]
    state = snapshot(queues, [running("a-job", "team-a", 6), running("b-job", "team-b", 4)])
    from_a = gang("team-a", 2, minute=1, name="from-a")  # team-a would borrow 4
    from_b = gang("team-b", 2, minute=2, name="from-b")  # team-b would borrow 2
    decision = admit(state, from_a, fair_sharing=True)
    assert decision.fits
    assert decision.borrows

    ahead = goes_first(state, from_a, decision, [from_a, from_b], fair_sharing=True)

    assert ahead is not None
    assert ahead.workload == "from-b"
    assert "ClusterQueue team-b would have a lower share of the cohort" in ahead.message
    decision_b = admit(state, from_b, fair_sharing=True)
    assert goes_first(state, from_b, decision_b, [from_a, from_b], fair_sharing=True) is None
    assert goes_first(state, from_a, decision, [from_a, from_b], fair_sharing=False) is None


def test_a_heavier_queue_may_borrow_more_before_it_yields():
    queues = [make_queue("team-a", 4, weight=Decimal(4)), make_queue("team-b", 4), make_queue("idle", 8)]
    state = snapshot(queues, [running("a-job", "team-a", 6), running("b-job", "team-b", 4)])
    from_a = gang("team-a", 2, minute=1, name="from-a")  # borrows 4, weight 4: share halved twice
    from_b = gang("team-b", 2, minute=2, name="from-b")  # borrows 2, weight 1

    assert (
        goes_first(state, from_a, admit(state, from_a, fair_sharing=True), [from_b], fair_sharing=True)
        is None
    )


def test_a_rival_head_that_cannot_be_admitted_holds_nothing_back():
    queues = [make_queue("team-a", 4), make_queue("team-b", 4, borrowing_limit=0), make_queue("idle", 8)]
    state = snapshot(queues, [running("a-job", "team-a", 6), running("b-job", "team-b", 4)])
    from_a = gang("team-a", 2, minute=1, name="from-a")
    from_b = gang("team-b", 2, minute=2, name="from-b")  # may not borrow: it cannot be admitted now
    assert not admit(state, from_b, fair_sharing=True).fits

    assert (
        goes_first(state, from_a, admit(state, from_a, fair_sharing=True), [from_b], fair_sharing=True)
        is None
    )


def test_queues_of_another_cohort_do_not_compete():
    queues = [
        make_queue("team-a", 4),
        make_queue("idle", 8),
        make_queue("x", 1, cohort="other"),
        make_queue("y", 8, cohort="other"),
    ]
    state = snapshot(queues, [running("a-job", "team-a", 6)])
    from_a = gang("team-a", 2, minute=1, name="from-a")
    from_x = gang("x", 2, minute=0, name="from-x")  # borrows 1: a lower share, but in another cohort

    assert (
        goes_first(state, from_a, admit(state, from_a, fair_sharing=True), [from_x], fair_sharing=True)
        is None
    )


def test_a_gang_is_admitted_after_preemption_only_if_no_rival_head_takes_the_freed_quota_first():
    queues = [
        make_queue("team-a", 4, preemption=Preemption(reclaim_within_cohort="Any")),
        make_queue("team-b", 4),
        make_queue("team-c", 4),
        make_queue("idle", 8),
    ]
    workloads = [
        running("a-job", "team-a", 4),
        running("b1", "team-b", 6),
        running("b2", "team-b", 4, minute=5),
        running("c-job", "team-c", 4),
    ]
    state = snapshot(queues, workloads)
    reclaiming = gang("team-a", 4, minute=100, name="reclaiming")  # would borrow 4
    rival = gang("team-c", 3, minute=1, name="rival")  # would borrow 3: a lower share
    decision = admit(state, reclaiming, fair_sharing=True)
    found = preemption_targets(state, reclaiming, decision, fair_sharing=())
    assert [t.workload.name for t in found] == ["b2"]

    assert not admitted_after(state, reclaiming, found, [rival], fair_sharing=True)
    assert admitted_after(state, reclaiming, found, [], fair_sharing=True)
    assert not admitted_after(state, reclaiming, (), [], fair_sharing=True)
    assert sorted(state.workloads) == ["a-job", "b1", "b2", "c-job"]  # the snapshot is not changed


def test_with_fair_sharing_a_head_within_its_nominal_quota_goes_before_every_loan():
    queues = [make_queue("team-a", 4), make_queue("team-b", 4), make_queue("idle", 8)]
    state = snapshot(queues, [running("a-job", "team-a", 5), running("b-job", "team-b", 2)])
    borrowing = gang("team-a", 1, minute=1, name="borrowing")  # team-a would borrow 2 of 16
    within = gang("team-b", 2, minute=2, name="within")  # team-b stays at its nominal quota
    decision = admit(state, borrowing, fair_sharing=True)
    assert decision.fits
    assert decision.borrows
    assert not admit(state, within, fair_sharing=True).borrows

    ahead = goes_first(state, borrowing, decision, [borrowing, within], fair_sharing=True)

    assert ahead is not None
    assert ahead.workload == "within"
    assert ahead.message == "within is admitted within the nominal quota of ClusterQueue team-b first"
    assert goes_first(state, borrowing, decision, [borrowing, within], fair_sharing=False) is None
