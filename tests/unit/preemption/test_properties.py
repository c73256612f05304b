"""Properties of the victim search over random fleets: victims are strictly lower priority, the preemptor
fits once they are gone, no victim could have been spared, nothing is evicted for a preemptor that would
still not fit, and the snapshot is left as it was."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.core.preemption import DisruptionMode, PreemptionReason, find_victims
from libs.core.scheduling import schedule_podgroup
from tests.unit.preemption.fleet import Fleet, preemptor

NOW = 1_000.0
NODES = [f"r{rack}-n{node}" for rack in range(3) for node in range(2)]


@st.composite
def fleets(draw: Any) -> Fleet:
    fleet = Fleet(racks=3, nodes_per_rack=2, gpus=8)
    for position in range(draw(st.integers(0, 14))):
        size = draw(st.integers(1, 4))
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        nodes = draw(st.lists(st.sampled_from(NODES), min_size=size, max_size=size))
        room = fleet.free_gpus()
        for node in nodes:
            room[node] -= gpus
        if min(room.values()) < 0:
            continue
        fleet.run(
            f"u{position}",
            nodes,
            priority=draw(st.sampled_from([1, 5, 10, 100, 2000])),
            gpus=gpus,
            standalone=size == 1 and draw(st.booleans()),
            started_at=draw(st.floats(0, NOW)),
        )
    return fleet


def _fits_without(fleet: Fleet, request, uids: set[str]) -> bool:
    removed = fleet.snapshot.release_many(sorted(uids))
    try:
        return schedule_podgroup(fleet.snapshot, request.group, request.pods, now=NOW).placed
    finally:
        fleet.snapshot.restore_many(removed)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fleet=fleets(),
    size=st.integers(1, 4),
    gpus=st.sampled_from([1, 2, 4, 8]),
    rack=st.booleans(),
)
def test_victims_are_lower_priority_make_room_and_none_could_be_spared(fleet, size, gpus, rack):
    request = preemptor("p", size, gpus=gpus, priority=1000, rack=rack)
    before = fleet.free_gpus()

    decision = find_victims(fleet.snapshot, fleet.index, request, now=NOW)

    assert fleet.free_gpus() == before
    lower = {uid for uid, pod in fleet.index.pods.items() if pod.priority < 1000}
    if not decision.victims:
        if decision.reason != PreemptionReason.FITS:
            # Not even evicting every lower-priority pod would make room.
            assert not _fits_without(fleet, request, lower)
        return
    evicted = {pod.uid for victim in decision.victims for pod in victim.pods}
    assert all(victim.owner.priority < 1000 for victim in decision.victims)
    assert evicted <= lower
    assert _fits_without(fleet, request, evicted)
    for victim in decision.victims:
        if victim.owner.mode == DisruptionMode.POD_GROUP or victim.owner.standalone:
            spared = evicted - {pod.uid for pod in victim.pods}
            assert not _fits_without(fleet, request, spared), f"{victim.owner.name} could be spared"
