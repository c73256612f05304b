"""Pods naming an existing ResourceClaim (`resourceClaimName`): they wait while it does not exist, the first
allocates it, later ones go where its devices are and take nothing new, and it is released with the last."""

from __future__ import annotations

from typing import Any

import pytest

from libs.cluster.generator import ClusterShape
from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import (
    ClaimsAllocated,
    ClaimsAllocationFailed,
    ClaimsHeld,
    ObjectRemoved,
    PodsBound,
    World,
)
from tests.unit.scheduling.conftest import Clock, Machine
from tests.unit.scheduling.manifests import cluster, pod, podgroup, stored, workload

GPU_CLASS = "gpu.example.com"
SHARED = [{"name": "gpu", "resourceClaimName": "shared-gpu"}]
NODES = ("zone-0-b0-r0-n00", "zone-0-b0-r0-n01", "zone-0-b0-r1-n00", "zone-0-b0-r1-n01")


def resource_claim(
    name: str = "shared-gpu", status: dict[str, Any] | None = None, exactly: dict[str, Any] | None = None
) -> Any:
    asked = [{"name": "gpu", "exactly": exactly or {"deviceClassName": GPU_CLASS, "count": 1}}]
    return stored(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": asked}},
            "status": status or {},
        }
    )


def sharing(name: str, **args: Any) -> Any:
    return pod(name, gpus=0, cpu="1", memory="1Gi", claims=SHARED, **args)


@pytest.fixture
def scheduler(clock: Clock) -> Machine:
    machine = Machine(clock)
    machine.load(World(cluster() + [workload()], {}), now=clock.now)
    return machine


def free_gpus(scheduler: Machine) -> int:
    return sum(node.count(GPU_CLASS) for node in scheduler.snapshot.node_states())


def test_a_pod_naming_a_claim_that_does_not_exist_waits_for_it(scheduler, clock):
    scheduler.admit(sharing("a"))

    (ran,) = scheduler.run()

    assert not ran.decision.placed
    assert ran.decision.message == '0/4 nodes are available: resourceclaim "shared-gpu" not found.'
    assert ran.condition_false
    assert ran.preemption_priority is None


def test_the_waiting_pod_is_placed_once_the_claim_is_applied(scheduler, clock):
    scheduler.admit(sharing("a"))
    (waiting,) = scheduler.run()
    clock.now += waiting.backoff_s  # past its back-off, it still waits until the claim wakes it

    scheduler.admit(resource_claim())
    (ran,) = scheduler.run()

    assert ran.decision.placed
    assert ran.cause == "admitted-shared-gpu"


def test_a_claim_of_another_name_does_not_wake_the_pod(scheduler, clock):
    scheduler.admit(sharing("a"))
    (waiting,) = scheduler.run()
    clock.now += waiting.backoff_s

    scheduler.admit(resource_claim("other-gpu"))

    assert scheduler.run() == []


