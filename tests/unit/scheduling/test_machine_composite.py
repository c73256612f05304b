"""The scheduler state machine with CompositePodGroups: children tried together once they are ready, the
composite's cycle told once, a late child joining the composite's block."""

from __future__ import annotations

from libs.cluster.generator import ClusterShape
from libs.core.scheduling import BLOCK_KEY, RACK_KEY, PodPhase, SchedulerStateMachine
from libs.core.scheduling.inputs import ObjectStored, PodsFinished, World
from libs.core.scheduling.outputs import CompositeCycleRan, CycleRan
from tests.unit.scheduling.manifests import (
    cluster,
    cluster_queue,
    composite,
    flavor,
    gang,
    local_queue,
    podgroup,
    quota_objects,
    workload,
)

SHAPE = ClusterShape(blocks=2, racks_per_block=2, nodes_per_rack=2)  # 2 blocks of 2 racks of 2 nodes, 8 GPUs
NOW = 1_000.0


def _machine() -> SchedulerStateMachine:
    machine = SchedulerStateMachine()
    machine.load(World(cluster(SHAPE) + [workload()], {}), now=NOW)
    return machine


def _admit(machine: SchedulerStateMachine, *objects) -> None:
    for obj in objects:
        machine.handle(ObjectStored(obj), now=NOW)


def _blocks(machine: SchedulerStateMachine, ran: list[CycleRan]) -> set[str]:
    nodes = {p.node_name for r in ran for p in r.decision.placements}
    return {machine.snapshot.node_state(n).labels[BLOCK_KEY] for n in nodes}


def test_children_wait_until_enough_of_them_are_ready_then_are_placed_together_in_one_block() -> None:
    machine = _machine()
    job = composite("job", min_group_count=2, topology_key=BLOCK_KEY)
    driver = podgroup("driver", min_count=1, parent="job", topology_key=RACK_KEY)
    workers = podgroup("workers", min_count=4, parent="job", topology_key=RACK_KEY)
    _admit(machine, job, driver, workers, *gang("driver", 1, gpus=1))

    first = machine.run_pass(NOW)

    (ran,) = [o for o in first if isinstance(o, CycleRan)]
    assert not ran.decision.placed
    assert ran.decision.message.startswith("CompositePodGroup job: waiting for its child groups: 1 of the 2")
    assert not [o for o in first if isinstance(o, CompositeCycleRan)], "nothing was tried: no composite cycle"

    _admit(machine, *gang("workers", 4, gpus=4))
    later = machine.run_pass(NOW + 5)

    ran = [o for o in later if isinstance(o, CycleRan)]
    assert {r.group.name for r in ran if r.decision.placed} == {"driver", "workers"}
    assert len(_blocks(machine, ran)) == 1
    (told,) = [o for o in later if isinstance(o, CompositeCycleRan)]
    assert told.placed
    assert told.domain is not None
    assert told.domain.key == BLOCK_KEY


def test_a_child_added_after_the_composite_was_placed_joins_its_block_or_waits() -> None:
    machine = _machine()
    job = composite("job", min_group_count=1, topology_key=BLOCK_KEY)
    _admit(machine, job, podgroup("first", min_count=2, parent="job"), *gang("first", 2, gpus=8))
    placed = [o for o in machine.run_pass(NOW) if isinstance(o, CycleRan)]
    (block,) = _blocks(machine, placed)

    _admit(machine, podgroup("late", min_count=1, parent="job"), *gang("late", 1, gpus=8))
    late = [o for o in machine.run_pass(NOW + 5) if isinstance(o, CycleRan)]
    assert late[0].decision.placed
    assert _blocks(machine, late) == {block}

    # The block has room for one more 8-GPU pod; the other block is empty. A late child of two waits.
    _admit(machine, podgroup("later", min_count=2, parent="job"), *gang("later", 2, gpus=8))
    (waits,) = [o for o in machine.run_pass(NOW + 10) if isinstance(o, CycleRan)]
    assert not waits.decision.placed
    assert "topology.example.com/block" in waits.decision.message


def test_a_child_of_a_composite_that_does_not_exist_waits_saying_so() -> None:
    machine = _machine()
    _admit(machine, podgroup("orphan", min_count=1, parent="ghost"), *gang("orphan", 1))

    (ran,) = [o for o in machine.run_pass(NOW) if isinstance(o, CycleRan)]

    assert not ran.decision.placed
    assert ran.decision.message == "waiting for CompositePodGroup ghost, which does not exist"
    assert ran.preemption_priority is None


