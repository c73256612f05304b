"""The paper's inflation protocol on a tiny synthetic trace."""

from __future__ import annotations

import itertools

from libs.core.placement import MILLI, POLICY_NAMES, GpuFleet, NodeSpec, PodDemand, make_policy
from libs.core.simulation.inflation import inflate, run_inflation

NODES = [NodeSpec(f"n{i}", 32_000, 131_072, 4, "T4") for i in range(6)] + [NodeSpec("cpu-0", 64_000, 262_144)]
WORKLOAD = [
    PodDemand("whole", 6_000, 16_384, 1, 1000),
    PodDemand("pair", 8_000, 16_384, 2, 1000),
    PodDemand("half", 2_000, 8_192, 1, 500),
    PodDemand("small", 1_000, 4_096, 1, 250),
    PodDemand("cpu", 4_000, 8_192),
]


def test_inflated_workload_stops_before_passing_the_ratio_and_depends_only_on_the_seed():
    pods = inflate(WORKLOAD, 24, seed=42, ratio=1.3)
    requested = sum(pod.gpu_request for pod in pods)
    assert requested <= 1.3 * 24 * MILLI
    assert requested > 1.3 * 24 * MILLI - 2 * MILLI
    assert inflate(WORKLOAD, 24, seed=42, ratio=1.3) == pods
    assert inflate(WORKLOAD, 24, seed=43, ratio=1.3) != pods


def test_allocation_curve_reads_every_percent_of_arrival_and_never_exceeds_arrival_or_capacity():
    fleet = GpuFleet(NODES)
    run = run_inflation(fleet, WORKLOAD, make_policy("best-fit", seed=42), seed=42)
    assert run.steps == tuple(range(131))
    curve = run.gpu_alloc_pct
    assert all(later >= earlier for earlier, later in itertools.pairwise(curve))
    assert all(alloc <= step + 1e-9 for step, alloc in zip(run.steps, curve, strict=True))
    assert curve[-1] <= 100
    assert run.unallocated_gpus == (24 * MILLI - fleet.allocated_gpu_milli) / MILLI
    assert run.placed < run.pods  # 130% cannot all fit


def test_a_run_is_the_same_for_the_same_seed_and_policy():
    fleet = GpuFleet(NODES)
    for name in ("fgd", "fgd-cpu-ratio"):
        runs = [
            run_inflation(fleet, WORKLOAD, make_policy(name, seed=1, workload=WORKLOAD), seed=45)
            for _ in range(2)
        ]
        assert runs[0] == runs[1]


def test_every_policy_leaves_no_node_overcommitted():
    for name in POLICY_NAMES:
        fleet = GpuFleet(NODES)
        run_inflation(fleet, WORKLOAD, make_policy(name, seed=3, workload=WORKLOAD), seed=44)
        assert (fleet.cpu_free >= 0).all()
        assert (fleet.memory_free >= 0).all()
        assert (fleet.gpu_free >= 0).all()
        assert (fleet.gpu_free <= fleet.gpu_capacity).all()
        used = (fleet.gpu_capacity - fleet.gpu_free).sum()
        assert used == fleet.allocated_gpu_milli, name
