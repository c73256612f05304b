"""Node loss as Kubernetes handles it: unheard past the grace a node is NotReady (nothing new goes there),
unheard past the eviction timeout its pods fail and let go of their room; beats again make it Ready."""

from __future__ import annotations

import dataclasses

from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import NodeHealthRecord, NodesHeard, ObjectRemoved, ObjectStored, World
from libs.core.scheduling.machine import MachineSettings
from libs.core.scheduling.node_health import (
    UNREACHABLE_TAINT,
    NodeCondition,
    NodeHealth,
    NodeHealthSettings,
)
from libs.core.scheduling.outputs import CycleRan, Disrupted, NodeHealthChange, NodeLost, Restart
from tests.unit.scheduling.conftest import SMALL, Clock, Machine
from tests.unit.scheduling.manifests import cluster, gang, pod, podgroup, workload

HEALTH = NodeHealthSettings(monitor_grace_s=40, eviction_s=300)


def nodes_of(objects) -> list[str]:
    return sorted(obj.name for obj in objects if obj.kind == "Node")


def watched(clock: Clock) -> tuple[Machine, list[str]]:
    """A scheduler over the small cluster whose four nodes all beat once."""
    objects = [*cluster(SMALL), workload()]
    machine = Machine(clock, MachineSettings(node_health=HEALTH))
    machine.load(World(objects, {}), now=clock.now)
    names = nodes_of(objects)
    machine.tell(NodesHeard(dict.fromkeys(names, 1)))
    return machine, names


def beat(machine: Machine, names: list[str], count: int) -> None:
    machine.tell(NodesHeard(dict.fromkeys(names, count)))


def test_a_node_unheard_past_the_grace_is_not_ready_and_then_lost_after_the_eviction_timeout():
    health = NodeHealth(HEALTH)
    health.heard({"a": 1, "b": 1}, now=0)
    health.heard({"a": 2}, now=30)

    assert health.due(39) == []
    (not_ready,) = health.due(40)
    assert (not_ready.node, not_ready.condition, not_ready.since) == ("b", NodeCondition.NOT_READY, 40)
    assert health.next_deadline() == 70  # a's grace, from its beat at 30
    health.heard({"a": 3}, now=330)
    (lost,) = health.due(340)
    assert (lost.node, lost.condition, lost.since) == ("b", NodeCondition.LOST, 340)
    later = [(c.node, c.condition, c.since) for c in health.due(10_000)]
    assert later == [("a", NodeCondition.NOT_READY, 370), ("a", NodeCondition.LOST, 670)]


def test_a_node_that_beats_again_is_ready_again_whatever_the_clocks_of_its_agent():
    health = NodeHealth(HEALTH)
    health.heard({"a": 7}, now=0)
    health.due(41)
    assert health.condition("a") == NodeCondition.NOT_READY

    (back,) = health.heard({"a": 8}, now=50)  # only the count moved: the agent's clock is never read

    assert (back.condition, back.since) == (NodeCondition.READY, 50)
    assert health.due(89) == []


def test_a_not_ready_node_takes_no_new_pods_and_its_running_pods_keep_their_room_until_it_is_lost(clock):
    machine, names = watched(clock)
    lonely = names[0]
    machine.admit(pod("runner", gpus=8, node_selector={"kubernetes.io/hostname": lonely}))
    (ran,) = machine.run()
    assert ran.bind is not None
    clock.now += 40
    beat(machine, names[1:], 2)

    changes = machine.run()

    assert [(c.node, c.condition) for c in changes if isinstance(c, NodeHealthChange)] == [
        (lonely, NodeCondition.NOT_READY)
    ]
    machine.admit(pod("newcomer", gpus=1, node_selector={"kubernetes.io/hostname": lonely}))
    (refused,) = machine.run()
    assert not refused.decision.placed
    assert UNREACHABLE_TAINT in refused.decision.message
    assert machine.book.pods[ran.bind.placements[0].pod_uid].phase == PodPhase.PENDING  # not lost yet