def test_a_new_leader_keeps_a_placed_composite_in_its_block_from_the_bindings_alone() -> None:
    machine = _machine()
    job = composite("job", min_group_count=1, topology_key=BLOCK_KEY)
    first = podgroup("first", min_count=2, parent="job")
    pods = gang("first", 2, gpus=8)
    _admit(machine, job, first, *pods)
    placed = [o for o in machine.run_pass(NOW) if isinstance(o, CycleRan)]
    (block,) = _blocks(machine, placed)
    bindings = {p.pod_uid: p.node_name for r in placed for p in r.decision.placements}
    nodes = sorted(set(bindings.values()))
    status = {"placement": {"domain": None, "nodes": nodes, "pods": {}}}
    stored_first = podgroup("first", min_count=2, parent="job", status=status)
    # The other block is made the tighter one: a gang not of the composite holds 3 of its 4 nodes.
    other = sorted(n.name for n in machine.snapshot.node_states() if n.labels[BLOCK_KEY] != block)[:3]
    filler = gang("filler", 3, gpus=8)
    bindings |= {p.uid: node for p, node in zip(filler, other, strict=True)}
    held = {"placement": {"domain": None, "nodes": other, "pods": {}}}

    leader = SchedulerStateMachine()
    objects = [*cluster(SHAPE), workload(), job, stored_first, *pods]
    objects += [podgroup("filler", min_count=3, status=held), *filler]
    leader.load(World(objects, bindings), now=NOW + 1)
    # On its own, a block-constrained child would take the tightest block: the other one.
    _admit(
        leader, podgroup("late", min_count=1, parent="job", topology_key=BLOCK_KEY), *gang("late", 1, gpus=8)
    )
    late = [o for o in leader.run_pass(NOW + 5) if isinstance(o, CycleRan)]

    assert [r.group.name for r in late] == ["late"]
    assert late[0].decision.placed
    assert _blocks(leader, late) == {block}
    assert not [o for o in leader.run_pass(NOW + 6) if isinstance(o, CompositeCycleRan)]


def test_a_composites_children_reserve_quota_together_or_all_wait() -> None:
    quota = quota_objects(flavor(), cluster_queue("team-a", 16), local_queue("ml", "team-a"))
    machine = SchedulerStateMachine()
    machine.load(World(cluster(SHAPE) + [workload()] + quota, {}), now=NOW)
    first = composite("first", min_group_count=2)
    first_pods = [*gang("first-a", 1, gpus=8), *gang("first-b", 1, gpus=8)]
    _admit(
        machine,
        first,
        podgroup("first-a", min_count=1, parent="first"),
        podgroup("first-b", min_count=1, parent="first"),
        *first_pods,
    )
    placed = [o for o in machine.run_pass(NOW) if isinstance(o, CycleRan)]
    assert {r.group.name for r in placed if r.decision.placed} == {"first-a", "first-b"}
    assert all(r.bind is not None and r.bind.cluster_queue == "team-a" for r in placed)

    # 16 more GPUs: the cluster has them, the queue does not. Neither child takes half.
    second = composite("second", min_group_count=2)
    _admit(
        machine,
        second,
        podgroup("second-a", min_count=1, parent="second"),
        podgroup("second-b", min_count=1, parent="second"),
        *gang("second-a", 1, gpus=8),
        *gang("second-b", 1, gpus=8),
    )
    waits = [o for o in machine.run_pass(NOW + 5) if isinstance(o, CycleRan)]
    assert {r.group.name for r in waits} == {"second-a", "second-b"}
    assert not any(r.decision.placed for r in waits)
    assert all(r.quota_message.startswith("couldn't assign flavors") for r in waits)
    assert machine.queue.gate_reason("ml/second-b").startswith("waiting for quota in ClusterQueue team-a")

    machine.handle(PodsFinished(tuple(p.uid for p in first_pods), PodPhase.SUCCEEDED), now=NOW + 10)
    later = [o for o in machine.run_pass(NOW + 10) if isinstance(o, CycleRan)]
    assert {r.group.name for r in later if r.decision.placed} == {"second-a", "second-b"}
