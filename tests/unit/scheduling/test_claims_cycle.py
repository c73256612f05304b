"""Claims in the scheduling cycle: exact devices per pod, PodGroup claims that keep a gang in a rack,
devices shared with extended resources, shares of shareable GPUs, and release when pods end."""

from __future__ import annotations

from typing import Any

import pytest

from libs.cluster.generator import ClusterShape
from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import ClaimsAllocated, World
from libs.core.scheduling.model import RACK_KEY
from tests.unit.scheduling.conftest import Clock, Machine
from tests.unit.scheduling.manifests import cluster, gang, pod, podgroup, stored, workload

GPU_CLASS = "gpu.example.com"
NUMA = "gpu.example.com/numaNode"


def template(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None):
    return stored(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": list(requests), "constraints": constraints or []}}},
        }
    )


def gpus(count: int = 1, *, selectors: tuple[str, ...] = (), capacity: dict[str, str] | None = None):
    exactly: dict[str, Any] = {"deviceClassName": GPU_CLASS, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": expression}} for expression in selectors]
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    return {"name": "gpus", "exactly": exactly}


TWO_ON_ONE_NUMA = template("two-numa", gpus(2), constraints=[{"requests": ["gpus"], "matchAttribute": NUMA}])
FABRIC = [{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]
OWN_GPUS = [{"name": "gpus", "resourceClaimTemplateName": "two-numa"}]


@pytest.fixture
def scheduler(clock: Clock) -> Machine:
    machine = Machine(clock)
    shape = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2, shared_gpus_per_node=1)
    machine.load(World(cluster(shape) + [workload()], {}), now=clock.now)
    return machine


@pytest.fixture
def exclusive_only(clock: Clock) -> Machine:
    """The same cluster with no shareable GPU: whole GPUs only."""
    machine = Machine(clock)
    machine.load(World(cluster() + [workload()], {}), now=clock.now)
    return machine


def numa_of(scheduler: Machine, node: str, names) -> set[int]:
    devices = {device.name: device for device in scheduler.claims.inventory.node_devices(node)}
    return {devices[name].attributes[NUMA] for name in names}


def test_a_numa_gang_with_a_rack_fabric_is_proposed_in_one_rack_with_exact_devices(scheduler, clock):
    group = podgroup("g", min_count=4, claims=FABRIC)
    scheduler.admit(TWO_ON_ONE_NUMA, group, *gang("g", 4, gpus=0, claims=[*FABRIC, *OWN_GPUS]))

    (ran,) = scheduler.run()

    assert ran.decision.placed
    assert ran.bind is None
    racks = {scheduler.inventory.node(p.node_name).labels[RACK_KEY] for p in ran.decision.placements}
    assert len(racks) == 1
    proposal = ran.proposal_status
    (fabric,) = proposal["claims"]
    assert fabric["resourceClaimName"] == "g-fabric"
    assert fabric["devices"][0]["pool"] == racks.pop()
    for name, placed in proposal["pods"].items():
        (claim,) = placed["claims"]
        assert claim["resourceClaimName"] == f"{name}-gpus"
        devices = [entry["device"] for entry in claim["devices"]]
        assert len(devices) == 2
        assert len(numa_of(scheduler, placed["node"], devices)) == 1
        assert placed["devices"][GPU_CLASS] == devices
    scheduler.tell(ClaimsAllocated(group.uid, "allocated"))
    (bound,) = scheduler.run()
    assert len(bound.placements) == 4


def test_pods_of_a_numa_gang_never_get_one_device_twice(scheduler, clock):
    # 4 nodes x 7 exclusive GPUs (the 8th is shareable): 3 NUMA pairs per node at most.
    scheduler.admit(
        TWO_ON_ONE_NUMA, podgroup("g", min_count=12), *gang("g", 12, gpus=0, cpu="1", claims=OWN_GPUS)
    )

    (ran,) = scheduler.run()

    assert ran.decision.placed
    taken = [(p.node_name, name) for p in ran.decision.placements for name in p.devices[GPU_CLASS]]
    assert len(taken) == len(set(taken)) == 24


NODES = ("zone-0-b0-r0-n00", "zone-0-b0-r0-n01", "zone-0-b0-r1-n00", "zone-0-b0-r1-n01")


def test_a_gang_needing_more_numa_pairs_than_exist_is_unschedulable_for_its_claims(exclusive_only, clock):
    # One GPU taken on each NUMA node of every node: 6 GPUs free, by count 3 pairs, but 2 on one NUMA node.
    scheduler = exclusive_only
    numa = 'device.attributes["gpu.example.com"].numaNode == {}'
    one_per_numa = template(
        "one-per-numa",
        {**gpus(selectors=(numa.format(0),)), "name": "a"},
        {**gpus(selectors=(numa.format(1),)), "name": "b"},
    )
    scheduler.admit(one_per_numa)
    claims = [{"name": "spread", "resourceClaimTemplateName": "one-per-numa"}]
    for node in NODES:
        scheduler.admit(
            pod(
                f"spread-{node}",
                gpus=0,
                cpu="1",
                claims=claims,
                node_selector={"kubernetes.io/hostname": node},
            )
        )
    spread = scheduler.run()
    assert all(ran.decision.placed for ran in spread)
    assert {tuple(ran.decision.placements[0].devices[GPU_CLASS]) for ran in spread} == {("gpu-0", "gpu-4")}
    for ran in spread:
        scheduler.tell(ClaimsAllocated(ran.group.uid, "allocated"))
    scheduler.run()
    scheduler.admit(
        TWO_ON_ONE_NUMA, podgroup("g", min_count=9), *gang("g", 9, gpus=0, cpu="1", claims=OWN_GPUS)
    )

    (ran,) = scheduler.run()

    assert not ran.decision.placed
    assert ran.decision.message == (
        "0/4 nodes are available: 4 cannot allocate all claims. only 8 of the 9 pods the gang needs fit."
    )


def test_a_rack_fabric_keeps_the_gang_out_of_a_rack_too_small_for_it(scheduler, clock):
    group = podgroup("g", min_count=3, claims=FABRIC)
    scheduler.admit(group, *gang("g", 3, gpus=7, cpu="1", claims=FABRIC))

    (ran,) = scheduler.run()

    # Three nodes' worth of GPUs exist, but only two nodes reach each fabric.
    assert not ran.decision.placed


def test_a_request_selector_no_device_passes_is_unschedulable(scheduler, clock):
    b200 = template("b200", gpus(selectors=('device.attributes["gpu.example.com"].model == "B200"',)))
    claims = [{"name": "gpus", "resourceClaimTemplateName": "b200"}]
    scheduler.admit(b200, pod("p", gpus=0, claims=claims))

    (ran,) = scheduler.run()

    assert not ran.decision.placed
    assert ran.decision.message == "0/4 nodes are available: 4 cannot allocate all claims."


def test_a_missing_template_leaves_the_pod_pending(scheduler, clock):
    scheduler.admit(pod("p", gpus=0, claims=[{"name": "gpus", "resourceClaimTemplateName": "nosuch"}]))

    (ran,) = scheduler.run()

    assert not ran.decision.placed


def test_devices_held_for_extended_resources_are_not_given_to_claims(scheduler, clock):
    scheduler.admit(podgroup("whole", min_count=4), *gang("whole", 4, gpus=7, cpu="1"))
    (filled,) = scheduler.run()
    assert filled.decision.placed
    one = template("one", gpus(1))
    scheduler.admit(one, pod("p", gpus=0, claims=[{"name": "gpus", "resourceClaimTemplateName": "one"}]))

    (ran,) = scheduler.run()

    assert not ran.decision.placed


def test_extended_resources_and_claims_of_one_pod_get_distinct_devices(scheduler, clock):
    one = template("one", gpus(1))
    claims = [{"name": "gpus", "resourceClaimTemplateName": "one"}]
    scheduler.admit(one, podgroup("g", min_count=4), *gang("g", 4, gpus=6, cpu="1", claims=claims))

    (ran,) = scheduler.run()

    assert ran.decision.placed
    for placement in ran.decision.placements:
        assert len(set(placement.devices[GPU_CLASS])) == 7


def test_pods_share_one_gpu_by_capacity_and_never_beyond_it(scheduler, clock):
    share = template("share", gpus(capacity={"cores": "400m"}))
    claims = [{"name": "gpus", "resourceClaimTemplateName": "share"}]
    only_node = {"kubernetes.io/hostname": "zone-0-b0-r0-n00"}
    pods = [pod(f"s{i}", gpus=0, cpu="1", claims=claims, node_selector=only_node) for i in range(3)]
    scheduler.admit(share, *pods)

    ran = scheduler.run()

    placed = [r for r in ran if r.decision.placed]
    assert len(placed) == 2  # 400m + 400m on the node's one shareable GPU; 1200m would exceed it
    devices = {
        entry["device"]
        for r in placed
        for entry in r.proposal_status["pods"][r.decision.placements[0].pod_name]["claims"][0]["devices"]
    }
    assert devices == {"gpu-7"}
    consumed = scheduler.claims.usage.consumed["gpu.example.com/zone-0-b0-r0-n00/gpu-7"]
    assert consumed["gpu.example.com/cores"] == 800


def test_a_finished_pod_gives_its_share_back(scheduler, clock):
    share = template("share", gpus(capacity={"cores": "600m"}))
    claims = [{"name": "gpus", "resourceClaimTemplateName": "share"}]
    only_node = {"kubernetes.io/hostname": "zone-0-b0-r0-n00"}
    first, second = (pod(f"s{i}", gpus=0, cpu="1", claims=claims, node_selector=only_node) for i in range(2))
    scheduler.admit(share, first)
    assert scheduler.run()[0].decision.placed
    scheduler.tell(ClaimsAllocated(first.uid, "allocated"))
    scheduler.run()
    scheduler.admit(second)
    (waiting,) = scheduler.run()
    assert not waiting.decision.placed

    scheduler.finish([first.uid], PodPhase.SUCCEEDED)
    clock.now += 60

    (placed,) = scheduler.run()
    assert placed.decision.placed


def test_a_gangs_fabric_is_released_when_its_pods_end(scheduler, clock):
    group = podgroup("g", min_count=2, claims=FABRIC)
    members = gang("g", 2, gpus=1, cpu="1", claims=FABRIC)
    scheduler.admit(group, *members)
    scheduler.run()
    assert scheduler.claims.holds("ml/g")
    scheduler.tell(ClaimsAllocated(group.uid, "allocated"))
    scheduler.run()

    scheduler.finish([members[0].uid], PodPhase.SUCCEEDED)
    assert scheduler.claims.holds("ml/g")
    scheduler.finish([members[1].uid], PodPhase.SUCCEEDED)
    assert not scheduler.claims.holds("ml/g")


def test_pods_with_claims_admitted_before_their_podgroup_still_wait_for_allocation(scheduler, clock):
    members = gang("g", 2, gpus=0, cpu="1", claims=OWN_GPUS)
    scheduler.admit(TWO_ON_ONE_NUMA, *members)
    scheduler.run()
    scheduler.admit(podgroup("g", min_count=2))

    (ran,) = scheduler.run()

    assert ran.decision.placed
    assert ran.bind is None
    assert len(ran.proposal_status["pods"]) == 2


def test_an_allocation_of_other_devices_does_not_bind_the_waiting_proposal(scheduler, clock):
    group = podgroup("g", min_count=2)
    scheduler.admit(TWO_ON_ONE_NUMA, group, *gang("g", 2, gpus=0, cpu="1", claims=OWN_GPUS))
    (ran,) = scheduler.run()
    proposed = frozenset(
        (claim["resourceClaimName"], f"{d['driver']}/{d['pool']}/{d['device']}")
        for pod in ran.proposal_status["pods"].values()
        for claim in pod["claims"]
        for d in claim["devices"]
    )
    stale = frozenset((name, device.replace("gpu-0", "gpu-6")) for name, device in proposed)

    scheduler.tell(ClaimsAllocated(group.uid, "earlier", stale))
    assert scheduler.run() == []
    scheduler.tell(ClaimsAllocated(group.uid, "this one", proposed))
    (bound,) = scheduler.run()
    assert len(bound.placements) == 2


def test_a_new_leader_holds_the_shares_of_running_pods_from_their_claims(clock):
    share = template("share", gpus(capacity={"cores": "600m"}))
    claims = [{"name": "gpus", "resourceClaimTemplateName": "share"}]
    only_node = {"kubernetes.io/hostname": "zone-0-b0-r0-n00"}
    running = pod("s0", gpus=0, cpu="1", claims=claims, node_selector=only_node, phase="Running")
    device = {"request": "gpus", "driver": GPU_CLASS, "pool": "zone-0-b0-r0-n00", "device": "gpu-7"}
    device["consumedCapacity"] = {f"{GPU_CLASS}/cores": "600m", f"{GPU_CLASS}/memory": "0"}
    claim = stored(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "s0-gpus", "namespace": "ml"},
            "spec": {},
            "status": {
                "allocation": {"devices": {"results": [device]}},
                "reservedFor": [{"resource": "pods", "name": "s0", "uid": running.uid}],
            },
        }
    )
    machine = Machine(clock)
    shape = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2, shared_gpus_per_node=1)
    world = World([*cluster(shape), workload(), share, running, claim], {running.uid: "zone-0-b0-r0-n00"})
    machine.load(world, now=clock.now)
    machine.admit(pod("s1", gpus=0, cpu="1", claims=claims, node_selector=only_node))

    (ran,) = machine.run()

    assert not ran.decision.placed  # 600m + 600m would exceed the one shareable GPU
