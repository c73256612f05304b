"""The scheduler state machine: inputs in, outputs out, on a clock the test moves."""

import dataclasses
from collections import Counter

from libs.core.scheduling import RACK_KEY, PodPhase, TopologyDomainRef
from libs.core.scheduling.inputs import (
    ClaimsAllocated,
    ClaimsAllocationFailed,
    Nominated,
    NominationCleared,
    ObjectRemoved,
    World,
)
from libs.core.scheduling.outputs import AllocationFailed, Binding, CycleRan, Disrupted, Restart, TimedOut
from tests.unit.scheduling.conftest import SMALL, Machine
from tests.unit.scheduling.manifests import cluster, gang, pod, podgroup, two_gpus_template, workload


def bound_gpus_per_node(outcomes) -> Counter:
    used: Counter = Counter()
    for outcome in outcomes:
        binding = outcome.bind if isinstance(outcome, CycleRan) else outcome
        if isinstance(binding, Binding):
            for placement in binding.placements:
                used[placement.node_name] += len(placement.devices.get("gpu.example.com", ()))
    return used


def admit(scheduler: Machine, *objects) -> None:
    scheduler.admit(*objects)


def test_a_gang_that_fits_is_placed_and_bound_in_one_cycle(scheduler, clock):
    admit(scheduler, podgroup("g", min_count=4), *gang("g", 4, gpus=2))

    (ran,) = scheduler.run_pass(clock.now)

    assert isinstance(ran, CycleRan)
    assert ran.decision.placed
    assert ran.bind is not None
    assert sorted(p.pod_name for p in ran.bind.placements) == ["g-0", "g-1", "g-2", "g-3"]
    assert ran.bind.first
    assert scheduler.run_pass(clock.now) == []


def test_a_gang_is_not_tried_until_its_workload_and_min_count_pods_exist(clock):
    scheduler = Machine(clock)
    scheduler.load(World(cluster(SMALL), {}), now=clock.now)
    admit(scheduler, podgroup("g", min_count=4), *gang("g", 3))
    assert scheduler.run_pass(clock.now) == []

    admit(scheduler, workload())
    assert scheduler.run_pass(clock.now) == []

    admit(scheduler, pod("g-3", group="g"))
    (ran,) = scheduler.run_pass(clock.now)
    assert ran.decision.placed


def test_pods_that_arrive_before_their_podgroup_wait_for_it(scheduler, clock):
    admit(scheduler, *gang("g", 2))
    assert scheduler.run_pass(clock.now) == []
    admit(scheduler, podgroup("g", min_count=2))
    (ran,) = scheduler.run_pass(clock.now)
    assert ran.decision.placed


def test_no_node_is_over_committed_when_gangs_fill_the_cluster(scheduler, clock):
    for index in range(6):
        admit(scheduler, podgroup(f"g{index}", min_count=3), *gang(f"g{index}", 3, gpus=2))

    outcomes = scheduler.run_pass(clock.now)

    placed = [o for o in outcomes if o.decision.placed]
    assert len(placed) == 5  # 30 of 32 GPUs; the sixth gang needs 6 more
    assert max(bound_gpus_per_node(outcomes).values()) <= 8


def test_a_gang_that_does_not_fit_waits_with_the_kube_scheduler_reason_and_fits_when_room_frees(
    scheduler, clock
):
    admit(scheduler, podgroup("big", min_count=3), *gang("big", 3, gpus=8))
    (first,) = scheduler.run_pass(clock.now)
    admit(scheduler, podgroup("late", min_count=2), *gang("late", 2, gpus=8))

    (waiting,) = scheduler.run_pass(clock.now)

    assert not waiting.decision.placed
    assert waiting.decision.message.startswith("0/4 nodes are available: 3 Insufficient nvidia.com/gpu")
    assert waiting.backoff_s == 1.0
    assert waiting.condition_false

    scheduler.finish([p.pod_uid for p in first.bind.placements], PodPhase.SUCCEEDED, "done")
    assert scheduler.run_pass(clock.now) == []  # still backing off
    clock.now += 1.0
    (retried,) = scheduler.run_pass(clock.now)
    assert retried.decision.placed
    assert retried.attempt == 2
    assert retried.cause == "done"


