"""ClusterSnapshot: per-node and per-domain free capacity kept incrementally, assume/forget/bind/unbind."""

from __future__ import annotations

from dataclasses import replace

import pytest

from libs.core.scheduling import BLOCK_KEY, RACK_KEY, ClusterSnapshot, PlacementConflict, schedule_podgroup
from libs.core.scheduling.model import CPU_DIMENSION
from libs.core.scheduling.topology import NestedNodeIndex, NodeIndex

from .builders import GIB, GPU, assert_consistent, make_gang, make_node, make_pod, make_racks, make_snapshot


def test_build_sums_free_capacity_per_topology_domain() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2, "r2": 3}, block="b1"))

    r1 = snapshot.domain_free(RACK_KEY, "r1")
    assert r1 is not None
    assert (r1.pods, r1.cpu_milli, r1.memory, r1.devices) == (220, 128_000, 1024 * GIB, {GPU: 16})
    assert snapshot.level(RACK_KEY).domains["r2"].node_count == 3
    assert snapshot.cluster.free_devices == {GPU: 40}
    assert_consistent(snapshot)


def test_bind_takes_capacity_from_the_node_and_every_domain_it_is_in() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2}, block="b1", zone="z1"))

    placement = snapshot.bind(make_pod("p", gpus=3, cpu=10, memory_gib=100), "r1-n0")

    assert placement.devices == {GPU: ("gpu-0", "gpu-1", "gpu-2")}
    node = snapshot.node_free("r1-n0")
    assert (node.cpu_milli, node.memory, node.pods, node.devices[GPU]) == (54_000, 412 * GIB, 109, 5)
    rack = snapshot.domain_free(RACK_KEY, "r1")
    assert rack is not None
    assert rack.devices[GPU] == 13
    assert_consistent(snapshot)


def test_unbind_gives_the_devices_back_in_the_node_order() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=4)])
    first = snapshot.bind(make_pod("a", gpus=2), "n1")
    snapshot.bind(make_pod("b", gpus=1), "n1")

    assert snapshot.unbind(first.pod_uid) == first

    assert snapshot.node_state("n1").free_devices[GPU] == ["gpu-0", "gpu-1", "gpu-3"]
    assert snapshot.unbind("unknown") is None
    assert_consistent(snapshot)


def test_bind_refuses_a_pod_the_node_cannot_hold() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=2)])

    with pytest.raises(PlacementConflict):
        snapshot.bind(make_pod("big", gpus=3), "n1")
    with pytest.raises(PlacementConflict):
        snapshot.bind(make_pod("fat", gpus=0, memory_gib=600), "n1")
    assert snapshot.node_free("n1").devices[GPU] == 2
    assert_consistent(snapshot)


def test_apply_assumes_a_decision_and_forget_rolls_it_back() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2}))
    group, pods = make_gang("g", 4, gpus=2, topology_key=RACK_KEY)
    decision = schedule_podgroup(snapshot, group, pods, now=0.0)

    snapshot.apply(decision)
    assert all(snapshot.is_assumed(p.pod_uid) for p in decision.placements)
    assert snapshot.cluster.free_devices[GPU] == 8
    assert_consistent(snapshot)

    snapshot.forget(decision)
    assert snapshot.cluster.free_devices[GPU] == 16
    assert list(snapshot.placements()) == []
    assert_consistent(snapshot)


def test_confirmed_placements_are_bound_and_not_forgotten() -> None:
    snapshot = make_snapshot([make_node("n1")])
    group, pods = make_gang("g", 2)
    decision = schedule_podgroup(snapshot, group, pods, now=0.0)
    snapshot.apply(decision)

    snapshot.confirm(decision)
    snapshot.forget(decision)

    assert not snapshot.is_assumed(pods[0].uid)
    assert snapshot.placement(pods[0].uid) is not None


def test_a_stale_decision_is_refused_whole() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=4), make_node("n2", gpus=4)])
    group, pods = make_gang("g", 2, gpus=4)
    decision = schedule_podgroup(snapshot, group, pods, now=0.0)
    second_node = decision.placements[1].node_name
    snapshot.bind(make_pod("intruder", gpus=1), second_node)

    with pytest.raises(PlacementConflict):
        snapshot.apply(decision)

    assert snapshot.placement(decision.placements[0].pod_uid) is None
    assert_consistent(snapshot)


