"""The victim search, one rule at a time, on small fleets whose best answer is known."""

from __future__ import annotations

from libs.core.preemption import (
    CandidateIndex,
    DisruptionMode,
    PreemptionReason,
    Preemptor,
    RunningPod,
    UnitOwner,
    find_victims,
)
from libs.core.scheduling import RACK_KEY, ClusterSnapshot, Node, TopologyDomainRef, schedule_podgroup
from tests.unit.preemption.fleet import Fleet, preemptor
from tests.unit.scheduling.builders import make_pod

NOW = 10_000.0


def victim_names(decision) -> dict[str, list[str]]:
    return {v.owner.name: [p.placement.pod_name for p in v.pods] for v in decision.victims}


def fill(fleet: Fleet, name: str, node: str, *, priority: int, started_at: float = 0.0) -> None:
    """One 8-GPU pod filling a node."""
    fleet.run(name, [node], priority=priority, gpus=8, started_at=started_at)


def test_nothing_is_evicted_when_the_preemptor_would_still_not_fit():
    fleet = Fleet(racks=1, nodes_per_rack=2)
    fill(fleet, "low", "r0-n0", priority=10)
    fill(fleet, "high", "r0-n1", priority=5000)
    before = fleet.free_gpus()

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("big", 2, gpus=8), now=NOW)

    assert decision.victims == ()
    assert decision.reason == PreemptionReason.WOULD_NOT_FIT.format(where="placement in the cluster")
    assert fleet.free_gpus() == before


def test_equal_priority_never_preempts():
    fleet = Fleet(racks=1, nodes_per_rack=1)
    fill(fleet, "peer", "r0-n0", priority=1000)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8), now=NOW)

    assert decision.victims == ()
    assert decision.reason == PreemptionReason.NO_CANDIDATES.format(priority=1000)


def test_a_preemptor_whose_policy_is_never_preempts_nobody():
    fleet = Fleet(racks=1, nodes_per_rack=1)
    fill(fleet, "low", "r0-n0", priority=1)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8, never=True), now=NOW)

    assert decision.victims == ()
    assert decision.reason == PreemptionReason.NEVER


def test_a_group_that_fits_already_evicts_nobody():
    fleet = Fleet(racks=1, nodes_per_rack=2)
    fill(fleet, "low", "r0-n0", priority=1)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8), now=NOW)

    assert decision.victims == ()
    assert decision.reason == PreemptionReason.FITS


def test_the_reprieve_keeps_the_cheapest_set_on_a_case_with_a_known_optimum():
    # n0: a (4 GPUs, priority 1) and b (4 GPUs, priority 2); n1: c (8 GPUs, priority 1).
    # An 8-GPU pod needs a whole node: evicting c alone (priority 1, one pod) is the optimum;
    # {a, b} would cost priority 2.
    fleet = Fleet(racks=1, nodes_per_rack=2)
    fleet.run("a", ["r0-n0"], priority=1, gpus=4, started_at=5.0)
    fleet.run("b", ["r0-n0"], priority=2, gpus=4)
    fleet.run("c", ["r0-n1"], priority=1, gpus=8, started_at=1.0)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8), now=NOW)

    assert victim_names(decision) == {"c": ["c-0"]}
    assert decision.nodes == ("r0-n1",)


def test_the_reprieve_spares_every_unit_the_preemptor_does_not_need():
    # Four single-GPU units of increasing priority on one 8-GPU node with 4 GPUs free; the
    # preemptor needs 6 GPUs: exactly the two least important units go.
    fleet = Fleet(racks=1, nodes_per_rack=1)
    for position, priority in enumerate((4, 3, 2, 1)):
        fleet.run(f"u{position}", ["r0-n0"], priority=priority)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 6, gpus=1), now=NOW)

    assert sorted(victim_names(decision)) == ["u2", "u3"]
    assert decision.cost.priority == 2
    assert decision.cost.pods == 2


def test_a_running_gang_is_never_cut_below_its_min_count():
    # A Pod-mode gang of 4 one-GPU pods with minCount 3 on a full node: room for 2 pods cannot come from
    # single pods (it would leave 2 < 3 running), so the whole gang goes.
    fleet = Fleet(racks=1, nodes_per_rack=1)
    fleet.run("gang", ["r0-n0"] * 4, priority=1, mode=DisruptionMode.POD, min_count=3)
    fleet.run("other", ["r0-n0"] * 4, priority=2000, mode=DisruptionMode.POD, min_count=4)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 2, gpus=1), now=NOW)

    ((victim),) = decision.victims
    assert victim.owner.name == "gang"
    assert victim.whole
    assert len(victim.pods) == 4


