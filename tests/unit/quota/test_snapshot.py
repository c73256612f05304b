"""The quota forest's arithmetic and bookkeeping: what a queue may still use follows Kueue's resource nodes
however the forest is built and changed, a copy and its original never see each other's changes, and the
queues that borrow are found by what they use past their subtree quota."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.core.quota.snapshot import Node, QuotaSnapshot
from tests.unit.quota.builders import GPU, make_cohort, make_queue, running, snapshot

FR = ("a100", GPU)


def reference_available(state: QuotaSnapshot, node: Node) -> int:
    """`resource_node.go`'s available, as written there: recursive, every amount looked up anew."""
    quota = state.quotas[node].get(FR)
    subtree = state.subtree_quota[node].get(FR, 0)
    local = max(0, subtree - quota.lending_limit) if quota and quota.lending_limit is not None else 0
    used = state.usage[node].get(FR, 0)
    parent = state.parent[node]
    if parent is None:
        return subtree - used
    from_parent = reference_available(state, parent)
    if quota is not None and quota.borrowing_limit is not None:
        from_parent = min(from_parent, subtree - local - max(0, used - local) + quota.borrowing_limit)
    return max(0, local - used) + from_parent


limits = st.none() | st.integers(0, 12)
forests = st.tuples(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12), limits, limits), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 8), limits), min_size=3, max_size=3),
)
changes = st.lists(st.tuples(st.integers(0, 5), st.integers(1, 10), st.booleans()), max_size=14)


def build(spec) -> QuotaSnapshot:
    """Queues under three team cohorts (team-0, team-1 with a pool, team-2 straight under the root)."""
    queue_specs, cohort_specs = spec
    cohorts = [make_cohort("org")]
    for index, (gpus, lending) in enumerate(cohort_specs):
        lent = None if lending is None else min(lending, gpus)
        cohorts.append(make_cohort(f"team-{index}", parent="org", gpus=gpus, lending_limit=lent))
    queues = [
        make_queue(
            f"q{index}",
            nominal,
            cohort=f"team-{team}",
            borrowing_limit=borrowing,
            lending_limit=None if lending is None else min(lending, nominal),
        )
        for index, (team, nominal, borrowing, lending) in enumerate(queue_specs)
    ]
    return snapshot(queues, cohorts=cohorts)


@settings(max_examples=80)
@given(forests, changes)
def test_what_every_node_may_still_use_follows_kueues_resource_nodes_through_any_changes(spec, steps):
    state = build(spec)
    queues = sorted(state.cluster_queues)
    held = []
    for step, (queue, gpus, remove) in enumerate(steps):
        if remove and held:
            state.remove(held.pop(queue % len(held)))
        else:
            workload = running(f"w{step}", queues[queue % len(queues)], gpus)
            state.add(workload)
            held.append(workload)
        for node in state.parent:
            assert state.available(node, FR) == reference_available(state, node)


@settings(max_examples=40)
@given(forests, changes)
def test_a_copy_and_its_original_never_see_each_others_changes(spec, steps):
    state = build(spec)
    queues = sorted(state.cluster_queues)
    for step, (queue, gpus, _) in enumerate(steps[: len(steps) // 2]):
        state.add(running(f"before{step}", queues[queue % len(queues)], gpus))
    before = ({n: dict(u) for n, u in state.usage.items()}, state.workloads)
    copy = state.copy()
    for step, (queue, gpus, _) in enumerate(steps):
        copy.add(running(f"copy{step}", queues[queue % len(queues)], gpus))
    assert ({n: dict(u) for n, u in state.usage.items()}, state.workloads) == before
    copied = ({n: dict(u) for n, u in copy.usage.items()}, copy.workloads)
    for workload in list(state.workloads.values()):
        state.remove(workload)
    state.add(running("late", queues[0], 1))
    assert ({n: dict(u) for n, u in copy.usage.items()}, copy.workloads) == copied
    assert set(state.workloads) == {"late"}


def test_the_queues_that_borrow_are_those_using_more_than_their_subtree_quota_in_tree_order():
    queues = [
        make_queue("c", 4),
        make_queue("a", 4),
        make_queue("b", 4),
        make_queue("other", 4, cohort="else"),
    ]
    state = snapshot(
        queues,
        [running("a1", "a", 6), running("b1", "b", 4), running("c1", "c", 5), running("o1", "other", 2)],
    )
    root = state.root_of(state.cluster_queue_node("a"))
    assert state.borrowing_queues(root, {FR}) == ["a", "c"]
    assert state.borrowing_queues(root, {("h100", GPU)}) == []
    assert [w.name for w in state.workloads_of("a")] == ["a1"]
    assert list(state.workloads_in("none")) == []
