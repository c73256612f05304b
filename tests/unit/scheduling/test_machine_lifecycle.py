"""The scheduler state machine's lifecycle rules: stale and late events, claims that never come, pending
time limits, queueing hints, and what a new leader rebuilds from what was stored."""

import dataclasses

from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import (
    ClaimsAllocated,
    NominationRecord,
    ObjectRemoved,
    ObjectStored,
    PodsEvicted,
    World,
)
from libs.core.scheduling.machine import MachineSettings
from libs.core.scheduling.outputs import AllocationFailed, Binding, CycleRan, Disrupted, TimedOut
from libs.core.scheduling.queue import QueueState
from tests.unit.scheduling.conftest import SMALL, Clock, Machine
from tests.unit.scheduling.manifests import cluster, gang, pod, podgroup, workload

FABRIC = [{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]


def free_gpus(machine: Machine) -> int:
    return sum(node.count("gpu.example.com") for node in machine.snapshot.node_states())


def fresh(clock: Clock, settings: MachineSettings | None = None, *objects) -> Machine:
    machine = Machine(clock, settings)
    machine.load(World([*cluster(SMALL), workload(), *objects], {}), now=clock.now)
    return machine


# -- order and staleness ----------------------------------------------------------------------------------


def test_a_late_admission_of_a_removed_pod_does_not_bring_it_back(scheduler):
    late = pod("ghost", gpus=8)
    scheduler.tell(ObjectRemoved("Pod", late.namespace, late.name, late.uid))

    scheduler.admit(late)

    assert scheduler.run() == []
    assert late.uid not in scheduler.book.pods
    assert free_gpus(scheduler) == 32


def test_a_removed_uid_is_forgotten_after_its_time(clock):
    machine = fresh(clock, MachineSettings(tombstone_ttl_s=60))
    late = pod("late", gpus=1)
    machine.tell(ObjectRemoved("Pod", late.namespace, late.name, late.uid))
    clock.now += 61
    machine.run()

    machine.admit(late)

    (ran,) = machine.run()
    assert ran.decision.placed


def test_an_older_version_of_an_object_is_ignored(scheduler):
    group = dataclasses.replace(podgroup("g", min_count=2, priority=5), resource_version=3)
    older = dataclasses.replace(podgroup("g", min_count=2, priority=1), uid=group.uid, resource_version=2)
    scheduler.admit(group, older)

    assert scheduler.book.groups["ml/g"].obj.spec["priority"] == 5


def test_an_event_about_a_new_incarnation_is_not_mistaken_for_the_old_one(scheduler, clock):
    old = gang("g", 2, gpus=8)
    scheduler.admit(podgroup("g", min_count=2), *old)
    (_ran,) = scheduler.run()
    for member in old:
        scheduler.tell(ObjectRemoved("Pod", member.namespace, member.name, member.uid))
    new = gang("g", 2, gpus=8)  # same names, new uids

    scheduler.admit(*new)

    disrupted, again = scheduler.run()
    assert isinstance(disrupted, Disrupted)  # its pods left their nodes: it is placed anew
    assert again.decision.placed
    assert {p.pod_uid for p in again.bind.placements} == {m.uid for m in new}
    assert free_gpus(scheduler) == 32 - 16


# -- claims -------------------------------------------------------------------------------------------------


def test_a_placement_whose_claims_never_come_is_released_and_retried(clock):
    machine = fresh(clock, MachineSettings(claims_timeout_s=30))
    machine.admit(podgroup("g", min_count=2, claims=FABRIC), *gang("g", 2, gpus=8))
    (proposed,) = machine.run()
    assert proposed.claims == ("fabric",)
    assert free_gpus(machine) == 16

    clock.now += 29
    assert machine.run() == []
    clock.now += 1
    (released,) = machine.run()

    assert isinstance(released, AllocationFailed)
    assert released.reason == (
        "ResourceClaims fabric were not allocated within 30 s; the placement was released"
    )
    assert free_gpus(machine) == 32
    assert machine.queue.state("ml/g") in (QueueState.PARKED, QueueState.BACKING_OFF)
    clock.now += released.backoff_s
    (retried,) = machine.run()
    assert retried.decision.placed
    assert retried.claims


def test_claims_allocated_after_the_placement_was_released_bind_nothing(clock):
    machine = fresh(clock, MachineSettings(claims_timeout_s=30))
    group = podgroup("g", min_count=2, claims=FABRIC)
    machine.admit(group, *gang("g", 2, gpus=8))
    machine.run()
    clock.now += 30
    machine.run()

    machine.tell(ClaimsAllocated(group.uid))

    assert not any(isinstance(output, Binding) for output in machine.run())


def test_max_pending_seconds_counts_the_time_spent_waiting_for_claims(clock):
    machine = fresh(clock, MachineSettings(claims_timeout_s=300))
    group = podgroup("g", min_count=2, claims=FABRIC, annotations={"podway.io/max-pending-seconds": "20"})
    machine.admit(group, *gang("g", 2, gpus=8))
    machine.run()

    clock.now += 21
    (gave_up,) = machine.run()

    assert isinstance(gave_up, TimedOut)
    assert gave_up.message.startswith("gave up after 21 s pending (podway.io/max-pending-seconds: 20)")
    assert free_gpus(machine) == 32
    assert all(machine.book.pods[p.uid].phase == PodPhase.FAILED for p in gave_up.pods)


# -- queueing hints -----------------------------------------------------------------------------------------


HOST = "kubernetes.io/hostname"
NODES = [o.name for o in cluster(SMALL) if o.kind == "Node"]


def test_capacity_freed_where_a_parked_gang_cannot_use_it_does_not_wake_it(scheduler):
    # One GPU busy on every node, two on the first: a pod needing a whole 8-GPU node is parked.
    small = [
        pod(f"small-{i}", gpus=1, node_selector={HOST: node}) for i, node in enumerate([NODES[0], *NODES])
    ]
    scheduler.admit(*small)
    scheduler.run()
    scheduler.admit(podgroup("whole", min_count=1), *gang("whole", 1, gpus=8))
    (parked,) = scheduler.run()
    assert not parked.decision.placed
    wakeups = scheduler.stats.wakeups

    scheduler.finish([small[0].uid], PodPhase.SUCCEEDED)  # the first node still has a GPU busy
    scheduler.run()

    assert scheduler.stats.wakeups == wakeups
    assert scheduler.queue.state("ml/whole") == QueueState.PARKED

    scheduler.finish([small[1].uid], PodPhase.SUCCEEDED)  # now it is whole
    scheduler.run()
    assert scheduler.stats.wakeups == wakeups + 1
    assert scheduler.queue.state("ml/whole") != QueueState.PARKED


def test_capacity_freed_where_a_rack_constrained_gang_still_cannot_fit_does_not_wake_it(scheduler):
    rack = "topology.example.com/rack"
    scheduler.admit(podgroup("fill-a", min_count=2, topology_key=rack), *gang("fill-a", 2, gpus=8))
    scheduler.admit(podgroup("fill-b", min_count=2, topology_key=rack), *gang("fill-b", 2, gpus=4))
    filled = {o.group.name: o.bind.placements for o in scheduler.run()}
    scheduler.admit(podgroup("late", min_count=2, topology_key=rack), *gang("late", 2, gpus=8))
    (late,) = scheduler.run()
    assert not late.decision.placed
    wakeups = scheduler.stats.wakeups

    # fill-b's rack gets to 12 free GPUs, fill-a's to 8: neither holds late's 16.
    scheduler.finish([filled["fill-b"][0].pod_uid, filled["fill-a"][0].pod_uid], PodPhase.SUCCEEDED)
    scheduler.run()
    assert scheduler.stats.wakeups == wakeups

    scheduler.finish([filled["fill-a"][1].pod_uid], PodPhase.SUCCEEDED)
    scheduler.run()
    assert scheduler.stats.wakeups == wakeups + 1


def test_a_parked_group_whose_own_pods_arrive_is_tried_again(scheduler, clock):
    scheduler.admit(podgroup("basic", min_count=None), pod("basic-0", group="basic", gpus=9))
    (failed,) = scheduler.run()
    assert not failed.decision.placed
    assert scheduler.queue.state("ml/basic") == QueueState.PARKED

    scheduler.admit(pod("basic-1", group="basic", gpus=1))

    assert scheduler.queue.state("ml/basic") != QueueState.PARKED


# -- a new leader ---------------------------------------------------------------------------------------------


def test_a_new_leader_still_waits_for_the_claims_a_proposal_asked_for(clock):
    group = podgroup("g", min_count=2, claims=FABRIC)
    members = gang("g", 2, gpus=8)
    first = fresh(clock, None, group, *members)
    (proposed,) = first.run()
    assert isinstance(proposed, CycleRan)
    assert proposed.proposal_status is not None
    stored_group = dataclasses.replace(group, status={"proposal": dict(proposed.proposal_status)})

    successor = fresh(clock, None, stored_group, *members)

    assert successor.run() == []
    assert free_gpus(successor) == 16
    successor.tell(ClaimsAllocated(group.uid, "allocated"))
    (bound,) = successor.run()
    assert isinstance(bound, Binding)
    assert {(p.pod_uid, p.node_name) for p in bound.placements} == {
        (p.pod_uid, p.node_name) for p in proposed.decision.placements
    }


def test_a_new_leader_releases_a_stored_proposal_once_its_time_is_up(clock):
    group = podgroup("g", min_count=2, claims=FABRIC)
    members = gang("g", 2, gpus=8)
    (proposed,) = fresh(clock, None, group, *members).run()
    stored_group = dataclasses.replace(group, status={"proposal": dict(proposed.proposal_status)})
    clock.now += 31

    successor = fresh(clock, None, stored_group, *members)

    (released,) = successor.run()
    assert isinstance(released, AllocationFailed)
    assert free_gpus(successor) == 32


def test_pods_on_their_way_out_keep_their_room_for_a_new_leader_and_do_not_break_their_gang(clock):
    group = podgroup("g", min_count=2, annotations={"podway.io/gang-restart": "Always"})
    members = gang("g", 2, gpus=8)
    (ran,) = fresh(clock, None, group, *members).run()
    bindings = {p.pod_uid: p.node_name for p in ran.bind.placements}
    bound_group = dataclasses.replace(group, status={"placement": dict(ran.bind.placement_status)})
    successor = Machine(clock)
    successor.load(
        World([*cluster(SMALL), workload(), bound_group, *members], bindings, frozenset(bindings)),
        now=clock.now,
    )
    assert free_gpus(successor) == 16

    successor.finish(bindings, PodPhase.FAILED)

    # Evicted pods failing is no break (no restart): the gang is only placed anew.
    assert [type(output) for output in successor.run()] == [Disrupted]
    assert free_gpus(successor) == 32


def test_a_new_leader_holds_the_room_of_a_stored_nomination(clock):
    high = podgroup("high", min_count=1, priority=1000)
    high_pods = gang("high", 1, gpus=8, node_selector={"no-such-label": "x"})  # waits: never fits
    thief = podgroup("thief", min_count=4, priority=500)
    objects = [*cluster(SMALL), workload(), high, *high_pods, thief, *gang("thief", 4, gpus=8)]
    nomination = NominationRecord(high.uid, (NODES[0],), clock.now + 60)

    held = Machine(clock)
    held.load(World(objects, {}, nominations=(nomination,)), now=clock.now)
    free = Machine(clock)
    free.load(World(objects, {}), now=clock.now)

    assert not {o.group.name: o for o in held.run()}["thief"].decision.placed
    assert {o.group.name: o for o in free.run()}["thief"].decision.placed


def test_evicted_pods_hold_their_room_until_they_end(scheduler, clock):
    scheduler.admit(podgroup("g", min_count=2), *gang("g", 2, gpus=8))
    (ran,) = scheduler.run()
    uids = [p.pod_uid for p in ran.bind.placements]

    scheduler.tell(PodsEvicted(tuple(uids)))
    assert free_gpus(scheduler) == 16
    scheduler.tell(ObjectStored(pod("other", gpus=8)))
    scheduler.finish(uids, PodPhase.FAILED)

    assert free_gpus(scheduler) == 32