def test_a_pod_mode_group_above_its_min_count_loses_single_pods():
    fleet = Fleet(racks=1, nodes_per_rack=1)
    fleet.run("gang", ["r0-n0"] * 8, priority=1, mode=DisruptionMode.POD, min_count=4)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 2, gpus=1), now=NOW)

    ((victim),) = decision.victims
    assert not victim.whole
    assert len(victim.pods) == 2


def test_a_podgroup_mode_group_goes_whole_even_its_pods_outside_the_domain():
    fleet = Fleet(racks=2, nodes_per_rack=1)
    fleet.run("spread", ["r0-n0", "r1-n0"], priority=1, gpus=8)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8, rack=True), now=NOW)

    ((victim),) = decision.victims
    assert victim.whole
    assert sorted(p.node for p in victim.pods) == ["r0-n0", "r1-n0"]


def test_the_topology_case_picks_the_cheaper_rack():
    # Both racks are full; the rack gang needs a whole rack. r0's units have priority 50, r1's 10.
    fleet = Fleet(racks=2, nodes_per_rack=2)
    fill(fleet, "r0-a", "r0-n0", priority=50)
    fill(fleet, "r0-b", "r0-n1", priority=50)
    fill(fleet, "r1-a", "r1-n0", priority=10)
    fill(fleet, "r1-b", "r1-n1", priority=10)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 2, gpus=8, rack=True), now=NOW)

    assert decision.domain == TopologyDomainRef(RACK_KEY, "r1")
    assert sorted(victim_names(decision)) == ["r1-a", "r1-b"]
    assert decision.nodes == ("r1-n0", "r1-n1")


def test_at_equal_priority_the_rack_losing_fewer_pods_wins_then_less_run_time():
    fleet = Fleet(racks=3, nodes_per_rack=1)
    fleet.run("many", ["r0-n0"] * 8, priority=10, gpus=1, mode=DisruptionMode.POD_GROUP)
    fill(fleet, "old", "r1-n0", priority=10, started_at=0.0)
    fill(fleet, "young", "r2-n0", priority=10, started_at=NOW - 5)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8, rack=True), now=NOW)

    assert victim_names(decision) == {"young": ["young-0"]}
    assert decision.cost.run_seconds == 5.0


def test_podgroups_are_spared_before_single_pods_at_equal_priority():
    fleet = Fleet(racks=1, nodes_per_rack=1)
    fleet.run("group", ["r0-n0"] * 4, priority=5, mode=DisruptionMode.POD_GROUP)
    fleet.run("single", ["r0-n0"], priority=5, gpus=4, standalone=True)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 4, gpus=1), now=NOW)

    assert victim_names(decision) == {"single": ["single-0"]}


def test_the_snapshot_is_left_as_it_was_and_the_victims_make_room():
    fleet = Fleet(racks=2, nodes_per_rack=2)
    for rack in (0, 1):
        for node in (0, 1):
            fleet.run(f"g{rack}{node}", [f"r{rack}-n{node}"] * 4, priority=rack + node, gpus=2)
    before = fleet.free_gpus()
    request = preemptor("p", 4, gpus=4, rack=True)

    decision = find_victims(fleet.snapshot, fleet.index, request, now=NOW)

    assert fleet.free_gpus() == before
    for victim in decision.victims:
        for pod in victim.pods:
            fleet.snapshot.unbind(pod.uid)
    placed = schedule_podgroup(fleet.snapshot, request.group, request.pods, now=NOW)
    assert placed.placed
    assert decision.cost.priority == 1


