"""Properties over random clusters and random sequences of gangs, binds, unbinds and node changes.

No node is ever over-committed (cpu, memory, pod slots, devices), no device is allocated twice, no gang is
ever bound below its minCount, a failed cycle leaves the snapshot as it was, a hard topology constraint
always holds, the incremental aggregates, indexes and tallies always equal a recomputation, a failed
cycle's reasons are those of a node-by-node judgement, and a cycle is deterministic.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from libs.core.scheduling import (
    BLOCK_KEY,
    RACK_KEY,
    CycleDecision,
    Node,
    PodGroup,
    PodRequest,
    Taint,
    Toleration,
    TolerationOperator,
    schedule_podgroup,
)
from libs.core.scheduling.filters import rejection_reasons

from .builders import GIB, GPU, assert_consistent, make_node, make_snapshot

RACKS = {"r0": "b0", "r1": "b0", "r2": "b1"}
TAINT = Taint("dedicated", "ml")


@st.composite
def nodes(draw: Any, name: str) -> Node:
    rack = draw(st.sampled_from([*RACKS, None]))
    block = RACKS.get(rack) if rack else None
    if draw(st.integers(0, 7)) == 0:  # a rack seen in another block, or a node in a block but in no rack
        block = draw(st.sampled_from(sorted(set(RACKS.values()))))
    return make_node(
        name,
        gpus=draw(st.integers(0, 8)),
        cpu=draw(st.integers(1, 64)),
        memory_gib=draw(st.integers(1, 512)),
        pods=draw(st.integers(1, 12)),
        rack=rack,
        block=block,
        taints=[TAINT] if draw(st.integers(0, 5)) == 0 else [],
        unschedulable=draw(st.integers(0, 7)) == 0,
    )


@st.composite
def gangs(draw: Any, index: int) -> tuple[PodGroup, list[PodRequest]]:
    size = draw(st.integers(1, 10))
    basic = draw(st.booleans()) and draw(st.booleans())
    name = f"g{index}"
    group = PodGroup(
        namespace="ml",
        name=name,
        uid=name,
        gang_min_count=None if basic else draw(st.integers(1, size)),
        topology_key=draw(st.sampled_from([None, RACK_KEY, BLOCK_KEY])),
        preferred_topology=draw(st.sampled_from([(), (RACK_KEY,), (RACK_KEY, BLOCK_KEY)])),
    )
    shapes = [
        {
            "cpu_milli": draw(st.integers(0, 16)) * 500,
            "memory": draw(st.integers(0, 64)) * GIB,
            "devices": {GPU: draw(st.integers(0, 4))},
            "tolerations": (Toleration("dedicated", TolerationOperator.EXISTS),)
            if draw(st.booleans())
            else (),
        }
        for _ in range(draw(st.integers(1, 2)))
    ]
    pods = [
        PodRequest(f"{name}-{i}", f"{name}-{i:02d}", **shapes[draw(st.integers(0, len(shapes) - 1))])
        for i in range(size)
    ]
    return group, pods


class SchedulingMachine(RuleBasedStateMachine):
    """Random cycles applied to one snapshot, with pods and nodes coming and going."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshot = make_snapshot([])
        self.applied: list[CycleDecision] = []
        self.node_count = 0
        self.gang_count = 0

    @initialize(data=st.data(), count=st.integers(1, 10))
    def build(self, data: Any, count: int) -> None:
        self.snapshot = make_snapshot([data.draw(nodes(f"n{i}")) for i in range(count)])
        self.node_count = count

    @rule(data=st.data())
    def schedule_a_gang(self, data: Any) -> None:
        group, pods = data.draw(gangs(self.gang_count))
        self.gang_count += 1
        before = {node.name: node.free() for node in self.snapshot.node_states()}

        decision = schedule_podgroup(self.snapshot, group, pods, now=float(self.gang_count))

        assert {node.name: node.free() for node in self.snapshot.node_states()} == before
        assert schedule_podgroup(self.snapshot, group, pods, now=float(self.gang_count)) == decision
        if not decision.placed:
            assert decision.placements == ()
            first = min(pods, key=lambda pod: pod.name)
            node_by_node = Counter(
                reason
                for node in self.snapshot.node_states()
                for reason in rejection_reasons(first.shape, node, self.snapshot.extended_resource_name)
            )
            assert dict(decision.reason_counts) == dict(node_by_node)
            return
        assert len(decision.placements) >= (group.gang_min_count or 1)
        if group.topology_key is not None:
            labels = {
                self.snapshot.node_state(p.node_name).labels.get(group.topology_key)
                for p in decision.placements
            }
            assert len(labels) == 1
            assert None not in labels
        self.snapshot.apply(decision)
        self.applied.append(decision)

    @precondition(lambda self: self.applied)
    @rule(data=st.data())
    def a_pod_finishes(self, data: Any) -> None:
        decision = data.draw(st.sampled_from(self.applied))
        placement = data.draw(st.sampled_from(decision.placements))
        self.snapshot.unbind(placement.pod_uid)

    @precondition(lambda self: self.applied)
    @rule(data=st.data())
    def device_allocation_fails(self, data: Any) -> None:
        decision = data.draw(st.sampled_from(self.applied))
        self.snapshot.forget(decision)
        self.applied.remove(decision)

    @rule(data=st.data())
    def a_node_joins(self, data: Any) -> None:
        self.snapshot.add_node(data.draw(nodes(f"n{self.node_count}")))
        self.node_count += 1

    @precondition(lambda self: len(self.snapshot) > 0)
    @rule(data=st.data())
    def a_node_is_lost_or_changes(self, data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(node.name for node in self.snapshot.node_states())))
        if data.draw(st.booleans()):
            self.snapshot.remove_node(name)
            return
        old = self.snapshot.node_state(name).node
        replacement = data.draw(nodes(name))
        grown = Node(
            name,
            replacement.labels,
            cpu_milli=max(old.cpu_milli, replacement.cpu_milli),
            memory=max(old.memory, replacement.memory),
            pods=max(old.pods, replacement.pods),
            devices=old.devices,
            taints=replacement.taints,
            unschedulable=replacement.unschedulable,
        )
        self.snapshot.update_node(grown)

    @invariant()
    def no_node_is_over_committed(self) -> None:
        for node in self.snapshot.node_states():
            assert min(node.free_cpu, node.free_memory, node.free_pods) >= 0, node.name
        assert_consistent(self.snapshot)


TestScheduling = SchedulingMachine.TestCase
TestScheduling.settings = settings(
    max_examples=100, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
