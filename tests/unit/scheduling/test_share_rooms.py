"""The share room index stays in step with the shares held and the snapshot's free capacity: under random
sequences of shares placed, pods released and nodes resized (cpu, pod slots), it names exactly the nodes a brute-force
look at the usage and the snapshot names, in the same order (ascending room, then name)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.dra_core import GPU_CLASS, load_fleet
from libs.core.dra.claims import ClaimSpec, claim_spec
from libs.core.scheduling import PodGroup, PodRequest, SchedulerStateMachine, schedule_podgroup
from libs.core.scheduling.model import Node
from libs.core.scheduling.rooms import ShareRooms
from libs.core.scheduling.snapshot import ClusterSnapshot

GIB = 1024**3
CORES = f"{GPU_CLASS}/cores"


def fleet() -> SchedulerStateMachine:
    """Six nodes of two shareable GPUs, 8 CPU and 32 Gi each."""
    args = argparse.Namespace(blocks=1, racks_per_block=2, nodes_per_rack=3, gpus_per_node=2)
    machine, _ = load_fleet(args, shared=True)
    for state in list(machine.snapshot.node_states()):
        machine.snapshot.update_node(replace(state.node, cpu_milli=8_000, memory=32 * GIB))
    return machine


def share(milli: int) -> tuple[ClaimSpec, ...]:
    exactly = {"deviceClassName": GPU_CLASS, "count": 1, "capacity": {"requests": {"cores": f"{milli}m"}}}
    return (claim_spec("gpu", {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}),)


def expected_rooms(machine: SchedulerStateMachine) -> dict[str, int]:
    """The cores left on each node's roomiest GPU, from the usage."""
    consumed = machine.claims.usage.consumed
    rooms: dict[str, int] = {}
    for device in machine.claims.inventory.devices.values():
        left = device.capacity[CORES] - consumed.get(device.id, {}).get(CORES, 0)
        rooms[str(device.node)] = max(rooms.get(str(device.node), 0), left)
    return rooms


def expected_order(machine: SchedulerStateMachine, need: int, cpu: int, memory: int) -> list[str]:
    """Nodes by ascending room on their roomiest GPU then name, with the room, cpu, memory and a pod slot."""
    fitting = [
        (room, name)
        for name, room in expected_rooms(machine).items()
        if room >= need
        and (state := machine.snapshot.node_state(name)).free_pods > 0
        and state.free_cpu >= cpu
        and state.free_memory >= memory
    ]
    return [name for _, name in sorted(fitting)]


shares = st.tuples(st.just("place"), st.integers(50, 1000), st.integers(1, 4), st.integers(1, 12))
releases = st.tuples(st.just("release"), st.integers(0, 100))
resizes = st.tuples(st.just("resize"), st.integers(0, 5), st.integers(2, 16), st.integers(1, 3))
probes = st.tuples(st.integers(0, 1000), st.integers(0, 6), st.integers(0, 24))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(shares, shares, releases, resizes), max_size=30), probes)
def test_the_share_rooms_name_the_nodes_the_usage_and_the_snapshot_name(steps, probe):
    machine = fleet()
    snapshot, view = machine.snapshot, machine.claims
    live: list[str] = []
    for number, step in enumerate(steps):
        if step[0] == "place":
            _, milli, cores, gib = step
            uid = f"pod-{number}"
            pod = PodRequest(uid, uid, cores * 1000, gib * GIB, claims=share(milli))
            decision = schedule_podgroup(snapshot, PodGroup("ns", uid, uid=uid), [pod], now=float(number))
            if decision.placed:
                snapshot.apply(decision)
                for owner, allocations in (decision.claims or {}).items():
                    view.hold(owner, allocations)
                live.append(uid)
        elif step[0] == "release" and live:
            uid = live.pop(step[1] % len(live))
            snapshot.release_many([uid])
            view.release(uid)
        elif step[0] == "resize":
            state = sorted(snapshot.node_states(), key=lambda node: node.name)[step[1]]
            snapshot.update_node(replace(state.node, cpu_milli=step[2] * 1000, pods=step[3]))
        for need, cores, gib in (probe, (1, 0, 0), (300, 0, 0), (700, 1, 4), (1000, 0, 0)):
            shape = PodRequest("probe", "probe", cores * 1000, gib * GIB, claims=share(max(need, 1))).shape
            order = view.room_order(shape.claims, shape, snapshot)
            assert order is not None
            assert list(order) == expected_order(machine, max(need, 1), cores * 1000, gib * GIB)
        assert view.share_rooms(GPU_CLASS) == expected_rooms(machine)


def test_a_node_whose_cpu_is_taken_is_not_offered_for_a_share_though_its_gpus_have_room():
    machine = fleet()
    snapshot, view = machine.snapshot, machine.claims
    hog = PodRequest("hog", "hog", 8_000, GIB, claims=share(100))
    decision = schedule_podgroup(snapshot, PodGroup("ns", "hog", uid="hog"), [hog], now=0.0)
    snapshot.apply(decision)
    for owner, allocations in (decision.claims or {}).items():
        view.hold(owner, allocations)
    (placement,) = decision.placements

    shape = PodRequest("next", "next", 1_000, GIB, claims=share(100)).shape
    order = list(view.room_order(shape.claims, shape, snapshot) or ())

    assert placement.node_name not in order
    assert len(order) == 5


def test_a_node_without_a_free_pod_slot_is_not_offered_for_a_share():
    machine = fleet()
    snapshot, view = machine.snapshot, machine.claims
    first = sorted(snapshot.node_states(), key=lambda node: node.name)[0]
    snapshot.update_node(replace(first.node, pods=1))
    pod = PodRequest("one", "one", 1_000, GIB, claims=share(100))
    decision = schedule_podgroup(snapshot, PodGroup("ns", "one", uid="one"), [pod], now=0.0)
    snapshot.apply(decision)
    for owner, allocations in (decision.claims or {}).items():
        view.hold(owner, allocations)
    (placement,) = decision.placements

    shape = PodRequest("next", "next", 1_000, GIB, claims=share(100)).shape
    order = list(view.room_order(shape.claims, shape, snapshot) or ())

    assert placement.node_name == first.name
    assert order == expected_order(machine, 100, 1_000, GIB)
    assert first.name not in order


def test_rooms_too_large_for_a_sort_key_come_in_the_same_order():
    snapshot = ClusterSnapshot([Node(name, cpu_milli=4_000, memory=8 * GIB) for name in "abcd"])
    rooms = {"a": 5, "b": 3, "c": 5, "d": 0}
    huge = 2**60

    narrow = ShareRooms("cores", (1, 8), rooms, snapshot.nodes_by_name)
    wide = ShareRooms(
        "cores", (huge, 8 * huge), {k: v * huge for k, v in rooms.items()}, snapshot.nodes_by_name
    )

    assert not narrow.wide
    assert wide.wide
    assert list(narrow.at_least(1, 1_000, GIB, lambda node: rooms[node])) == ["b", "a", "c"]
    assert list(wide.at_least(huge, 1_000, GIB, lambda node: rooms[node] * huge)) == ["b", "a", "c"]
    assert list(narrow.at_least(4, 5_000, 0, lambda node: rooms[node])) == []