def test_the_pods_of_a_lost_node_fail_and_their_gang_restarts_elsewhere_per_its_policy(clock):
    machine, names = watched(clock)
    group = podgroup("g", min_count=2, annotations={"podway.io/gang-restart": "Always"})
    machine.admit(group, *gang("g", 2, gpus=8))
    (ran,) = machine.run()
    by_node = {p.node_name: p.pod_uid for p in ran.bind.placements}
    gone, kept = sorted(by_node)
    clock.now += 40
    beat(machine, [n for n in names if n != gone], 2)
    machine.run()
    clock.now += 300
    beat(machine, [n for n in names if n != gone], 3)

    outputs = machine.run()

    (lost,) = [o for o in outputs if isinstance(o, NodeLost)]
    assert (lost.node, [p.uid for _, p in lost.pods], lost.deleted) == (gone, [by_node[gone]], False)
    assert machine.book.pods[by_node[gone]].phase == PodPhase.FAILED
    (restart,) = [o for o in outputs if isinstance(o, Restart)]
    assert [p.uid for p in restart.evict] == [by_node[kept]]
    assert machine.snapshot.placement(by_node[gone]) is None
    assert gone not in {p.node_name for p in machine.snapshot.placements()}


def test_a_node_lost_once_is_not_lost_again_by_a_new_leader_and_beats_make_it_ready(clock):
    objects = [*cluster(SMALL), workload()]
    name = nodes_of(objects)[0]
    record = NodeHealthRecord(name, 5, NodeCondition.LOST, clock.now - 1_000)
    successor = Machine(clock, MachineSettings(node_health=HEALTH))
    successor.load(World(objects, {}, node_health=(record,)), now=clock.now)
    clock.now += 10_000

    assert [o for o in successor.run() if isinstance(o, NodeLost | NodeHealthChange)] == []
    successor.admit(pod("p", gpus=1, node_selector={"kubernetes.io/hostname": name}))
    assert not successor.run()[0].decision.placed

    successor.tell(NodesHeard({name: 6}))
    changes = [o for o in successor.run() if isinstance(o, NodeHealthChange)]
    assert [(c.node, c.condition) for c in changes] == [(name, NodeCondition.READY)]
    clock.now += 1
    assert any(isinstance(o, CycleRan) and o.decision.placed for o in successor.run())


def test_a_node_deleted_under_a_running_pod_fails_it_and_registering_the_node_again_books_nothing_twice(
    scheduler, clock
):
    node_name = sorted(o.name for o in cluster(SMALL) if o.kind == "Node")[0]
    scheduler.admit(pod("standalone", gpus=8, node_selector={"kubernetes.io/hostname": node_name}))
    (ran,) = scheduler.run()
    uid = ran.bind.placements[0].pod_uid
    node = scheduler.inventory.node(node_name)

    scheduler.tell(ObjectRemoved("Node", "", node_name, node.uid))
    (lost,) = scheduler.run()
    scheduler.tell(ObjectStored(dataclasses.replace(node, uid="registered-again")))

    assert isinstance(lost, NodeLost)
    assert (lost.node, [p.uid for _, p in lost.pods], lost.deleted) == (node_name, [uid], True)
    assert scheduler.book.pods[uid].phase == PodPhase.FAILED
    assert scheduler.snapshot.node_free(node_name).devices["gpu.example.com"] == 8


def test_a_gang_preempted_whole_is_placed_anew_and_not_held_to_its_old_rack(scheduler, clock):
    rack = {"topology.example.com/rack": "zone-0-b0-r0"}
    group = podgroup("g", min_count=2, topology_key="topology.example.com/rack")
    scheduler.admit(group, *gang("g", 2, gpus=8, node_selector=rack))
    (ran,) = scheduler.run()
    assert ran.bind.domain is not None
    uids = [p.pod_uid for p in ran.bind.placements]

    scheduler.finish(uids, PodPhase.FAILED, "preempted")
    (disrupted,) = scheduler.run()

    assert isinstance(disrupted, Disrupted)
    assert disrupted.group.uid == group.uid
    record = scheduler.book.groups[group.key]
    assert (record.domain, record.placement, record.scheduled) == (None, {}, False)
