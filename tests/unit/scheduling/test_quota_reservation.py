"""Quota reservation before placement: a quota-managed gang enters a cycle only once its ClusterQueue has
quota for it, is placed on its flavor's nodes, and holds its quota while its pods hold nodes."""

from __future__ import annotations

import dataclasses

from libs.api.models.kueue import QUEUE_NAME_LABEL
from libs.cluster.generator import ClusterShape
from libs.core.quota import PreemptionReason
from libs.core.scheduling import MachineSettings, PodPhase
from libs.core.scheduling.inputs import ObjectRemoved, PodsEvicted, World
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import CycleRan, QuotaReleased
from tests.unit.scheduling.conftest import SMALL, Machine
from tests.unit.scheduling.manifests import (
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    pod,
    quota_objects,
    stored,
    team_gang,
)

RACK_0 = "zone-0-b0-r0"
LARGE = ClusterShape(blocks=1, racks_per_block=4, nodes_per_rack=5)  # 20 nodes, 160 GPUs
NOT_ENOUGH = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor {flavor}, {n} more needed"


def machine(clock, *quota) -> Machine:
    scheduler = Machine(clock)
    scheduler.load(World(cluster(SMALL) + quota_objects(*quota), {}), now=clock.now)
    return scheduler


def settle(scheduler: Machine) -> list:
    """Passes until one places nothing (a loan that waited for a gang within its nominal quota goes on the
    pass after it); what they ran."""
    ran: list = []
    while placed := [r for r in scheduler.run() if isinstance(r, CycleRan)]:
        ran += placed
        if not any(r.decision.placed for r in placed):
            break
    return ran


def bound_nodes(ran: CycleRan) -> set[str]:
    assert ran.bind is not None
    return {placement.node_name for placement in ran.bind.placements}


def test_a_gang_within_its_quota_is_placed_on_the_nodes_of_its_flavor(clock):
    rack = {"topology.example.com/rack": RACK_0}
    scheduler = machine(
        clock,
        flavor("rack-0", rack),
        cluster_queue("team-a", 16, flavor_name="rack-0"),
        local_queue("a", "team-a"),
    )
    scheduler.admit(*team_gang("g", "a", 2))

    (ran,) = scheduler.run()

    assert ran.decision.placed
    assert bound_nodes(ran) == {f"{RACK_0}-n00", f"{RACK_0}-n01"}
    assert ran.bind is not None
    assert ran.bind.cluster_queue == "team-a"


def test_a_gang_over_its_quota_waits_gated_in_kueues_words_until_its_queue_has_room(clock):
    scheduler = machine(clock, flavor(), cluster_queue("team-a", 16), local_queue("a", "team-a"))
    first = team_gang("first", "a", 2)
    scheduler.admit(*first)
    scheduler.run()
    scheduler.admit(*team_gang("second", "a", 1))

    (waits,) = scheduler.run()

    assert not waits.decision.placed
    assert waits.quota_message == NOT_ENOUGH.format(flavor="h200", n=8)
    assert waits.quota_reason == "Pending"
    assert waits.preemption_priority is None
    gate = scheduler.queue.gate_reason("a/second")
    assert gate == f"waiting for quota in ClusterQueue team-a: {NOT_ENOUGH.format(flavor='h200', n=8)}"
    clock.now += 3600
    assert scheduler.run() == []  # gated: no cycle, whatever the time

    scheduler.finish([pod.uid for pod in first[1:]], PodPhase.SUCCEEDED)
    released, admitted = scheduler.run()

    assert isinstance(released, QuotaReleased)
    assert (released.group.name, released.finished) == ("first", True)
    assert admitted.decision.placed
    assert admitted.bind is not None
    assert admitted.bind.cluster_queue == "team-a"


def test_a_gang_not_quota_managed_is_scheduled_as_before(clock):
    scheduler = machine(clock, flavor(), cluster_queue("team-a", 0), local_queue("a", "team-a"))
    scheduler.admit(*team_gang("free", "b", 4))

    (ran,) = scheduler.run()

    assert ran.decision.placed
    assert ran.bind is not None
    assert ran.bind.cluster_queue is None


def test_the_queue_name_label_picks_the_local_queue(clock):
    scheduler = machine(
        clock,
        flavor(),
        cluster_queue("team-a", 0),
        cluster_queue("team-big", 32),
        local_queue("a", "team-a"),
        {
            "kind": "LocalQueue",
            "metadata": {"name": "big", "namespace": "a"},
            "spec": {"clusterQueue": "team-big"},
        },
    )
    group, *pods = team_gang("g", "a", 2)
    labelled = stored(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {**dict(group.metadata), "labels": {"kueue.x-k8s.io/queue-name": "big"}},
            "spec": dict(group.spec),
        }
    )
    scheduler.admit(labelled, *pods)

    (ran,) = scheduler.run()

    assert ran.bind is not None
    assert ran.bind.cluster_queue == "team-big"


