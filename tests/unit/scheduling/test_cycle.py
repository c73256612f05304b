"""The PodGroup scheduling cycle: all-or-nothing gangs, basic groups, topology, scoring and reasons."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

from libs.core.scheduling import (
    BLOCK_KEY,
    RACK_KEY,
    CycleDecision,
    CycleResult,
    Taint,
    TopologyDomainRef,
    schedule_podgroup,
)
from libs.core.scheduling.snapshot import ClusterSnapshot

from .builders import GIB, GPU, assert_consistent, make_gang, make_node, make_pod, make_racks, make_snapshot


def _nodes_used(decision: CycleDecision) -> Counter[str]:
    return Counter(placement.node_name for placement in decision.placements)


def _fill(snapshot: ClusterSnapshot, node: str, gpus: int) -> None:
    """Take `gpus` devices (and proportional cpu/memory) on a node with a bound filler pod."""
    snapshot.bind(make_pod(f"filler-{node}-{gpus}", gpus=gpus, cpu=gpus, memory_gib=gpus), node)


# -- gangs and basic groups ---------------------------------------------------------------------------


def test_a_gang_that_fits_is_placed_whole_on_distinct_devices() -> None:
    snapshot = make_snapshot([make_node("n1"), make_node("n2")])
    group, pods = make_gang("train", 8)

    decision = schedule_podgroup(snapshot, group, pods, now=5.0)

    assert decision.result == CycleResult.PLACED
    assert len(decision.placements) == 8
    assert _nodes_used(decision) == {"n1": 8}
    assert [p.devices[GPU] for p in decision.placements] == [(f"gpu-{i}",) for i in range(8)]
    assert decision.unplaced == ()
    assert decision.decided_at == 5.0


def test_the_cycle_leaves_the_snapshot_unchanged() -> None:
    snapshot = make_snapshot([make_node("n1")])
    group, pods = make_gang("train", 4)

    schedule_podgroup(snapshot, group, pods, now=0.0)

    assert snapshot.node_free("n1").devices[GPU] == 8
    assert list(snapshot.placements()) == []


def test_gang_is_not_bound_when_fewer_than_min_count_fit() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=4), make_node("n2", gpus=4)])
    group, pods = make_gang("train", 10)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.result == CycleResult.UNSCHEDULABLE
    assert decision.placements == ()
    assert decision.message == "0/2 nodes are available. only 8 of the 10 pods the gang needs fit."
    assert set(decision.unplaced) == {pod.uid for pod in pods}
    assert_consistent(snapshot)


def test_a_gang_places_pods_beyond_min_count_when_they_fit() -> None:
    snapshot = make_snapshot([make_node("n1")])
    group, pods = make_gang("train", 10, min_count=6)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.placed
    assert len(decision.placements) == 8
    assert decision.unplaced == (pods[8].uid, pods[9].uid)


def test_a_basic_group_places_as_many_pods_as_fit() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=3)])
    group, pods = make_gang("svc", 5, basic=True)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.placed
    assert len(decision.placements) == 3


def test_a_basic_group_with_no_room_at_all_is_unschedulable() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=0)])
    group, pods = make_gang("svc", 2, basic=True)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.result == CycleResult.UNSCHEDULABLE
    assert decision.message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_pods_already_bound_count_towards_min_count() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=2)])
    group, pods = make_gang("train", 2, min_count=8)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0, bound_pods=6)

    assert decision.placed
    assert len(decision.placements) == 2
    assert not schedule_podgroup(snapshot, group, pods, now=0.0, bound_pods=5).placed


def test_a_gang_with_fewer_pods_than_min_count_is_not_tried() -> None:
    snapshot = make_snapshot([make_node("n1")])
    group, pods = make_gang("train", 5, min_count=8)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert not decision.placed
    assert decision.message == "the gang needs 8 pods, 5 exist."


def test_pods_naming_another_scheduler_are_left_out() -> None:
    snapshot = make_snapshot([make_node("n1")])
    group, pods = make_gang("train", 4)
    pods[0] = make_pod("train-00", scheduler="volcano")

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.message == (
        "the gang needs 4 pods, 3 exist. 1 pod(s) name a scheduler other than default-scheduler."
    )


def test_an_empty_cluster_has_no_nodes_available() -> None:
    group, pods = make_gang("train", 1)

    decision = schedule_podgroup(make_snapshot([]), group, pods, now=0.0)

    assert decision.message == "no nodes available to schedule pods."


# -- reasons ------------------------------------------------------------------------------------------


def test_reasons_are_counted_per_node_in_kube_scheduler_wording() -> None:
    pool = {"pool": "a"}
    snapshot = make_snapshot(
        [
            make_node("full-1", gpus=0, labels=pool),
            make_node("full-2", gpus=0, labels=pool),
            make_node("tainted", labels=pool, taints=[Taint("dedicated", "ml")]),
            make_node("other-pool", labels={"pool": "b"}),
            make_node("cordoned", labels=pool, unschedulable=True),
        ]
    )
    group, pods = make_gang("train", 2, selector=pool)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.message == (
        "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {dedicated: ml}, 1 node(s) were unschedulable."
    )
    assert decision.reason_counts == {
        "Insufficient nvidia.com/gpu": 2,
        "node(s) didn't match Pod's node affinity/selector": 1,
        "node(s) had untolerated taint {dedicated: ml}": 1,
        "node(s) were unschedulable": 1,
    }


def test_an_unschedulable_decision_tells_a_preemptor_what_the_gang_needs() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=2)])
    group, pods = make_gang("train", 4, gpus=2, cpu=16, memory_gib=100, topology_key=RACK_KEY)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    why = decision.unschedulable
    assert why is not None
    assert (why.requested.pods, why.requested.cpu_milli, why.requested.memory) == (4, 64_000, 400 * GIB)
    assert why.requested.devices == {GPU: 8}
    assert why.required_count == 4
    assert why.topology_key == RACK_KEY


# -- topology -----------------------------------------------------------------------------------------


def test_a_rack_constraint_keeps_the_whole_gang_in_one_rack() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2, "r2": 2}))
    _fill(snapshot, "r1-n0", 6)
    group, pods = make_gang("train", 12, topology_key=RACK_KEY)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.domain == TopologyDomainRef(RACK_KEY, "r2")
    assert set(_nodes_used(decision)) == {"r2-n0", "r2-n1"}


def test_the_tightest_rack_that_holds_the_gang_wins_so_big_racks_stay_whole() -> None:
    snapshot = make_snapshot(make_racks({"big": 4, "small": 2, "tiny": 1}))
    group, pods = make_gang("train", 9, topology_key=RACK_KEY)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.domain == TopologyDomainRef(RACK_KEY, "small")


def test_racks_with_equal_leftover_are_chosen_by_name() -> None:
    snapshot = make_snapshot(make_racks({"r2": 1, "r1": 1, "r3": 1}))
    group, pods = make_gang("train", 8, topology_key=RACK_KEY)

    assert schedule_podgroup(snapshot, group, pods, now=0.0).domain == TopologyDomainRef(RACK_KEY, "r1")


def test_domains_come_in_the_same_order_from_a_few_sorted_when_read_as_from_many_indexed() -> None:
    for racks in (3, 40):  # a level of a few domains is sorted when read, one of many is indexed
        snapshot = make_snapshot(make_racks({f"r{rack:02d}": 1 for rack in range(racks)}))
        for rack in range(racks):
            _fill(snapshot, f"r{rack:02d}-n0", (rack * 5) % 8)
        tried = []
        for count in range(1, 8):
            group, pods = make_gang(f"g{count}", 1, gpus=count, topology_key=RACK_KEY)
            domain = schedule_podgroup(snapshot, group, pods, now=0.0).domain
            assert domain is not None
            tried.append(domain.value)

        free = {f"r{rack:02d}": 8 - (rack * 5) % 8 for rack in range(racks)}
        assert tried == [min((f, r) for r, f in free.items() if f >= count)[1] for count in range(1, 8)]


def test_domain_aggregates_only_prune_the_nodes_decide() -> None:
    snapshot = make_snapshot(make_racks({"fragmented": 2, "whole": 1}))
    _fill(snapshot, "fragmented-n0", 5)
    _fill(snapshot, "fragmented-n1", 5)
    group, pods = make_gang("train", 1, gpus=4, topology_key=RACK_KEY)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.domain == TopologyDomainRef(RACK_KEY, "whole")


def test_no_rack_holding_the_gang_is_reported_with_the_topology_reason() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1, "r2": 1}))
    group, pods = make_gang("train", 12, topology_key=RACK_KEY)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.result == CycleResult.UNSCHEDULABLE
    assert decision.message == (
        "0/2 nodes are available. no topology.example.com/rack domain can hold all 12 pods of the gang."
    )


def test_nodes_without_the_topology_label_are_not_candidates() -> None:
    snapshot = make_snapshot([make_node("unlabelled")])
    group, pods = make_gang("train", 1, topology_key=RACK_KEY)

    assert not schedule_podgroup(snapshot, group, pods, now=0.0).placed


def test_a_node_selector_on_the_topology_key_names_the_domain() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1, "r2": 1}))
    group, pods = make_gang("train", 2, topology_key=RACK_KEY, selector={RACK_KEY: "r2"})

    assert schedule_podgroup(snapshot, group, pods, now=0.0).domain == TopologyDomainRef(RACK_KEY, "r2")


def test_preferred_levels_are_tried_tightest_first_then_widened() -> None:
    snapshot = make_snapshot(
        make_racks({"r1": 1, "r2": 1}, block="b1") + make_racks({"r3": 1, "r4": 1}, block="b2")
    )
    preferred = (RACK_KEY, BLOCK_KEY)

    def domain_for(size: int) -> TopologyDomainRef | None:
        group, pods = make_gang(f"g{size}", size, preferred=preferred)
        decision = schedule_podgroup(snapshot, group, pods, now=0.0)
        assert decision.placed
        return decision.domain

    assert domain_for(8) == TopologyDomainRef(RACK_KEY, "r1")
    assert domain_for(16) == TopologyDomainRef(BLOCK_KEY, "b1")
    assert domain_for(32) is None


def test_preferred_levels_narrower_than_the_hard_key_are_tried_inside_it() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1, "r2": 1}, block="b1") + make_racks({"r3": 1}, block="b2"))

    group, pods = make_gang("small", 8, topology_key=BLOCK_KEY, preferred=(RACK_KEY,))
    assert schedule_podgroup(snapshot, group, pods, now=0.0).domain == TopologyDomainRef(RACK_KEY, "r1")

    group, pods = make_gang("wide", 16, topology_key=BLOCK_KEY, preferred=(RACK_KEY,))
    assert schedule_podgroup(snapshot, group, pods, now=0.0).domain == TopologyDomainRef(BLOCK_KEY, "b1")

    group, pods = make_gang("huge", 24, topology_key=BLOCK_KEY, preferred=(RACK_KEY,))
    assert not schedule_podgroup(snapshot, group, pods, now=0.0).placed


def test_preferred_levels_broader_than_the_hard_key_are_ignored() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1, "r2": 1}, block="b1"))
    group, pods = make_gang("train", 16, topology_key=RACK_KEY, preferred=(BLOCK_KEY,))

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert not decision.placed
    assert "no topology.example.com/rack domain can hold all 16 pods" in decision.message


def test_pods_joining_a_scheduled_gang_go_to_its_domain() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1, "r2": 1}))
    _fill(snapshot, "r1-n0", 4)
    group, pods = make_gang("train", 2, topology_key=RACK_KEY)
    group = replace(group, assigned_domain=TopologyDomainRef(RACK_KEY, "r2"))

    decision = schedule_podgroup(snapshot, group, pods, now=0.0, bound_pods=8)

    assert decision.domain == TopologyDomainRef(RACK_KEY, "r2")


def test_joining_pods_that_do_not_fit_the_gang_domain_are_unschedulable() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1, "r2": 1}))
    _fill(snapshot, "r2-n0", 8)
    group, pods = make_gang("train", 2, topology_key=RACK_KEY)
    group = replace(group, assigned_domain=TopologyDomainRef(RACK_KEY, "r2"))

    decision = schedule_podgroup(snapshot, group, pods, now=0.0, bound_pods=8)

    assert decision.message == (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "the gang's topology.example.com/rack domain r2 cannot hold 1 more pod(s)."
    )


def test_joining_pods_of_a_preferred_domain_widen_to_its_hard_domain() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1, "r2": 1}, block="b1") + make_racks({"r3": 1}, block="b2"))
    _fill(snapshot, "r1-n0", 8)
    group, pods = make_gang("train", 2, topology_key=BLOCK_KEY, preferred=(RACK_KEY,))
    group = replace(group, assigned_domain=TopologyDomainRef(RACK_KEY, "r1"))

    decision = schedule_podgroup(snapshot, group, pods, now=0.0, bound_pods=8)

    assert decision.domain == TopologyDomainRef(BLOCK_KEY, "b1")
    assert set(_nodes_used(decision)) == {"r2-n0"}


# -- packing inside a domain --------------------------------------------------------------------------


def test_nodes_are_filled_tightest_first_so_whole_nodes_stay_free() -> None:
    snapshot = make_snapshot(make_racks({"r1": 3}))
    _fill(snapshot, "r1-n0", 5)
    _fill(snapshot, "r1-n2", 3)
    group, pods = make_gang("train", 8, topology_key=RACK_KEY)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert _nodes_used(decision) == {"r1-n0": 3, "r1-n2": 5}


def test_tainted_and_unselected_nodes_are_skipped_inside_a_domain() -> None:
    snapshot = make_snapshot(
        [
            make_node("a", rack="r1", gpus=2, taints=[Taint("dedicated", "ml")]),
            make_node("b", rack="r1", gpus=4, labels={"pool": "x"}),
            make_node("c", rack="r1", gpus=6, labels={"pool": "y"}),
        ]
    )
    group, pods = make_gang("train", 4, topology_key=RACK_KEY, selector={"pool": "y"})

    assert _nodes_used(schedule_podgroup(snapshot, group, pods, now=0.0)) == {"c": 4}


def test_a_gang_of_mixed_shapes_places_every_shape_without_overcommitting() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=8, cpu=64)])
    group, pods = make_gang("train", 3, gpus=2, cpu=16)
    pods.append(make_pod("train-99-coordinator", gpus=0, cpu=16))
    group = replace(group, gang_min_count=4)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert decision.placed
    devices = [name for p in decision.placements for name in p.devices.get(GPU, ())]
    assert len(devices) == len(set(devices)) == 6
    snapshot.apply(decision)
    assert snapshot.node_free("n1").cpu_milli == 0
    assert_consistent(snapshot)


def test_cpu_only_pods_pack_by_free_cores() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=0, cpu=64), make_node("n2", gpus=0, cpu=16)])
    group, pods = make_gang("web", 2, gpus=0, cpu=4, memory_gib=1)

    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    assert _nodes_used(decision) == {"n2": 2}


def test_the_same_inputs_give_the_same_decision_whatever_the_pod_order() -> None:
    nodes = make_racks({"r1": 3, "r2": 3, "r3": 2})
    group, pods = make_gang("train", 12, gpus=2, topology_key=RACK_KEY)
    expected = schedule_podgroup(make_snapshot(nodes), group, pods, now=0.0)

    for seed in range(5):
        shuffled = pods[:]
        random.Random(seed).shuffle(shuffled)
        assert schedule_podgroup(make_snapshot(nodes), group, shuffled, now=0.0) == expected


def test_nodes_without_a_free_pod_slot_are_counted_as_they_fill_and_empty() -> None:
    snapshot = make_snapshot([make_node("n1", pods=1), make_node("n2", pods=2)])
    filler, filler_pods = make_gang("filler", 1, gpus=0, cpu=1, memory_gib=1)
    group, pods = make_gang("train", 1, gpus=9)

    assert schedule_podgroup(snapshot, group, pods, now=0.0).reason_counts == {
        "Insufficient nvidia.com/gpu": 2
    }
    snapshot.apply(schedule_podgroup(snapshot, filler, filler_pods, now=1.0))
    assert schedule_podgroup(snapshot, group, pods, now=2.0).reason_counts == {
        "Too many pods": 1,
        "Insufficient nvidia.com/gpu": 2,
    }
    snapshot.unbind(filler_pods[0].uid)
    assert schedule_podgroup(snapshot, group, pods, now=3.0).reason_counts == {
        "Insufficient nvidia.com/gpu": 2
    }
    assert_consistent(snapshot)


def test_reasons_follow_the_snapshot_as_it_changes() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=2), make_node("n2", gpus=2)])
    blocker, blocker_pods = make_gang("blocker", 2, gpus=2)
    snapshot.apply(schedule_podgroup(snapshot, blocker, blocker_pods, now=0.0))
    group, pods = make_gang("train", 1, gpus=2)

    assert schedule_podgroup(snapshot, group, pods, now=1.0).reason_counts == {
        "Insufficient nvidia.com/gpu": 2
    }
    snapshot.add_node(make_node("n3", gpus=1))
    assert schedule_podgroup(snapshot, group, pods, now=2.0).reason_counts == {
        "Insufficient nvidia.com/gpu": 3
    }
    snapshot.unbind(blocker_pods[0].uid)
    assert schedule_podgroup(snapshot, group, pods, now=3.0).placed