def test_a_topology_gang_lands_in_one_rack(scheduler, clock):
    admit(scheduler, podgroup("spread", min_count=4, topology_key=RACK_KEY), *gang("spread", 4, gpus=4))

    (ran,) = scheduler.run_pass(clock.now)

    assert ran.decision.placed
    racks = {p.node_name.rsplit("-n", 1)[0] for p in ran.bind.placements}
    assert len(racks) == 1
    assert ran.bind.domain == TopologyDomainRef(RACK_KEY, racks.pop())


def test_pods_added_to_a_scheduled_gang_join_its_domain(scheduler, clock):
    admit(scheduler, podgroup("g", min_count=2, topology_key=RACK_KEY), *gang("g", 2, gpus=2))
    (first,) = scheduler.run_pass(clock.now)
    admit(scheduler, pod("g-extra", group="g", gpus=2))

    (joined,) = scheduler.run_pass(clock.now)

    assert joined.decision.placed
    assert joined.bind.domain == first.bind.domain
    assert not joined.bind.first
    assert joined.bind.placements[0].node_name.startswith(first.bind.domain.value)


def test_a_gang_with_claims_is_proposed_and_bound_only_after_its_claims_are_allocated(scheduler, clock):
    claims = [{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]
    group = podgroup("g", min_count=2, claims=claims)
    admit(scheduler, group, *gang("g", 2))

    (proposed,) = scheduler.run_pass(clock.now)

    assert proposed.decision.placed
    assert proposed.bind is None
    assert proposed.claims == ("fabric",)
    scheduler.handle(ClaimsAllocated(group.uid, "allocated"), now=clock.now)
    (binding,) = scheduler.run_pass(clock.now)
    assert isinstance(binding, Binding)
    assert binding.cause == "allocated"
    assert len(binding.placements) == 2


def test_a_refused_allocation_is_forgotten_and_the_gang_retries(scheduler, clock):
    # The rack fabric keeps the gang in one rack: two whole nodes of it.
    group = podgroup(
        "g", min_count=2, claims=[{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]
    )
    admit(scheduler, group, *gang("g", 2, gpus=8))
    scheduler.run_pass(clock.now)
    assert sum(node.count("gpu.example.com") for node in scheduler.snapshot.node_states()) == 16

    scheduler.handle(ClaimsAllocationFailed(group.uid, "no fabric device left", "refused"), now=clock.now)

    (failed,) = scheduler.run_pass(clock.now)
    assert isinstance(failed, AllocationFailed)
    assert "no fabric device left" in failed.reason
    assert sum(node.count("gpu.example.com") for node in scheduler.snapshot.node_states()) == 32
    clock.now += failed.backoff_s
    (again,) = scheduler.run_pass(clock.now)
    assert again.decision.placed
    assert again.claims


def test_a_gang_past_its_max_pending_seconds_gives_up_and_its_pods_fail(scheduler, clock):
    group = podgroup("g", min_count=5, annotations={"podway.io/max-pending-seconds": "30"})
    admit(scheduler, group, *gang("g", 5, gpus=8))
    (waiting,) = scheduler.run_pass(clock.now)
    assert not waiting.decision.placed

    clock.now += 31
    (gave_up,) = scheduler.run_pass(clock.now)

    assert isinstance(gave_up, TimedOut)
    assert gave_up.message.startswith("gave up after 31 s pending")
    assert len(gave_up.pods) == 5
    assert all(scheduler.book.pods[p.uid].phase == PodPhase.FAILED for p in gave_up.pods)
    clock.now += 600
    assert scheduler.run_pass(clock.now) == []


def test_a_running_gang_that_breaks_is_restarted_when_its_policy_says_always(scheduler, clock):
    group = podgroup("g", min_count=3, annotations={"podway.io/gang-restart": "Always"})
    admit(scheduler, group, *gang("g", 3))
    (ran,) = scheduler.run_pass(clock.now)
    broken, *rest = ran.bind.placements

    scheduler.finish([broken.pod_uid], PodPhase.FAILED, "crash")

    (restart,) = scheduler.run_pass(clock.now)
    assert isinstance(restart, Restart)
    assert sorted(p.uid for p in restart.evict) == sorted(p.pod_uid for p in rest)
    assert restart.cause == "crash"
    # The evicted pods failing is the restart going through, not another break: the gang waits to be placed
    # again, anywhere.
    scheduler.finish([p.pod_uid for p in rest], PodPhase.FAILED, "evicted")
    (disrupted,) = scheduler.run_pass(clock.now)
    assert isinstance(disrupted, Disrupted)
    assert (disrupted.group.uid, disrupted.cause) == (group.uid, "evicted")
    assert scheduler.run_pass(clock.now) == []


def test_a_gang_that_breaks_is_left_alone_when_its_policy_says_never(scheduler, clock):
    admit(scheduler, podgroup("g", min_count=3), *gang("g", 3))
    (ran,) = scheduler.run_pass(clock.now)
    scheduler.finish([ran.bind.placements[0].pod_uid], PodPhase.FAILED)
    assert scheduler.run_pass(clock.now) == []


def test_preemption_is_requested_once_while_nothing_changes_when_lower_priority_pods_hold_the_room(
    scheduler, clock
):
    admit(scheduler, podgroup("low", min_count=4, priority=10), *gang("low", 4, gpus=8))
    scheduler.run_pass(clock.now)
    admit(scheduler, podgroup("high", min_count=1, priority=1000), *gang("high", 1, gpus=8))

    (first,) = scheduler.run_pass(clock.now)
    clock.now += 301  # unschedulable groups are retried after at most five minutes
    (second,) = scheduler.run_pass(clock.now)

    assert first.preemption_priority == 1000
    assert not second.decision.placed
    assert second.preemption_priority is None


def test_preemption_is_requested_again_once_the_nomination_it_got_is_cleared(scheduler, clock):
    admit(scheduler, podgroup("low", min_count=4, priority=10), *gang("low", 4, gpus=8))
    scheduler.run_pass(clock.now)
    high = podgroup("high", min_count=1, priority=1000)
    admit(scheduler, high, *gang("high", 1, gpus=8))
    (first,) = scheduler.run_pass(clock.now)
    scheduler.tell(Nominated(high.uid, ("nowhere",), clock.now + 60))
    clock.now += 2
    assert all(o.preemption_priority is None for o in scheduler.run_pass(clock.now))

    scheduler.tell(NominationCleared(high.uid))
    clock.now += 2
    (again,) = scheduler.run_pass(clock.now)

    assert first.preemption_priority == again.preemption_priority == 1000


def test_no_preemption_is_requested_when_only_equal_or_higher_priority_pods_run(scheduler, clock):
    admit(scheduler, podgroup("a", min_count=4, priority=1000), *gang("a", 4, gpus=8))
    scheduler.run_pass(clock.now)
    admit(scheduler, podgroup("b", min_count=1, priority=1000), *gang("b", 1, gpus=8))
    (ran,) = scheduler.run_pass(clock.now)
    assert ran.preemption_priority is None


def test_room_nominated_for_a_preemptor_is_not_taken_by_another_group(scheduler, clock):
    admit(scheduler, podgroup("low", min_count=1, priority=10), *gang("low", 1, gpus=8))
    (low,) = scheduler.run_pass(clock.now)
    victim_node = low.bind.placements[0].node_name
    # Fill every other node, so the victim's node is the only room.
    admit(scheduler, podgroup("rest", min_count=3, priority=10), *gang("rest", 3, gpus=8))
    scheduler.run_pass(clock.now)
    high = podgroup("high", min_count=1, priority=1000)
    admit(scheduler, high, *gang("high", 1, gpus=8))
    scheduler.run_pass(clock.now)

    scheduler.handle(Nominated(high.uid, (victim_node,), clock.now + 60), now=clock.now)
    scheduler.finish([low.bind.placements[0].pod_uid], PodPhase.FAILED)
    admit(scheduler, podgroup("thief", min_count=1, priority=500), *gang("thief", 1, gpus=8))
    clock.now += 5
    outcomes = {o.group.name: o for o in scheduler.run_pass(clock.now)}

    assert outcomes["high"].decision.placed
    assert outcomes["high"].bind.placements[0].node_name == victim_node
    assert not outcomes["thief"].decision.placed


def test_a_replayed_admission_changes_nothing(scheduler, clock):
    group = podgroup("g", min_count=2)
    members = gang("g", 2)
    admit(scheduler, group, *members)
    (ran,) = scheduler.run_pass(clock.now)

    admit(scheduler, group, *members)

    assert scheduler.run_pass(clock.now) == []
    assert all(scheduler.book.pods[m.uid].node is not None for m in members)
    assert ran.decision.placed


def test_a_new_leader_starts_from_the_stored_bindings(clock):
    group = podgroup("g", min_count=2, status={"placement": {"domain": None, "nodes": [], "pods": {}}})
    members = gang("g", 2, gpus=8)
    scheduler = Machine(clock)
    nodes = cluster(SMALL)
    node_names = [o.name for o in nodes if o.kind == "Node"]

    scheduler.load(
        World(
            [*nodes, workload(), group, *members],
            {members[0].uid: node_names[0], members[1].uid: node_names[1]},
        ),
        now=clock.now,
    )

    assert scheduler.run_pass(clock.now) == []
    assert scheduler.snapshot.node_free(node_names[0]).devices["gpu.example.com"] == 0
    assert scheduler.book.groups["ml/g"].scheduled


def test_a_new_leaders_first_cycle_for_a_waiting_group_answers_the_latest_event_of_its_story(clock):
    group = podgroup("g", min_count=2)
    scheduler = Machine(clock)
    world = [*cluster(SMALL), workload(), group, *gang("g", 2, gpus=8)]
    scheduler.load(World(world, {}, causes={group.uid: "latest-of-g"}), now=clock.now)

    (ran,) = scheduler.run_pass(clock.now)
    assert ran.cause == "latest-of-g"


def test_a_pod_without_a_podgroup_is_scheduled_on_its_own(scheduler, clock):
    admit(scheduler, pod("solo", gpus=1))
    (ran,) = scheduler.run_pass(clock.now)
    assert ran.group.standalone
    assert ran.bind.placements[0].pod_name == "solo"


def test_deleting_a_bound_pod_gives_its_room_back(scheduler, clock):
    admit(scheduler, podgroup("g", min_count=4), *gang("g", 4, gpus=8))
    (ran,) = scheduler.run_pass(clock.now)
    victim = scheduler.book.pods[ran.bind.placements[0].pod_uid].obj

    scheduler.handle(ObjectRemoved("Pod", victim.namespace, victim.name, victim.uid), now=clock.now)

    assert sum(node.count("gpu.example.com") for node in scheduler.snapshot.node_states()) == 8


def test_devices_a_pods_claim_asks_for_are_part_of_where_it_fits(scheduler, clock):
    admit(scheduler, two_gpus_template())
    claims = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    admit(
        scheduler,
        podgroup("claimed", min_count=17),
        *gang("claimed", 17, gpus=0, cpu="1", memory="1Gi", claims=claims),
    )

    (ran,) = scheduler.run_pass(clock.now)

    assert not ran.decision.placed
    assert ran.decision.message == "0/4 nodes are available. only 16 of the 17 pods the gang needs fit."


def test_a_podgroup_marked_for_deletion_is_not_scheduled(scheduler, clock):
    group = podgroup("g", min_count=2)
    scheduler.admit(*gang("g", 2))
    deleting = dataclasses.replace(
        group, metadata={**group.metadata, "deletionTimestamp": "2026-11-30T12:00:00Z"}, resource_version=2
    )

    scheduler.admit(deleting)

    assert scheduler.run_pass(clock.now) == []
    assert group.key not in scheduler.queue


def test_a_gang_whose_pods_are_deleted_from_their_nodes_is_placed_anew_outside_its_old_domain(
    scheduler, clock
):
    admit(scheduler, podgroup("g", min_count=2, topology_key=RACK_KEY), *gang("g", 2, gpus=2))
    (first,) = scheduler.run_pass(clock.now)
    assert first.bind.domain is not None

    for placement in first.bind.placements:
        uid, name = placement.pod_uid, placement.pod_name
        scheduler.handle(ObjectRemoved("Pod", "ml", name, uid, "deleted"), now=clock.now)

    (disrupted,) = scheduler.run_pass(clock.now)
    assert isinstance(disrupted, Disrupted)
    group = scheduler.book.groups["ml/g"]
    assert (group.domain, group.scheduled, group.placement) == (None, False, {})


def test_a_new_leader_does_not_take_a_gang_placed_anew_for_scheduled(clock):
    reset = {"placement": {"domain": None, "nodes": [], "pods": {}}}  # as a restart or a disruption leaves it
    group = podgroup("g", min_count=8, topology_key=RACK_KEY, status=reset)
    scheduler = Machine(clock)
    scheduler.load(World([*cluster(SMALL), workload(), group, *gang("g", 8, gpus=8)], {}), now=clock.now)

    (ran,) = scheduler.run_pass(clock.now)

    assert not ran.decision.placed
    assert ran.condition_false, "its pods are queued: PodGroupScheduled must not stay True"