def test_a_restarted_leader_restores_the_usage_from_the_bindings(clock):
    quota = quota_objects(flavor(), cluster_queue("team-a", 16), local_queue("a", "team-a"))
    running = team_gang("first", "a", 2)
    nodes = [obj.name for obj in cluster(SMALL) if obj.kind == "Node"]
    bindings = {running[1].uid: nodes[0], running[2].uid: nodes[1]}
    scheduler = Machine(clock)
    scheduler.load(World(cluster(SMALL) + quota + running, bindings), now=clock.now)
    scheduler.admit(*team_gang("second", "a", 1))

    (waits,) = scheduler.run()

    assert waits.quota_message == NOT_ENOUGH.format(flavor="h200", n=8)


def test_a_queue_under_its_nominal_quota_asks_to_reclaim_what_another_borrowed(clock):
    scheduler = machine(
        clock,
        flavor(),
        cluster_queue("team-a", 16, cohort="research"),
        cluster_queue("team-b", 16, cohort="research", reclaim="Any"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
    )
    scheduler.admit(*team_gang("a-own", "a", 2, priority=10), *team_gang("a-borrowed", "a", 2, priority=10))
    placed = scheduler.run()
    assert all(ran.decision.placed for ran in placed)
    assert len(placed) == 2
    scheduler.admit(*team_gang("b-train", "b", 1, priority=10))

    (waits,) = scheduler.run()

    assert waits.preemption_priority == 10
    assert waits.quota_message == NOT_ENOUGH.format(flavor="h200", n=8)
    targets = scheduler.quota_targets(scheduler.book.groups["b/b-train"])
    assert targets is not None
    # Equal priority and admission time: the name decides (docs/quotas.md), one gang is enough.
    assert [(t.workload.name, t.reason) for t in targets] == [
        ("a/a-borrowed", PreemptionReason.IN_COHORT_RECLAMATION)
    ]


def test_evicted_gangs_give_their_quota_back_and_the_reclaiming_gang_is_placed_once_they_end(clock):
    scheduler = machine(
        clock,
        flavor(),
        cluster_queue("team-a", 16, cohort="research"),
        cluster_queue("team-b", 16, cohort="research", reclaim="Any"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
    )
    borrowed = team_gang("a-borrowed", "a", 2)
    scheduler.admit(*team_gang("a-own", "a", 2), *borrowed)
    scheduler.run()
    scheduler.admit(*team_gang("b-train", "b", 1))
    (waits,) = scheduler.run()
    assert waits.quota_message is not None

    scheduler.tell(PodsEvicted(tuple(pod.uid for pod in borrowed[1:])))
    scheduler.finish([pod.uid for pod in borrowed[1:]], PodPhase.FAILED)
    outputs = scheduler.run()
    ran = [r for r in outputs if r.group.name == "b-train"]

    assert len(ran) == 1
    assert ran[0].decision.placed
    assert ran[0].bind is not None
    assert ran[0].bind.cluster_queue == "team-b"
    (released,) = [r for r in outputs if isinstance(r, QuotaReleased)]
    assert (released.group.name, released.cluster_queue, released.finished) == ("a-borrowed", "team-a", True)


def test_a_gang_that_fits_its_quota_but_not_the_cluster_holds_its_quota_for_a_bounded_wait(clock):
    scheduler = machine(clock, flavor(), cluster_queue("team-a", 16), local_queue("a", "team-a"))
    scheduler.admit(*team_gang("others", "free", 3))  # 24 of the 32 GPUs, not quota-managed
    scheduler.run()
    scheduler.admit(*team_gang("big", "a", 2))
    (unplaced,) = scheduler.run()
    assert not unplaced.decision.placed
    assert unplaced.quota_message is None

    scheduler.admit(*team_gang("small", "a", 1, priority=100))
    (waits,) = scheduler.run()
    assert waits.group.name == "small"
    assert waits.quota_message == NOT_ENOUGH.format(flavor="h200", n=8)

    assert scheduler.next_wakeup() == clock.now + scheduler.settings.quota_hold_s
    clock.now += scheduler.settings.quota_hold_s
    placed = [ran for ran in scheduler.run() if ran.group.name == "small"]

    assert placed[0].decision.placed  # the held quota was let go, and the more important gang took it


def test_a_strict_fifo_queue_admits_its_head_or_nothing(clock):
    for strategy, small_placed in (("StrictFIFO", False), ("BestEffortFIFO", True)):
        scheduler = machine(
            clock, flavor(), cluster_queue("team-a", 16, strategy=strategy), local_queue("a", "team-a")
        )
        scheduler.admit(*team_gang("first", "a", 1))
        scheduler.run()
        scheduler.admit(*team_gang("big", "a", 2))  # 16 GPUs: only 8 are left
        scheduler.admit(*team_gang("small", "a", 1))  # 8 GPUs: would fit

        ran = {r.group.name: r for r in scheduler.run()}

        assert not ran["big"].decision.placed
        assert ran["small"].decision.placed is small_placed, strategy
        if not small_placed:
            assert ran["small"].quota_message == "StrictFIFO: a/big is ahead of it in ClusterQueue team-a"
            assert scheduler.queue.gate_reason("a/small") == (
                "waiting for quota in ClusterQueue team-a: StrictFIFO: a/big is ahead of it in ClusterQueue "
                "team-a"
            )


def test_with_fair_sharing_the_queue_that_borrows_less_borrows_first(clock):
    for fair_sharing, winner in ((False, "a-next"), (True, "b-next")):
        scheduler = Machine(clock, MachineSettings(fair_sharing=fair_sharing))
        quota = quota_objects(
            flavor(),
            cluster_queue("team-a", 8, cohort="research"),
            cluster_queue("team-b", 8, cohort="research"),
            cluster_queue("idle", 16, cohort="research"),
            local_queue("a", "team-a"),
            local_queue("b", "team-b"),
        )
        scheduler.load(World(cluster(SMALL) + quota, {}), now=clock.now)
        scheduler.admit(*team_gang("a-running", "a", 2))  # team-a borrows 8
        scheduler.admit(*team_gang("b-running", "b", 1))
        settle(scheduler)
        scheduler.admit(*team_gang("a-next", "a", 1))  # 8 GPUs each: room for one of them
        scheduler.admit(*team_gang("b-next", "b", 1))

        ran = [r for r in scheduler.run() if r.decision.placed]

        assert [r.group.name for r in ran] == [winner], fair_sharing


def test_a_gang_whose_placed_pods_all_left_while_another_waits_releases_its_quota_to_wait_again(clock):
    # free is not quota-managed: its pod ending releases nothing.
    scheduler = machine(clock, flavor(), cluster_queue("team-a", 16), local_queue("a", "team-a"))
    gang, free = team_gang("g", "a", 2), team_gang("free", "b", 1)
    scheduler.admit(*gang, *free)
    scheduler.run()
    scheduler.admit(pod("g-2", group="g", namespace="a", gpus=8))  # joins the placed gang, past the quota
    (joining,) = scheduler.run()
    assert joining.quota_message is not None

    scheduler.finish([gang[1].uid, gang[2].uid, free[1].uid], PodPhase.FAILED)
    released = [r for r in scheduler.run() if isinstance(r, QuotaReleased)]

    assert [(r.group.name, r.cluster_queue, r.finished) for r in released] == [("g", "team-a", False)]


def test_a_gang_whose_pods_were_deleted_from_their_nodes_releases_its_quota(clock):
    scheduler = machine(clock, flavor(), cluster_queue("team-a", 16), local_queue("a", "team-a"))
    group, first, second = team_gang("g", "a", 2)
    scheduler.admit(group, first, second)
    scheduler.run()

    scheduler.tell(ObjectRemoved("Pod", "a", first.name, first.uid))
    assert not any(isinstance(r, QuotaReleased) for r in scheduler.run())  # the other still holds its node
    scheduler.tell(ObjectRemoved("Pod", "a", second.name, second.uid))
    released = [r for r in scheduler.run() if isinstance(r, QuotaReleased)]

    assert [(r.group.name, r.finished) for r in released] == [("g", True)]


def _with_spec(obj, **spec):
    """The stored pod with fields added to its spec."""
    return stored(
        {"apiVersion": "v1", "kind": obj.kind, "metadata": dict(obj.metadata), "spec": {**obj.spec, **spec}}
    )


def test_a_tainted_flavor_takes_only_gangs_whose_pods_tolerate_its_taint(clock):
    tainted = flavor()
    tainted["spec"]["nodeTaints"] = [{"key": "reserved", "value": "team-a", "effect": "NoSchedule"}]
    scheduler = machine(clock, tainted, cluster_queue("team-a", 32), local_queue("a", "team-a"))
    group, *pods = team_gang("plain", "a", 1)
    scheduler.admit(group, *pods)
    (refused,) = scheduler.run()
    assert not refused.decision.placed
    assert "untolerated taint reserved=team-a:NoSchedule in flavor h200" in (refused.quota_message or "")

    toleration = {"key": "reserved", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}
    group, *pods = team_gang("tolerant", "a", 1)
    scheduler.admit(group, *(_with_spec(p, tolerations=[toleration]) for p in pods))
    placed = [r for r in scheduler.run() if r.group.name == "tolerant"]
    assert placed[0].decision.placed


def test_an_init_container_larger_than_the_containers_counts_its_request(clock):
    scheduler = machine(clock, flavor(), cluster_queue("team-a", 16), local_queue("a", "team-a"))
    group, *pods = team_gang("warmup", "a", 1, gpus=8)
    init = {"name": "warm", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "24"}}}
    scheduler.admit(group, *(_with_spec(p, initContainers=[init]) for p in pods))

    (waits,) = scheduler.run()

    assert not waits.decision.placed
    assert "insufficient quota for nvidia.com/gpu in flavor h200" in (waits.quota_message or "")
    assert "current podset request (24) > maximum capacity (16)" in (waits.quota_message or "")


