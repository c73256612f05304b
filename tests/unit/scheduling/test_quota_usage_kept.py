"""The quota usage the scheduler keeps between gangs (updated for the gangs that changed) is the usage it
would build from scratch out of the gangs holding room and the quota held for waiting gangs, whatever
happens in between: gangs admitted, placed, ending, evicted or deleted, quota held and let go, a queue's
quota changed, a node relabelled out of its flavor."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from libs.core.quota import QuotaSnapshot
from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import ObjectRemoved, PodsEvicted, World
from tests.unit.scheduling.conftest import SMALL, Clock, Machine
from tests.unit.scheduling.manifests import (
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    quota_objects,
    stored,
    team_gang,
)

QUOTA = (
    flavor(),
    cluster_queue("team-a", 16, cohort="research", reclaim="Any"),
    cluster_queue("team-b", 8, cohort="research"),
    local_queue("a", "team-a"),
    local_queue("b", "team-b"),
)


def usage_of(snapshot: QuotaSnapshot) -> tuple[dict[Any, dict[Any, int]], set[str]]:
    """What a snapshot counts: non-zero usage per node, and the names of the workloads it holds."""
    usage = {node: {fr: n for fr, n in used.items() if n} for node, used in snapshot.usage.items()}
    return {node: used for node, used in usage.items() if used}, set(snapshot.workloads)


def built_from_scratch(scheduler: Machine) -> QuotaSnapshot:
    """Every quota-managed gang holding room, with what its pods on nodes use, and the quota held for
    waiting gangs, in a snapshot built anew."""
    ledger, groups = scheduler.quotas, sorted(scheduler.book.groups.items())
    holdings = [scheduler._holding(g) for _, g in groups if g.placed and not g.standalone]
    holds = [g.quota_hold.workload for _, g in groups if g.quota_hold is not None]
    workloads = [*ledger.admitted(holdings, scheduler._node_labels), *holds]
    return QuotaSnapshot(
        ledger.flavors.values(), ledger.cohorts.values(), ledger.cluster_queues.values(), workloads
    )


steps = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.sampled_from("abf"), st.integers(1, 3), st.sampled_from([1, 4, 8])),
        st.tuples(st.just("run")),
        st.tuples(st.just("finish"), st.integers(0, 20)),
        st.tuples(st.just("evict"), st.integers(0, 20)),
        st.tuples(st.just("delete"), st.integers(0, 20)),
        st.tuples(st.just("requota"), st.integers(0, 24)),
        st.tuples(st.just("relabel"), st.integers(0, 3)),
        st.tuples(st.just("wait")),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None)
@given(steps)
# A gang that fits its quota but not the cluster holds its quota until the others make room.
@example([("admit", "f", 3, 8), ("run",), ("admit", "a", 2, 8), ("run",), ("finish", 0), ("run",)])
def test_the_kept_quota_usage_is_the_usage_built_from_scratch(plan):
    clock = Clock()
    scheduler = Machine(clock)
    nodes = [obj for obj in cluster(SMALL) if obj.kind == "Node"]
    scheduler.load(World(cluster(SMALL) + quota_objects(*QUOTA), {}), now=clock.now)
    gangs: list[list] = []
    for number, step in enumerate(plan):
        kind = step[0]
        placed = sorted(uid for uid, pod in scheduler.book.pods.items() if pod.node is not None)
        if kind == "admit":
            _, namespace, pods, gpus = step
            gangs.append(team_gang(f"g{number}", {"f": "free"}.get(namespace, namespace), pods, gpus=gpus))
            scheduler.admit(*gangs[-1])
        elif kind == "run":
            scheduler.run()
        elif kind in ("finish", "evict") and placed:
            uid = placed[step[1] % len(placed)]
            if kind == "evict":
                scheduler.tell(PodsEvicted((uid,)))
            else:
                scheduler.finish([uid], PodPhase.SUCCEEDED)
        elif kind == "delete" and gangs:
            group, *pods = gangs[step[1] % len(gangs)]
            for obj in (pods[0], group):
                scheduler.tell(ObjectRemoved(obj.kind, obj.namespace, obj.name, obj.uid))
        elif kind == "requota":
            scheduler.admit(*quota_objects(cluster_queue("team-b", step[1], cohort="research")))
        elif kind == "relabel":
            node = nodes[step[1]]
            labels = {**node.labels, "topology.kubernetes.io/zone": "zone-9"}
            scheduler.admit(
                stored(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {**node.metadata, "labels": labels},
                        "spec": dict(node.spec),
                        "status": dict(node.status),
                    }
                )
            )
        elif kind == "wait":
            clock.now += scheduler.settings.quota_hold_s
        assert usage_of(scheduler._quota_snapshot()) == usage_of(built_from_scratch(scheduler))


def test_nothing_is_noted_for_the_quota_usage_while_no_gang_asked_for_quota():
    clock = Clock()
    scheduler = Machine(clock)
    scheduler.load(World(cluster(SMALL) + quota_objects(*QUOTA), {}), now=clock.now)
    scheduler.admit(*team_gang("free", "free", 2))
    scheduler.run()
    assert scheduler.book.touched is None

    scheduler.admit(*team_gang("quota", "a", 1))
    scheduler.run()
    assert scheduler.book.touched == {"a/quota"}  # placed after its ClusterQueue was asked


def test_a_quota_usage_too_far_behind_is_built_anew(monkeypatch):
    clock = Clock()
    scheduler = Machine(clock)
    scheduler.load(World(cluster(SMALL) + quota_objects(*QUOTA), {}), now=clock.now)
    scheduler.admit(*team_gang("first", "a", 1))
    scheduler.run()
    monkeypatch.setattr("libs.core.scheduling.book._TOUCHED_AT_MOST", 2)
    for number in range(3):
        scheduler.admit(*team_gang(f"g{number}", "b", 1))
    for number in range(len(scheduler.book.groups) * 2):
        scheduler.book.touch(f"gone/{number}")  # as many gangs came and went
    assert scheduler.book.touched is None
    scheduler.run()

    assert usage_of(scheduler._quota_snapshot()) == usage_of(built_from_scratch(scheduler))
    assert usage_of(scheduler._quota_snapshot())[1] == {"a/first", "b/g0", "b/g1"}  # b borrows 8 of a's
