"""Preemption targets per policy: whole workloads, a minimal set, in Kueue's order."""

from __future__ import annotations

from libs.core.quota import Mode, PreemptionReason, admit, preemption_targets
from libs.core.quota.model import FairSharingStrategy, Preemption
from tests.unit.quota.builders import gang, make_queue, running, snapshot

LOWER = Preemption(within_cluster_queue="LowerPriority")


def targets(state, request, **options):
    decision = admit(state, request, fair_sharing="fair_sharing" in options)
    assert decision.mode is Mode.PREEMPT, decision.message
    return [(t.workload.name, t.reason) for t in preemption_targets(state, request, decision, **options)]


def test_within_the_queue_lower_priority_goes_first_and_no_more_than_needed():
    queue = make_queue("team-a", 8, cohort=None, preemption=LOWER)
    state = snapshot(
        [queue], [running("p1", "team-a", 4, priority=1), running("p5", "team-a", 4, priority=5)]
    )
    assert targets(state, gang("team-a", 4, priority=10)) == [("p1", PreemptionReason.IN_CLUSTER_QUEUE)]


def test_equal_priority_is_never_preempted_by_lower_priority_policy():
    queue = make_queue("team-a", 8, cohort=None, preemption=LOWER)
    state = snapshot([queue], [running("peer", "team-a", 8, priority=10)])
    assert targets(state, gang("team-a", 4, priority=10)) == []


def test_lower_or_newer_equal_priority_preempts_a_newer_peer_but_not_an_older_one():
    policy = Preemption(within_cluster_queue="LowerOrNewerEqualPriority")
    queue = make_queue("team-a", 8, cohort=None, preemption=policy)
    newer = snapshot([queue], [running("newer", "team-a", 8, priority=10, minute=200)])
    older = snapshot([queue], [running("older", "team-a", 8, priority=10, minute=50)])
    newer_peer = targets(newer, gang("team-a", 4, priority=10, minute=100))
    assert newer_peer == [("newer", PreemptionReason.IN_CLUSTER_QUEUE)]
    assert targets(older, gang("team-a", 4, priority=10, minute=100)) == []


def test_a_queue_reclaims_its_nominal_quota_from_a_borrower_whatever_its_priority_with_any():
    queues = [
        make_queue("team-a", 8, preemption=Preemption(reclaim_within_cohort="Any")),
        make_queue("team-b", 8),
    ]
    borrowers = [
        running("b1", "team-b", 8, priority=100),
        running("b2", "team-b", 4, priority=100, minute=10),
    ]
    state = snapshot(queues, borrowers)
    assert targets(state, gang("team-a", 8, priority=0)) == [("b2", PreemptionReason.IN_COHORT_RECLAMATION)]


def test_reclaim_with_lower_priority_spares_higher_priority_borrowers():
    policy = Preemption(reclaim_within_cohort="LowerPriority")
    queues = [make_queue("team-a", 8, preemption=policy), make_queue("team-b", 8)]
    borrowers = [
        running("b1", "team-b", 8, priority=100),
        running("b2", "team-b", 4, priority=100, minute=10),
    ]
    assert targets(snapshot(queues, borrowers), gang("team-a", 8, priority=0)) == []


def test_nothing_is_reclaimed_from_a_queue_within_its_nominal_quota():
    queues = [
        make_queue("team-a", 8, preemption=Preemption(reclaim_within_cohort="Any")),
        make_queue("team-b", 8),
    ]
    state = snapshot(queues, [running("a1", "team-a", 4), running("b1", "team-b", 8)])
    decision = admit(state, gang("team-a", 8))
    assert decision.mode is Mode.PREEMPT
    assert preemption_targets(state, gang("team-a", 8), decision) == ()


def test_borrowing_within_cohort_stops_at_the_priority_threshold():
    def policy(threshold):
        return Preemption(
            reclaim_within_cohort="LowerPriority",
            borrow_within_cohort="LowerPriority",
            max_priority_threshold=threshold,
        )

    workloads = [
        running("b-high", "team-b", 4, priority=90),
        running("b-mid", "team-b", 4, priority=50),
        running("b-low", "team-b", 4, priority=5),
    ]
    for threshold, expected in ((100, ["b-low"]), (10, ["b-low"]), (1, [])):
        queues = [
            make_queue("team-a", 0, preemption=policy(threshold)),
            make_queue("team-b", 8),
            make_queue("c", 8),
        ]
        found = targets(snapshot(queues, workloads), gang("team-a", 8, priority=60))
        assert [name for name, _ in found] == expected
        assert all(reason is PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING for _, reason in found)


def test_fair_sharing_takes_from_the_queue_of_highest_share():
    queues = [
        make_queue("team-a", 8, preemption=Preemption(reclaim_within_cohort="Any")),
        make_queue("team-b", 8),
        make_queue("team-c", 8),
    ]
    workloads = [
        running("b1", "team-b", 8),
        running("b2", "team-b", 2, minute=5),
        running("c1", "team-c", 8),
        running("c2", "team-c", 6, minute=5),
    ]
    state = snapshot(queues, workloads)
    found = targets(state, gang("team-a", 8), fair_sharing=())
    # team-c borrows 6 of 24, team-b 2: team-c gives first, until it no longer borrows
    assert found == [
        ("c2", PreemptionReason.IN_COHORT_FAIR_SHARING),
        ("b2", PreemptionReason.IN_COHORT_FAIR_SHARING),
    ]


def test_less_than_initial_share_lets_a_preemptor_overtake_a_target_that_stays_above_it():
    queues = [
        make_queue("team-a", 4, preemption=Preemption(reclaim_within_cohort="Any")),
        make_queue("team-b", 4),
        make_queue("team-c", 8),
    ]
    state = snapshot(queues, [running("b1", "team-b", 6), running("b2", "team-b", 6, minute=5)])
    request = gang("team-a", 7)
    strict = targets(state, request, fair_sharing=[FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE])
    assert strict == []  # team-a would borrow 3 of 16, more than the 2 team-b would still borrow
    either = targets(state, request, fair_sharing=[])
    assert either == [("b2", PreemptionReason.IN_COHORT_FAIR_SHARING)]


def test_a_gang_that_fits_its_nominal_quota_once_its_own_lower_priorities_go_reclaims_without_borrowing():
    # team-a holds 4 of its 8 GPUs with a low-priority gang; team-b borrows the other 4. A gang of 8 needs
    # team-a's own gang gone as well as team-b's loan back: with both it fits without borrowing.
    policy = Preemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")
    queues = [make_queue("team-a", 8, preemption=policy), make_queue("team-b", 8)]
    state = snapshot(
        queues,
        [
            running("own", "team-a", 4, priority=0),
            running("b1", "team-b", 8, priority=5),
            running("b2", "team-b", 4, priority=5, minute=10),
        ],
    )
    assert targets(state, gang("team-a", 8, priority=10)) == [
        ("b2", PreemptionReason.IN_COHORT_RECLAMATION),
        ("own", PreemptionReason.IN_CLUSTER_QUEUE),
    ]