def test_the_dra_case_frees_the_right_devices():
    # One node with 4 devices of class a and 4 of class b. The cheapest unit holds class-a devices; the
    # preemptor asks for class-b devices, so only the unit holding those can make room.

    node = Node(
        "n0",
        {RACK_KEY: "r0"},
        cpu_milli=64_000,
        memory=512 * 2**30,
        devices={
            "a.example.com": tuple(f"a-{i}" for i in range(4)),
            "b.example.com": tuple(f"b-{i}" for i in range(4)),
        },
    )
    snapshot = ClusterSnapshot([node])
    index = CandidateIndex(snapshot.topology_keys)
    index.put_node("n0", node.labels)

    for name, cls, priority in (("holds-a", "a.example.com", 1), ("holds-b", "b.example.com", 50)):
        index.put_owner(
            UnitOwner(f"ml/{name}", "ml", name, f"uid-{name}", priority, DisruptionMode.POD_GROUP, 1)
        )
        request = make_pod(f"{name}-0", gpus=4, cpu=1, memory_gib=1, device_class=cls)
        placement = snapshot.bind(request, "n0")
        index.add(RunningPod(placement, "ml", f"ml/{name}", priority, 0.0))
    wanted = make_pod("p-0", gpus=4, cpu=1, memory_gib=1, device_class="b.example.com")
    request = Preemptor(preemptor("p", 1).group, [wanted])

    decision = find_victims(snapshot, index, request, now=NOW)

    assert victim_names(decision) == {"holds-b": ["holds-b-0"]}
    (placement,) = decision.placements
    assert sorted(placement.devices["b.example.com"]) == ["b-0", "b-1", "b-2", "b-3"]


def test_an_elastic_gang_is_shrunk_to_its_min_count_before_a_whole_gang_is_evicted():
    # Same priority, same cost in pods: without elastic surplus, the smaller whole gang would go.
    fleet = Fleet(racks=1, nodes_per_rack=4)
    fleet.run("elastic", ["r0-n0", "r0-n1", "r0-n2"], priority=10, gpus=8, min_count=1, indexes=[0, 1, 2])
    fleet.run("small", ["r0-n3"], priority=10, gpus=8)

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8), now=NOW)

    assert victim_names(decision) == {"elastic": ["elastic-2"]}
    (victim,) = decision.victims
    assert (victim.shrunk, victim.whole) == (True, False)


def test_an_elastic_gang_gives_up_its_highest_completion_indexes_first():
    fleet = Fleet(racks=1, nodes_per_rack=4)
    nodes = ["r0-n0", "r0-n1", "r0-n2", "r0-n3"]
    fleet.run("elastic", nodes, priority=10, gpus=8, min_count=2, indexes=[3, 2, 1, 0])

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 2, gpus=8), now=NOW)

    # elastic-0 and elastic-1 hold indexes 3 and 2.
    assert victim_names(decision) == {"elastic": ["elastic-0", "elastic-1"]}
    assert decision.victims[0].shrunk


def test_an_elastic_gang_never_shrinks_below_min_count_and_goes_whole_when_its_surplus_is_not_enough():
    fleet = Fleet(racks=1, nodes_per_rack=4)
    nodes = ["r0-n0", "r0-n1", "r0-n2", "r0-n3"]
    fleet.run("elastic", nodes, priority=10, gpus=8, min_count=3, indexes=[0, 1, 2, 3])

    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 2, gpus=8), now=NOW)

    assert victim_names(decision) == {"elastic": [f"elastic-{i}" for i in range(4)]}
    (victim,) = decision.victims
    assert (victim.shrunk, victim.whole) == (False, True)


def test_owners_ranked_below_a_preemptor_become_candidates_and_are_restored_as_they_were():
    fleet = Fleet(racks=1, nodes_per_rack=2)
    fill(fleet, "borrower", "r0-n0", priority=1000)
    fill(fleet, "peer", "r0-n1", priority=1000)
    before = {key: dict(fleet.index.held(key, value)) for key, value in ((None, ""), (RACK_KEY, "r0"))}
    held_before = {
        key: {p: (h.pods, dict(h.devices)) for p, h in levels.items()} for key, levels in before.items()
    }

    lowered = fleet.index.rank_below({"ml/borrower": 999}, 1000)
    decision = find_victims(fleet.snapshot, fleet.index, preemptor("p", 1, gpus=8, priority=1000), now=NOW)
    fleet.index.restore(lowered)

    assert victim_names(decision) == {"borrower": ["borrower-0"]}
    assert fleet.index.owners["ml/borrower"].priority == 1000
    assert {pod.priority for pod in fleet.index.of_owner("ml/borrower")} == {1000}
    after = {
        key: {p: (h.pods, dict(h.devices)) for p, h in fleet.index.held(key, value).items() if h.pods}
        for key, value in ((None, ""), (RACK_KEY, "r0"))
    }
    assert after == {key: {p: v for p, v in levels.items() if v[0]} for key, levels in held_before.items()}