def test_applying_a_decision_twice_is_refused() -> None:
    snapshot = make_snapshot([make_node("n1")])
    group, pods = make_gang("g", 2)
    decision = schedule_podgroup(snapshot, group, pods, now=0.0)
    snapshot.apply(decision)

    with pytest.raises(PlacementConflict):
        snapshot.apply(decision)
    assert_consistent(snapshot)


def test_add_node_creates_its_domains_and_remove_node_returns_its_pods() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1}))
    snapshot.add_node(make_node("r9-n0", rack="r9"))
    placement = snapshot.bind(make_pod("p"), "r9-n0")

    assert snapshot.domain_free(RACK_KEY, "r9") is not None
    assert_consistent(snapshot)

    assert snapshot.remove_node("r9-n0") == (placement,)
    assert snapshot.domain_free(RACK_KEY, "r9") is None
    assert snapshot.placement(placement.pod_uid) is None
    assert_consistent(snapshot)


def test_update_node_keeps_its_pods_and_moves_it_between_domains() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2}))
    snapshot.level(RACK_KEY)
    snapshot.node_index(snapshot.level(RACK_KEY).domains["r1"], GPU)
    snapshot.bind(make_pod("p", gpus=2), "r1-n0")

    snapshot.update_node(make_node("r1-n0", rack="r2", gpus=4))

    assert snapshot.node_free("r1-n0").devices[GPU] == 2
    r2 = snapshot.domain_free(RACK_KEY, "r2")
    assert r2 is not None
    assert r2.devices[GPU] == 2
    assert_consistent(snapshot)


def test_indexes_are_built_on_first_use_and_kept_current() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2, "r2": 2}))
    level = snapshot.level(RACK_KEY)
    index = snapshot.domain_index(level, GPU)
    cpu_index = snapshot.node_index(level.domains["r1"], CPU_DIMENSION)
    assert cpu_index is not None

    snapshot.bind(make_pod("p", gpus=5, cpu=20), "r1-n1")

    assert list(index.at_least(11)) == ["r1", "r2"]
    assert list(index.at_least(12)) == ["r2"]
    assert cpu_index.count_of("r1-n1") == 44
    assert_consistent(snapshot)


def test_an_untracked_topology_key_is_aggregated_on_first_use() -> None:
    nodes = [make_node(f"n{i}", labels={"example.com/pod": "p1" if i < 2 else "p2"}) for i in range(3)]
    snapshot = make_snapshot(nodes)

    level = snapshot.level("example.com/pod")

    assert {value: domain.node_count for value, domain in level.domains.items()} == {"p1": 2, "p2": 1}
    snapshot.bind(make_pod("p"), "n0")
    assert level.domains["p1"].free_devices[GPU] == 15


def test_duplicate_node_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate node"):
        make_snapshot([make_node("n1"), make_node("n1")])


def test_a_placement_whose_node_does_not_match_its_assignment_is_refused() -> None:
    snapshot = make_snapshot([make_node("n1"), make_node("n2")])
    group, pods = make_gang("g", 2)
    decision = schedule_podgroup(snapshot, group, pods, now=0.0)
    moved = (decision.placements[0]._replace(node_name="n2"), *decision.placements[1:])

    with pytest.raises(PlacementConflict):
        snapshot.apply(replace(decision, placements=moved))
    assert list(snapshot.placements()) == []
    assert_consistent(snapshot)


def test_a_gang_of_two_shapes_sharing_a_node_is_applied_and_released_whole() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=4, cpu=64)])
    group, pods = make_gang("g", 2, gpus=1, cpu=8)
    pods.append(make_pod("g-zz", gpus=2, cpu=8))
    decision = schedule_podgroup(snapshot, replace(group, gang_min_count=3), pods, now=0.0)
    assert len(decision.assignments) == 2

    snapshot.apply(decision)
    assert snapshot.node_free("n1").devices[GPU] == 0
    assert_consistent(snapshot)
    snapshot.forget(decision)
    assert snapshot.node_free("n1").devices[GPU] == 4
    assert_consistent(snapshot)