def two_teams_and_an_unplaced_borrower(clock) -> Machine:
    """Teams a and b of 16 GPUs each in one cohort; 24 of the 32 GPUs held by gangs not quota-managed, and
    team-b's b/b-big (24 GPUs, 8 borrowed) admitted but not placed: it holds its quota in memory."""
    scheduler = machine(
        clock,
        flavor(),
        cluster_queue("team-a", 16, cohort="research", reclaim="Any"),
        cluster_queue("team-b", 16, cohort="research", reclaim="Any"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
    )
    scheduler.admit(*team_gang("others", "free", 3))
    scheduler.run()
    scheduler.admit(*team_gang("b-big", "b", 3))
    (unplaced,) = scheduler.run()
    assert not unplaced.decision.placed
    assert scheduler.book.groups["b/b-big"].quota_hold is not None
    return scheduler


def test_a_gang_that_would_borrow_leaves_an_unplaced_borrower_its_quota(clock):
    scheduler = two_teams_and_an_unplaced_borrower(clock)
    scheduler.admit(*team_gang("a-loan", "a", 3, priority=10))  # would borrow 8 too

    (waits,) = scheduler.run()

    assert waits.preemption_priority is None
    assert waits.quota_message == NOT_ENOUGH.format(flavor="h200", n=16)
    assert scheduler.book.groups["b/b-big"].quota_hold is not None
    assert scheduler.book.groups["a/a-loan"].quota_hold is None


def test_a_gang_within_its_nominal_quota_takes_back_what_an_unplaced_borrower_holds(clock):
    scheduler = two_teams_and_an_unplaced_borrower(clock)
    scheduler.admit(*team_gang("a-own", "a", 2, priority=10))  # within team-a's nominal quota

    (ran,) = scheduler.run()

    # Admitted at once (not after b/b-big's bounded wait): b/b-big never ran, it loses only its reservation.
    assert ran.group.name == "a-own"
    assert ran.quota_message is None
    assert scheduler.book.groups["a/a-own"].quota_hold is not None
    assert scheduler.book.groups["b/b-big"].quota_hold is None


def test_a_gang_short_of_quota_that_bindings_hold_too_still_asks_the_preemptor(clock):
    scheduler = machine(
        clock,
        flavor(),
        cluster_queue("team-a", 16, cohort="research", reclaim="Any"),
        cluster_queue("team-b", 16, cohort="research", reclaim="Any"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
    )
    scheduler.admit(*team_gang("b-running", "b", 3))  # team-b borrows 8 of team-a's quota, on nodes
    scheduler.run()
    scheduler.admit(*team_gang("a-own", "a", 2, priority=10))

    (waits,) = scheduler.run()

    assert waits.preemption_priority == 10
    assert waits.quota_message == NOT_ENOUGH.format(flavor="h200", n=8)


def test_no_gang_is_preempted_for_a_gang_that_would_still_wait_for_its_quota_after(clock):
    # Fair sharing: after the eviction team-a's gang would borrow more than team-c's head, which would take
    # the quota freed first; team-a's gang would ask again, and evict again.
    scheduler = Machine(clock, MachineSettings(fair_sharing=True))
    quota = quota_objects(
        flavor(),
        cluster_queue("team-a", 32, cohort="research", reclaim="Any"),
        cluster_queue("team-b", 32, cohort="research"),
        cluster_queue("team-c", 32, cohort="research"),
        cluster_queue("idle", 64, cohort="research"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
        local_queue("c", "team-c"),
    )
    scheduler.load(World(cluster(LARGE) + quota, {}), now=clock.now)
    scheduler.admit(*team_gang("a-job", "a", 4), *team_gang("c-job", "c", 4))
    scheduler.admit(*team_gang("b1", "b", 6), *team_gang("b2", "b", 4))  # team-b borrows 48 of 160
    assert len([ran for ran in settle(scheduler) if ran.decision.placed]) == 4
    clock.now += 60
    scheduler.admit(*team_gang("c-head", "c", 3))  # would borrow 24: waits, team-c may not reclaim
    clock.now += 60
    scheduler.admit(*team_gang("a-next", "a", 4))  # would borrow 32: reclaims by fair sharing
    ran = {r.group.name: r for r in scheduler.run()}
    assert ran["a-next"].preemption_priority == 0

    assert scheduler.quota_targets(scheduler.book.groups["a/a-next"]) == ()


def test_a_gang_that_preemption_gets_admitted_has_its_targets(clock):
    scheduler = Machine(clock, MachineSettings(fair_sharing=True))
    quota = quota_objects(
        flavor(),
        cluster_queue("team-a", 32, cohort="research", reclaim="Any"),
        cluster_queue("team-b", 32, cohort="research"),
        cluster_queue("team-c", 32, cohort="research"),
        cluster_queue("idle", 64, cohort="research"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
        local_queue("c", "team-c"),
    )
    scheduler.load(World(cluster(LARGE) + quota, {}), now=clock.now)
    scheduler.admit(*team_gang("a-job", "a", 4), *team_gang("c-job", "c", 4))
    scheduler.admit(*team_gang("b1", "b", 6), *team_gang("b2", "b", 4))
    settle(scheduler)
    clock.now += 60
    scheduler.admit(*team_gang("a-next", "a", 4))
    scheduler.run()

    targets = scheduler.quota_targets(scheduler.book.groups["a/a-next"])

    assert targets is not None
    assert [t.workload.name for t in targets] == ["b/b1"]  # equal priority and admission time: by name


def test_with_fair_sharing_a_loan_waits_for_a_gang_within_its_nominal_quota_then_goes(clock):
    scheduler = Machine(clock, MachineSettings(fair_sharing=True))
    quota = quota_objects(
        flavor(),
        cluster_queue("team-a", 8, cohort="research"),
        cluster_queue("team-b", 16, cohort="research"),
        cluster_queue("idle", 8, cohort="research"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
    )
    scheduler.load(World(cluster(SMALL) + quota, {}), now=clock.now)
    scheduler.admit(*team_gang("a-running", "a", 1))  # team-a at its nominal quota
    scheduler.run()
    clock.now += 60
    scheduler.admit(*team_gang("a-loan", "a", 1))  # would borrow 8: first in queue order
    clock.now += 60
    scheduler.admit(*team_gang("b-own", "b", 2))  # within team-b's nominal quota

    first = scheduler.run()
    placed = [r.group.name for r in first if r.decision.placed]
    waiting = {r.group.name: r for r in first if not r.decision.placed}
    placed += [r.group.name for r in scheduler.run() if r.decision.placed]

    assert waiting["a-loan"].quota_message == (
        "b/b-own is admitted within the nominal quota of ClusterQueue team-b first"
    )
    assert placed == ["b-own", "a-loan"]


def queued_to(group: ApiObject, queue: str) -> ApiObject:
    labels = {**(group.metadata.get("labels") or {}), QUEUE_NAME_LABEL: queue}
    return dataclasses.replace(group, metadata={**group.metadata, "labels": labels})


def test_a_gang_queued_to_a_local_queue_that_does_not_exist_waits_until_it_is_created(clock):
    scheduler = machine(clock, flavor(), cluster_queue("team-a", 16))
    group, *pods = team_gang("g", "a", 2)
    scheduler.admit(queued_to(group, "research"), *pods)

    (waits,) = scheduler.run()

    assert not waits.decision.placed
    assert waits.quota_message == "LocalQueue research doesn't exist"
    assert waits.quota_reason == "Inadmissible"
    assert scheduler.queue.gate_reason("a/g") == "waiting for quota: LocalQueue research doesn't exist"
    assert scheduler.run() == []  # gated until a quota object changes

    queue = local_queue("a", "team-a")
    scheduler.admit(*quota_objects({**queue, "metadata": {"name": "research", "namespace": "a"}}))
    (admitted,) = scheduler.run()

    assert admitted.decision.placed
    assert admitted.bind is not None
    assert admitted.bind.cluster_queue == "team-a"
