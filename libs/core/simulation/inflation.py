"""The paper's protocol: an inflated workload scheduled once, in a shuffled order, with no departures.

Pods are sampled with replacement from every row of the workload (seeded) until the next one would take
the requested milli-GPUs past `ratio` x the fleet's capacity; the order is shuffled with the same seed;
each pod is placed once by the policy or fails. After every pod the simulator notes the GPU request that
has arrived and the milli-GPUs allocated; the curve reads the allocation at every 1% step of arrival.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from libs.core.placement import MILLI, GpuFleet, PlacementPolicy, PodDemand

INFLATION_RATIO = 1.3
PAPER_SEEDS = tuple(range(42, 52))


@dataclass(frozen=True, slots=True)
class InflationRun:
    """One policy on one seed: GPU allocation (% of the fleet's milli-GPUs) at each arrival step
    (`steps[i]` % of the fleet's GPUs requested so far), and the pods that fit or not."""

    policy: str
    seed: int
    steps: tuple[int, ...]
    gpu_alloc_pct: tuple[float, ...]
    pods: int
    placed: int
    failed_gpu_milli: int
    final_gpu_alloc_pct: float
    unallocated_gpus: float

    def alloc_at(self, step: int) -> float:
        return self.gpu_alloc_pct[self.steps.index(step)]


def inflate(workload: Sequence[PodDemand], total_gpus: int, *, seed: int, ratio: float) -> list[PodDemand]:
    """Pods drawn with replacement until the requested GPUs would pass `ratio` x capacity, shuffled."""
    rng = np.random.default_rng(seed)
    requests = np.array([pod.gpu_request for pod in workload], dtype=np.int64)
    target = ratio * total_gpus * MILLI
    mean = max(float(requests.mean()), 1.0)
    drawn: list[int] = []
    requested = 0
    while True:
        batch = rng.integers(len(workload), size=int((target - requested) / mean) + 64)
        cumulative = requested + np.cumsum(requests[batch])
        fits = int(np.searchsorted(cumulative, target, side="right"))
        drawn += batch[:fits].tolist()
        if fits < len(batch):
            break
        requested = int(cumulative[-1])
    order = rng.permutation(len(drawn))
    return [workload[drawn[i]] for i in order]


def run_inflation(
    fleet: GpuFleet,
    workload: Sequence[PodDemand],
    policy: PlacementPolicy,
    *,
    seed: int,
    ratio: float = INFLATION_RATIO,
    on_pod: Callable[[PodDemand, bool], None] | None = None,
) -> InflationRun:
    """Schedule the inflated workload once on an empty fleet (which is left as the run leaves it)."""
    fleet.reset()
    pods = inflate(workload, fleet.total_gpus, seed=seed, ratio=ratio)
    arrived = np.empty(len(pods), dtype=np.int64)
    allocated = np.empty(len(pods), dtype=np.int64)
    requested = placed = failed = 0
    for position, pod in enumerate(pods):
        choice = policy.choose(fleet, pod)
        if choice is not None:
            fleet.place(pod, choice)
            placed += 1
        else:
            failed += pod.gpu_request
        if on_pod is not None:
            on_pod(pod, choice is not None)
        requested += pod.gpu_request
        arrived[position] = requested
        allocated[position] = fleet.allocated_gpu_milli
    capacity = fleet.total_gpus * MILLI
    steps = tuple(range(round(ratio * 100) + 1))
    thresholds = np.array(steps, dtype=np.float64) * capacity / 100
    last = np.searchsorted(arrived, thresholds + 1e-6, side="right") - 1
    curve = np.where(last >= 0, allocated[np.maximum(last, 0)], 0) * 100 / capacity
    curve[-1] = fleet.allocated_gpu_milli * 100 / capacity
    return InflationRun(
        policy=policy.name,
        seed=seed,
        steps=steps,
        gpu_alloc_pct=tuple(float(value) for value in curve),
        pods=len(pods),
        placed=placed,
        failed_gpu_milli=failed,
        final_gpu_alloc_pct=fleet.allocated_gpu_milli * 100 / capacity,
        unallocated_gpus=(capacity - fleet.allocated_gpu_milli) / MILLI,
    )