def test_a_fresh_decision_applied_after_the_snapshot_changed_is_checked_again() -> None:
    snapshot = make_snapshot([make_node("n1", gpus=2)])
    group, pods = make_gang("g", 2, gpus=1)
    decision = schedule_podgroup(snapshot, group, pods, now=0.0)
    snapshot.bind(make_pod("other", gpus=1), "n1")

    with pytest.raises(PlacementConflict):
        snapshot.apply(decision)
    assert_consistent(snapshot)


def _block_order(snapshot: ClusterSnapshot, block: str) -> list[str]:
    domain = snapshot.level(BLOCK_KEY).domains[block]
    index = snapshot.node_index(domain, GPU)
    assert index is not None
    return list(index.at_least(1))


def test_a_block_made_of_whole_racks_reads_its_nodes_through_the_racks_indexes() -> None:
    snapshot = make_snapshot(
        [*make_racks({"r2": 2, "r1": 2}, block="b1"), *make_racks({"r3": 1}, block="b2")]
    )
    snapshot.bind(make_pod("a", gpus=6), "r2-n1")
    snapshot.bind(make_pod("b", gpus=6), "r1-n0")

    assert _block_order(snapshot, "b1") == ["r1-n0", "r2-n1", "r1-n1", "r2-n0"]
    assert isinstance(snapshot.level(BLOCK_KEY).domains["b1"].node_index[GPU], NestedNodeIndex)
    snapshot.unbind("uid-a")
    assert _block_order(snapshot, "b1") == ["r1-n0", "r1-n1", "r2-n0", "r2-n1"]
    assert_consistent(snapshot)


def test_a_rack_seen_in_a_second_block_gives_the_blocks_indexes_of_their_own() -> None:
    snapshot = make_snapshot([*make_racks({"r1": 2}, block="b1"), *make_racks({"r2": 1}, block="b2")])
    assert _block_order(snapshot, "b1") == ["r1-n0", "r1-n1"]

    snapshot.add_node(make_node("r1-n2", rack="r1", block="b2", gpus=4))

    assert _block_order(snapshot, "b2") == ["r1-n2", "r2-n0"]
    assert _block_order(snapshot, "b1") == ["r1-n0", "r1-n1"]
    assert isinstance(snapshot.level(BLOCK_KEY).domains["b1"].node_index[GPU], NodeIndex)
    assert_consistent(snapshot)


def test_racks_joining_leaving_and_moving_keep_the_blocks_order() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2, "r2": 1}, block="b1"))
    assert _block_order(snapshot, "b1") == ["r1-n0", "r1-n1", "r2-n0"]

    snapshot.add_node(make_node("r0-n0", rack="r0", block="b1", gpus=2))
    assert _block_order(snapshot, "b1") == ["r0-n0", "r1-n0", "r1-n1", "r2-n0"]
    snapshot.update_node(make_node("r2-n0", rack="r2", block="b1", gpus=1))
    assert _block_order(snapshot, "b1") == ["r2-n0", "r0-n0", "r1-n0", "r1-n1"]
    snapshot.update_node(make_node("r1-n1", rack="r2", block="b1", gpus=3))
    assert _block_order(snapshot, "b1") == ["r2-n0", "r0-n0", "r1-n1", "r1-n0"]
    snapshot.remove_node("r0-n0")
    assert _block_order(snapshot, "b1") == ["r2-n0", "r1-n1", "r1-n0"]
    assert_consistent(snapshot)


def test_a_node_with_a_block_but_no_rack_gives_the_blocks_indexes_of_their_own() -> None:
    snapshot = make_snapshot(make_racks({"r1": 1}, block="b1"))
    assert _block_order(snapshot, "b1") == ["r1-n0"]

    snapshot.add_node(make_node("loose", block="b1", gpus=2))

    assert _block_order(snapshot, "b1") == ["loose", "r1-n0"]
    assert_consistent(snapshot)
