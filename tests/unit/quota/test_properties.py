"""Invariants of the quota core over generated cohorts: admitted gangs never exceed what a queue may hold
(nominal plus borrowingLimit), never use what another queue keeps (nominal minus lendingLimit), and the same
snapshot, given in any order, gives the same decision and the same minimal set of preemption targets."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.core.quota import Mode, admit, dominant_resource_share, preemption, preemption_targets
from libs.core.quota.model import Preemption
from libs.core.quota.snapshot import QuotaSnapshot
from tests.unit.quota.builders import GPU, gang, make_cohort, make_queue, running, snapshot

FR = ("a100", GPU)
POLICY = Preemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")

queue_specs = st.lists(
    st.tuples(
        st.integers(0, 16),
        st.none() | st.integers(0, 16),
        st.none() | st.integers(0, 16),
    ),
    min_size=1,
    max_size=4,
)
gangs = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 12), st.integers(0, 5)), max_size=12)


def build_queues(specs):
    return [
        make_queue(
            f"q{i}",
            nominal,
            borrowing_limit=borrow,
            lending_limit=None if lend is None else min(lend, nominal),
            preemption=POLICY,
        )
        for i, (nominal, borrow, lend) in enumerate(specs)
    ]


def admit_in_order(queues, requests):
    state = snapshot(queues)
    for position, (queue, gpus, priority) in enumerate(requests):
        request = gang(
            f"q{queue % len(queues)}", gpus, priority=priority, minute=position, name=f"w{position}"
        )
        decision = admit(state, request)
        if decision.mode is Mode.FIT:
            state.add(running(request.name, request.cluster_queue, gpus, priority=priority, minute=position))
    return state


@given(queue_specs, gangs)
def test_admitted_gangs_stay_within_borrowing_and_lending_limits(specs, requests):
    queues = build_queues(specs)
    state = admit_in_order(queues, requests)
    usage = {q.name: state.usage[state.cluster_queue_node(q.name)].get(FR, 0) for q in queues}
    total_nominal = sum(q.quotas[FR].nominal for q in queues)
    assert sum(usage.values()) <= total_nominal
    for queue in queues:
        quota = queue.quotas[FR]
        if quota.borrowing_limit is not None:
            assert usage[queue.name] <= quota.nominal + quota.borrowing_limit
        kept = quota.nominal - (quota.lending_limit if quota.lending_limit is not None else quota.nominal)
        others = sum(amount for name, amount in usage.items() if name != queue.name)
        assert others <= total_nominal - kept


@settings(max_examples=60)
@given(
    queue_specs,
    gangs,
    st.integers(0, 3),
    st.integers(1, 16),
    st.integers(0, 6),
    st.randoms(use_true_random=False),
)
def test_the_same_snapshot_in_any_order_gives_the_same_decision_and_targets(
    specs, requests, queue, gpus, priority, shuffler: random.Random
):
    queues = build_queues(specs)
    workloads = list(admit_in_order(queues, requests).workloads.values())
    request = gang(f"q{queue % len(queues)}", gpus, priority=priority)
    shuffled_queues, shuffled_workloads = list(queues), list(workloads)
    shuffler.shuffle(shuffled_queues)
    shuffler.shuffle(shuffled_workloads)
    answers = []
    for state in (snapshot(queues, workloads), snapshot(shuffled_queues, shuffled_workloads)):
        decision = admit(state, request)
        answers.append((decision, preemption_targets(state, request, decision)))
    assert answers[0] == answers[1]


@settings(max_examples=80)
@given(queue_specs, gangs, st.integers(0, 3), st.integers(1, 16), st.integers(0, 6))
def test_preemption_frees_enough_and_spares_every_workload_it_can(specs, requests, queue, gpus, priority):
    queues = build_queues(specs)
    state = admit_in_order(queues, requests)
    request = gang(f"q{queue % len(queues)}", gpus, priority=priority)
    decision = admit(state, request)
    targets = preemption_targets(state, request, decision)
    if not targets:
        return
    assert len({t.workload.name for t in targets}) == len(targets)
    for target in targets:
        state.remove(target.workload)
    assert admit(state, request).mode is Mode.FIT
    for target in targets:
        state.add(target.workload)
        assert admit(state, request).mode is not Mode.FIT, f"{target.workload.name} was not needed"
        state.remove(target.workload)


def test_dominant_resource_share_is_weighted_and_measured_against_what_the_tree_lends():
    queues = [make_queue("heavy", 4, weight=2), make_queue("light", 4), make_queue("idle", 8)]
    state = snapshot(queues, [running("h", "heavy", 8), running("l", "light", 8)])
    heavy, light = (dominant_resource_share(state, state.cluster_queue_node(n)) for n in ("heavy", "light"))
    assert light.weighted == 4 * 1000 / 16  # borrows 4 of the 16 the cohort could lend it
    assert heavy.weighted == light.weighted / 2
    assert heavy < light


def test_a_cohorts_share_in_a_hierarchy_counts_what_its_subtree_borrows_from_the_parent():
    cohorts = [make_cohort("research", parent="org"), make_cohort("org"), make_cohort("prod", parent="org")]
    queues = [make_queue("a", 4), make_queue("b", 4), make_queue("p", 8, cohort="prod")]
    state: QuotaSnapshot = snapshot(queues, [running("a1", "a", 10)], cohorts=cohorts)
    research = dominant_resource_share(state, state.parent[state.cluster_queue_node("a")])
    assert research.borrowing
    assert research.weighted == 2 * 1000 / 16  # 10 used of research's 8: 2 of the 16 org could lend
    assert dominant_resource_share(state, state.roots()[0]).weighted == 0


@settings(max_examples=80)
@given(queue_specs, gangs, st.integers(0, 3), st.integers(1, 16), st.integers(0, 6), st.booleans())
def test_an_attempt_skipped_because_the_gang_would_still_borrow_finds_what_the_full_search_finds(
    specs, requests, queue, gpus, priority, borrow_within_cohort
):
    policy = Preemption(
        within_cluster_queue="LowerPriority",
        reclaim_within_cohort="Any",
        borrow_within_cohort="LowerPriority" if borrow_within_cohort else "Never",
    )
    queues = [dataclasses.replace(q, preemption=policy) for q in build_queues(specs)]
    state = admit_in_order(queues, requests)
    request = gang(f"q{queue % len(queues)}", gpus, priority=priority)
    decision = admit(state, request)
    found = preemption_targets(state, request, decision)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(preemption, "_borrows_without_all_of_its_own", lambda *_: False)
        assert preemption_targets(state, request, decision) == found
