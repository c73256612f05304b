"""Dynamic replay through the scheduler state machine on a virtual clock."""

from __future__ import annotations

from libs.core.placement import NodeSpec, PodDemand
from libs.core.scheduling import RACK_KEY
from libs.core.scheduling.objects import ApiObject
from libs.core.simulation.replay import (
    GangMix,
    ReplayJob,
    TimedPod,
    cluster_manifests,
    replay,
    stored,
    synthesise_jobs,
)

NODES = [NodeSpec(f"node-{i}", 64_000, 262_144, 8, "G2") for i in range(4)] + [
    NodeSpec("cpu-0", 32_000, 131_072)
]


def cluster(nodes_per_rack: int = 8, racks_per_block: int = 4) -> list[ApiObject]:
    manifests = cluster_manifests(NODES, nodes_per_rack=nodes_per_rack, racks_per_block=racks_per_block)
    return [stored(manifest) for manifest in manifests]


def timed(
    name: str, arrival: float, run: float, gpus: int = 1, milli: int = 1000, qos: str = "BE"
) -> TimedPod:
    return TimedPod(PodDemand(name, 4_000, 16_384, gpus, milli if gpus else 0), arrival, run, qos)


def test_gangs_are_cut_from_pods_of_one_shape_with_the_mix_widths_and_seeded():
    pods = [timed(f"p{i:02d}", i, 100) for i in range(20)] + [timed("cpu", 5, 10, gpus=0)]
    mix = GangMix(widths=(4,), weights=(1.0,))
    jobs = synthesise_jobs(pods, seed=1, mix=mix, speedup=10)
    gangs = [job for job in jobs if len(job.pods) > 1]
    assert [len(job.pods) for job in gangs] == [4] * 5
    assert all(job.topology_key == RACK_KEY for job in gangs)
    assert gangs[1].arrival == 0.4
    assert gangs[1].run_seconds == 100
    assert synthesise_jobs(pods, seed=7, speedup=10) == synthesise_jobs(pods, seed=7, speedup=10)


def test_a_shared_gpu_is_asked_for_as_one_whole_gpu():
    (job,) = synthesise_jobs([timed("half", 0, 10, milli=300)], seed=1)
    assert (job.pods[0].gpus, job.pods[0].gpu_milli) == (1, 1000)


def test_pods_wait_for_room_and_run_their_time():
    jobs = [
        ReplayJob(
            "first", 0.0, 100.0, tuple(PodDemand(f"a{i}", 1_000, 1_024, 8, 1000) for i in range(4)), 0, None
        ),
        ReplayJob(
            "gang-second",
            10.0,
            50.0,
            tuple(PodDemand(f"b{i}", 1_000, 1_024, 8, 1000) for i in range(2)),
            0,
            RACK_KEY,
        ),
    ]
    result = replay(cluster(), jobs)
    assert result.never_placed == 0
    assert sorted(result.delays) == [0.0] * 4 + [90.0, 90.0]
    assert max(allocated for _, allocated in result.allocation) == 32
    assert result.allocation[-1][1] == 0


def test_a_gang_no_rack_can_hold_is_never_placed_and_the_replay_ends():
    wide = tuple(PodDemand(f"w{i}", 1_000, 1_024, 8, 1000) for i in range(5))
    result = replay(cluster(2, 2), [ReplayJob("gang-wide", 0.0, 10.0, wide, 0, RACK_KEY)])
    assert result.never_placed == 5
    assert result.cycles >= 1


def test_the_same_jobs_bind_the_same_pods_to_the_same_nodes():
    pods = [timed(f"p{i:02d}", i * 3, 40 + i, gpus=1 + i % 3) for i in range(40)]
    jobs = synthesise_jobs(pods, seed=3, speedup=2)
    first, second = replay(cluster(), jobs), replay(cluster(), jobs)
    assert first.bound == second.bound
    assert first.delays == second.delays
    assert len(first.bound) == 40


def full_fleet_then(low_priority: int, low_run: float, later_priority: int) -> list[ReplayJob]:
    """A gang taking every GPU of the fleet, then a 2-pod gang arriving at t=10 that runs 50 s."""
    whole_fleet = tuple(PodDemand(f"low{i}", 1_000, 1_024, 8, 1000) for i in range(4))
    later = tuple(PodDemand(f"later{i}", 1_000, 1_024, 8, 1000) for i in range(2))
    return [
        ReplayJob("gang-low", 0.0, low_run, whole_fleet, low_priority, None),
        ReplayJob("gang-later", 10.0, 50.0, later, later_priority, RACK_KEY),
    ]


def test_a_higher_priority_gang_preempts_the_cheapest_lower_one_and_runs_before_it_would_have():
    result = replay(cluster(), full_fleet_then(0, 1_000.0, 1000))

    assert result.preemption_requests == 1
    assert (result.gangs_preempted, result.pods_preempted) == (1, 4)
    later_delays = sorted(result.delays)[-2:]
    assert max(later_delays) < 20.0, "bound on the freed room, not after the low gang's 1,000 s"
    assert result.never_placed == 0
    assert min(allocated for _, allocated in result.allocation) == 0
    assert result.allocation[-1][1] == 0, "the evicted pods' planned ends give back nothing twice"


def test_equal_priority_never_preempts_in_the_replay():
    result = replay(cluster(), full_fleet_then(500, 100.0, 500))

    assert result.gangs_preempted == 0
    assert sorted(result.delays)[-1] == 90.0