def test_the_first_pod_allocates_the_claim_under_its_own_name(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a"))

    (ran,) = scheduler.run()

    assert ran.decision.placed
    (claim,) = ran.proposal_status["pods"]["a"]["claims"]
    assert claim["resourceClaimName"] == "shared-gpu"
    assert claim["name"] == "gpu"
    assert claim["shared"] is True
    assert len(claim["devices"]) == 1
    assert ran.decision.placements[0].devices == {}  # the claim holds its device, not the pod
    assert free_gpus(scheduler) == 31
    assert scheduler.claims.named_allocation("ml/shared-gpu") is not None


def test_a_second_pod_sharing_the_claim_goes_where_its_device_is_and_takes_nothing_new(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a"))
    (first,) = scheduler.run()
    scheduler.tell(ClaimsAllocated(first.group.uid, "allocated"))
    scheduler.run()

    scheduler.admit(sharing("b"))
    (second,) = scheduler.run()

    assert second.decision.placed
    assert second.decision.placements[0].node_name == first.decision.placements[0].node_name
    (claim,) = second.proposal_status["pods"]["b"]["claims"]
    assert claim == {"name": "gpu", "resourceClaimName": "shared-gpu", "devices": [], "shared": True}
    assert free_gpus(scheduler) == 31


def test_pods_sharing_the_claim_in_one_pass_land_together(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a"), sharing("b"), sharing("c"))

    ran = scheduler.run()

    assert all(each.decision.placed for each in ran)
    assert len({each.decision.placements[0].node_name for each in ran}) == 1
    assert free_gpus(scheduler) == 31


def test_a_pod_whose_node_cannot_reach_the_claims_device_is_refused_that_node(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a", node_selector={"kubernetes.io/hostname": NODES[0]}))
    scheduler.run()

    scheduler.admit(sharing("b", node_selector={"kubernetes.io/hostname": NODES[1]}))
    (refused,) = scheduler.run()

    assert not refused.decision.placed
    assert refused.decision.message == (
        "0/4 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, "
        "1 cannot allocate all claims."
    )


def test_the_claim_is_released_when_the_last_pod_reserving_it_ends(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a"), sharing("b"))
    first, second = scheduler.run()
    for ran in (first, second):
        scheduler.tell(ClaimsAllocated(ran.group.uid, "allocated"))
    scheduler.run()

    scheduler.finish([first.decision.placements[0].pod_uid], PodPhase.SUCCEEDED)
    assert scheduler.claims.named_allocation("ml/shared-gpu") is not None
    assert free_gpus(scheduler) == 31

    scheduler.finish([second.decision.placements[0].pod_uid], PodPhase.SUCCEEDED)
    assert scheduler.claims.named_allocation("ml/shared-gpu") is None
    assert free_gpus(scheduler) == 32


def test_a_released_claim_is_allocated_again_anywhere_by_the_next_pod(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a", node_selector={"kubernetes.io/hostname": NODES[0]}))
    (first,) = scheduler.run()
    scheduler.tell(ClaimsAllocated(first.group.uid, "allocated"))
    scheduler.run()
    scheduler.admit(sharing("b", node_selector={"kubernetes.io/hostname": NODES[1]}))
    (refused,) = scheduler.run()
    assert not refused.decision.placed

    scheduler.finish([first.decision.placements[0].pod_uid], PodPhase.SUCCEEDED)
    clock.now += refused.backoff_s
    (ran,) = scheduler.run()

    assert ran.decision.placed
    assert ran.decision.placements[0].node_name == NODES[1]
    assert len(ran.proposal_status["pods"]["b"]["claims"][0]["devices"]) == 1


def test_a_refused_allocation_releases_the_claim_for_the_pods_that_joined_it(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a"), sharing("b"))
    first, second = scheduler.run()

    scheduler.tell(ClaimsAllocationFailed(first.group.uid, "device gone", "refused"))
    scheduler.tell(ClaimsAllocationFailed(second.group.uid, "ResourceClaim shared-gpu is not allocated", "x"))
    scheduler.run()

    assert scheduler.claims.named_allocation("ml/shared-gpu") is None
    assert free_gpus(scheduler) == 32


def test_a_claim_deleted_before_its_pod_was_placed_makes_the_pod_wait_again(scheduler, clock):
    claim = resource_claim()
    scheduler.admit(sharing("a"), claim)
    scheduler.tell(ObjectRemoved("ResourceClaim", "ml", "shared-gpu", claim.uid))

    (ran,) = scheduler.run()

    assert not ran.decision.placed
    assert "not found" in ran.decision.message


def test_a_gang_waits_for_a_claim_one_of_its_pods_names(scheduler, clock):
    scheduler.admit(podgroup("g", min_count=2), sharing("g-0", group="g"), pod("g-1", group="g", gpus=1))

    (ran,) = scheduler.run()

    assert not ran.decision.placed
    assert ran.decision.message == '0/4 nodes are available: resourceclaim "shared-gpu" not found.'


def test_a_new_leader_keeps_the_claims_device_and_pins_pods_naming_it(clock):
    node = NODES[2]
    running = sharing("a", phase="Running")
    device = {"request": "gpu", "driver": GPU_CLASS, "pool": node, "device": "gpu-0"}
    claim = resource_claim(
        status={
            "allocation": {"devices": {"results": [device]}},
            "reservedFor": [{"resource": "pods", "name": "a", "uid": running.uid}],
        }
    )
    scheduler = Machine(clock)
    world = [*cluster(), workload(), running, sharing("b"), claim]
    scheduler.load(World(world, {running.uid: node}), now=clock.now)

    (ran,) = scheduler.run()

    assert ran.decision.placements[0].node_name == node
    assert free_gpus(scheduler) == 31
    scheduler.finish([running.uid], PodPhase.SUCCEEDED)
    assert free_gpus(scheduler) == 31  # b reserves it still


def test_pods_of_one_gang_naming_a_claim_not_yet_allocated_share_one_allocation(scheduler, clock):
    members = [sharing(f"g-{index}", group="g") for index in range(3)]
    scheduler.admit(resource_claim(), podgroup("g", min_count=3), *members)

    (ran,) = scheduler.run()

    assert ran.decision.placed
    assert len({placement.node_name for placement in ran.decision.placements}) == 1
    recorded = [pod["claims"][0] for pod in ran.proposal_status["pods"].values()]
    assert sorted(len(claim["devices"]) for claim in recorded) == [0, 0, 1]
    assert {claim["resourceClaimName"] for claim in recorded} == {"shared-gpu"}
    assert free_gpus(scheduler) == 31


def test_the_claim_is_released_when_the_node_of_its_pods_goes(scheduler, clock):
    scheduler.admit(resource_claim(), sharing("a", node_selector={"kubernetes.io/hostname": NODES[0]}))
    scheduler.run()

    scheduler.tell(ObjectRemoved("Node", "", NODES[0], scheduler.inventory.node(NODES[0]).uid))

    assert scheduler.claims.named_allocation("ml/shared-gpu") is None


def test_an_observer_told_of_a_shared_claim_holds_its_device_once_until_both_pods_end(clock):
    # The preemptor's view: pods bound by the scheduler, and the claims the allocator committed.
    observer = Machine(clock)
    a, b = sharing("a"), sharing("b")
    observer.load(World([*cluster(), workload(), resource_claim(), a, b], {}), now=clock.now)
    record = {
        "resourceClaimName": "shared-gpu",
        "devices": [{"request": "gpu", "driver": GPU_CLASS, "pool": NODES[3], "device": "gpu-5"}],
        "shared": True,
    }
    observer.tell(PodsBound(((a.uid, NODES[3], {}), (b.uid, NODES[3], {}))))

    observer.tell(ClaimsHeld(a.uid, ((a.uid, record),)))
    observer.tell(ClaimsHeld(b.uid, ((b.uid, record),)))

    assert free_gpus(observer) == 31
    observer.finish([a.uid], PodPhase.SUCCEEDED)
    assert free_gpus(observer) == 31
    observer.finish([b.uid], PodPhase.SUCCEEDED)
    assert free_gpus(observer) == 32


def test_a_shared_claim_on_a_share_of_a_gpu_consumes_its_share_once(clock):
    scheduler = Machine(clock)
    shape = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2, shared_gpus_per_node=1)
    scheduler.load(World(cluster(shape) + [workload()], {}), now=clock.now)
    share = {
        "deviceClassName": GPU_CLASS,
        "selectors": [{"cel": {"expression": "device.allowMultipleAllocations"}}],
        "capacity": {"requests": {"cores": "400m"}},
    }
    scheduler.admit(resource_claim(exactly=share), sharing("a"), sharing("b"))

    first, second = scheduler.run()

    assert first.decision.placements[0].node_name == second.decision.placements[0].node_name
    (consumed,) = scheduler.claims.usage.consumed.values()
    assert consumed[f"{GPU_CLASS}/cores"] == 400
    for ran in (first, second):
        scheduler.finish([ran.decision.placements[0].pod_uid], PodPhase.SUCCEEDED)
    assert scheduler.claims.usage.consumed == {}
