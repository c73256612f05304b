"""The CompositePodGroup cycle: child groups placed together or not at all, inside one composite domain."""

from __future__ import annotations

from libs.core.scheduling import BLOCK_KEY, RACK_KEY, TopologyDomainRef
from libs.core.scheduling.composite import ChildGroup, CompositeGroup, schedule_composite

from .builders import assert_consistent, make_gang, make_racks, make_snapshot


def _child(name: str, size: int, **options: object) -> ChildGroup:
    group, pods = make_gang(name, size, **options)  # type: ignore[arg-type]
    return ChildGroup(group, pods)


def _two_blocks() -> list:  # type: ignore[type-arg]
    """Block b1: racks r1, r2 of two 8-GPU nodes; block b2: rack r3 of four nodes and r4 of one."""
    return [*make_racks({"r1": 2, "r2": 2}, block="b1"), *make_racks({"r3": 4, "r4": 1}, block="b2")]


def test_a_driver_and_a_worker_group_land_in_one_block_each_in_one_rack() -> None:
    snapshot = make_snapshot(_two_blocks())
    composite = CompositeGroup("ml", "job", min_group_count=2, topology_key=BLOCK_KEY)
    driver = _child("driver", 2, topology_key=RACK_KEY)
    workers = _child("workers", 16, topology_key=RACK_KEY, gpus=2)

    result = schedule_composite(snapshot, composite, [driver, workers], needed=2, now=1.0)

    assert result.placed_groups == 2
    assert result.domain is not None
    assert result.domain.key == BLOCK_KEY
    blocks, racks_of = set(), []
    for decision in result.decisions:
        assert decision.placed
        nodes = {p.node_name for p in decision.placements}
        racks_of.append({snapshot.node_state(n).labels[RACK_KEY] for n in nodes})
        blocks |= {snapshot.node_state(n).labels[BLOCK_KEY] for n in nodes}
    assert len(blocks) == 1, "the composite's children share one block"
    assert all(len(racks) == 1 for racks in racks_of), "each child keeps its own rack constraint"
    # 16 workers of 2 GPUs need a whole 4-node rack: only b2 has one, so the driver is there too.
    assert blocks == {"b2"}


def test_the_cycle_leaves_the_snapshot_as_it_found_it() -> None:
    snapshot = make_snapshot(_two_blocks())
    before = {node.name: node.free() for node in snapshot.node_states()}
    composite = CompositeGroup("ml", "job", min_group_count=2, topology_key=BLOCK_KEY)

    schedule_composite(snapshot, composite, [_child("a", 8), _child("b", 40)], needed=2, now=1.0)

    assert {node.name: node.free() for node in snapshot.node_states()} == before
    assert_consistent(snapshot)


def test_no_child_is_placed_when_fewer_than_min_group_count_fit_together() -> None:
    snapshot = make_snapshot(_two_blocks())  # 32 GPUs in b1, 40 in b2
    composite = CompositeGroup("ml", "job", min_group_count=2, topology_key=BLOCK_KEY)
    big, other = _child("big", 28), _child("other", 16)  # each fits a block alone, not together

    result = schedule_composite(snapshot, composite, [big, other], needed=2, now=1.0)

    assert result.placed_groups == 0
    assert all(not decision.placed for decision in result.decisions)
    for decision in result.decisions:
        assert decision.unschedulable is not None
        assert decision.unschedulable.message.startswith(
            "CompositePodGroup job: no topology.example.com/block domain can hold 2 of its child groups"
        ), decision.unschedulable.message


def test_without_a_topology_key_min_group_count_of_three_places_only_what_fits_together() -> None:
    snapshot = make_snapshot(make_racks({"r1": 2}))  # 16 GPUs
    composite = CompositeGroup("ml", "job", min_group_count=2)
    children = [_child("a", 8), _child("b", 8), _child("c", 8)]

    enough = schedule_composite(snapshot, composite, children, needed=2, now=1.0)
    too_many = schedule_composite(snapshot, composite, children, needed=3, now=1.0)

    assert enough.placed_groups == 2
    assert [bool(d.placed) for d in enough.decisions].count(True) == 2
    assert too_many.placed_groups == 0
    message = too_many.decisions[0].unschedulable.message  # type: ignore[union-attr]
    assert message.startswith("CompositePodGroup job: only 2 of the 3 child group(s) it needs fit together")


def test_a_child_arriving_after_its_composite_was_placed_joins_the_composites_domain() -> None:
    snapshot = make_snapshot(_two_blocks())
    composite = CompositeGroup(
        "ml", "job", min_group_count=1, topology_key=BLOCK_KEY, domain=TopologyDomainRef(BLOCK_KEY, "b1")
    )
    late = _child("late", 4, topology_key=RACK_KEY)

    result = schedule_composite(snapshot, composite, [late], needed=0, now=1.0)

    (decision,) = result.decisions
    assert decision.placed
    assert {snapshot.node_state(p.node_name).labels[BLOCK_KEY] for p in decision.placements} == {"b1"}


def test_a_late_child_that_does_not_fit_the_composites_domain_waits() -> None:
    snapshot = make_snapshot(_two_blocks())
    composite = CompositeGroup(
        "ml", "job", min_group_count=1, topology_key=BLOCK_KEY, domain=TopologyDomainRef(BLOCK_KEY, "b1")
    )

    result = schedule_composite(snapshot, composite, [_child("late", 40)], needed=0, now=1.0)

    (decision,) = result.decisions
    assert not decision.placed
    assert decision.unschedulable is not None
