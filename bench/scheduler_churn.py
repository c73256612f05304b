"""`podway bench scheduler-core --mix churn`: a fleet held at 90-95 % of its GPUs while gangs finish and
new ones arrive, the case a busy GPU cluster runs all day.

The fleet is scheduler-core's (by default 5,000 nodes: 10 blocks x 10 racks x 50 nodes, 8 GPUs, 64 CPU,
512 Gi each). Gangs (seeded, so every run is the same) have 2-32 pods (log-uniform), each asking 0, 1, 2, 4
or 8 GPUs with 6 CPU and 48 Gi per GPU, or, CPU-only, 1-8 CPU with 8 Gi per CPU; half are rack-constrained,
a quarter block-constrained and a quarter block-constrained preferring one rack inside the block (the hard
`topology_key` and `preferred_topology`).

1. Warm-up (not measured): gangs are placed until the fleet reaches the bottom of the band, then the
   steady state below runs `--churn-warmup` cycles (50,000), so that the fleet's fragmentation settles: an
   empty fleet filled once is packed tighter than one that has churned, and the share of failed cycles
   grows from under 1 % to 11-19 % over the first ~50,000 cycles, then stays there.
2. Steady state (measured, `--churn-cycles`): a target fill sweeps the band up and down (a triangle wave, one period every
   `--churn-period` cycles). Before each cycle, while the fleet holds more than the target, the running
   gang that ends first finishes: its pods give their capacity back through `snapshot.unbind` (the time
   moves on to the next completion). Then one cycle runs: a gang due for a retry, else a new arrival.
   A placed decision is applied (`snapshot.apply`); an unschedulable gang is retried after 1, 2, 4 ...
   completions (the queue's backoff and its retry on pods finishing, counted in completions) and given up
   after `--churn-attempts` cycles.

The collector runs as in the scheduler service (`libs.runtime.memory.tune_collector`: rarer young and full
collections) and the heap is frozen after the warm-up; `--no-gc-freeze` keeps CPython's defaults for both.
With the defaults, young collections walking the placements of the pods started since the last one took
9 % of the timed cycles in one run on a loaded host (1 % tuned).

Timed: each cycle (`schedule_podgroup`, plus `snapshot.apply` when placed), as placed or failed cycles;
completions are timed apart (`unbind_us_per_pod`). `churn_pods_per_second` is placed pods over the time
spent in every cycle, placed and failed.

Left out: the scheduling queue itself (ordering, PreEnqueue, timeouts: the retries above stand in for it),
binding and DRA device allocation (placements stay assumed until they finish), preemption, node changes,
taints, node selectors, basic groups, gangs placed above their minCount, and the services' I/O.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import math
import os
import random
import resource
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from bench.measure import percentile, scheduling_core
from libs.core.scheduling import BLOCK_KEY, RACK_KEY, ClusterSnapshot, PodGroup, PodRequest, schedule_podgroup
from libs.runtime.memory import tune_collector

GIB = 1024**3
GPU_CLASS = "gpu.example.com"
GPU_RESOURCE = "nvidia.com/gpu"
GPUS_PER_POD = (0, 1, 2, 4, 8)
GPUS_PER_POD_WEIGHTS = (2, 3, 3, 2, 1)
CPU_ONLY_CORES = (1, 2, 4, 8)
CPU_PER_GPU_MILLI = 6_000
MEMORY_PER_GPU = 48 * GIB
MEMORY_PER_CORE = 8 * GIB


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the churn mix (the fleet's own come from scheduler-core)."""
    parser.add_argument(
        "--fill-band",
        type=float,
        nargs=2,
        default=(0.90, 0.95),
        metavar=("LOW", "HIGH"),
        help="churn: the GPU fill the fleet is held between",
    )
    parser.add_argument(
        "--churn-warmup", type=int, default=50_000, help="churn: cycles run before measuring (not measured)"
    )
    parser.add_argument("--churn-cycles", type=int, default=20_000, help="churn: measured cycles")
    parser.add_argument("--churn-period", type=int, default=2_000, help="churn: cycles per sweep of the band")
    parser.add_argument(
        "--churn-attempts", type=int, default=5, help="churn: cycles before a gang is given up"
    )


@dataclass(slots=True)
class _Gang:
    group: PodGroup
    pods: list[PodRequest]
    gpus: int
    runs_for: float
    number: int
    attempts: int = 0


class _Arrivals:
    """New gangs, seeded: sizes, shapes and constraints drawn as the module docstring says."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0

    def __next__(self) -> _Gang:
        rng = self.rng
        self.count += 1
        name = f"churn-{self.count}"
        size = min(32, int(2 ** rng.uniform(1, math.log2(33))))
        gpus = rng.choices(GPUS_PER_POD, GPUS_PER_POD_WEIGHTS)[0]
        if gpus:
            cpu, memory = gpus * CPU_PER_GPU_MILLI, gpus * MEMORY_PER_GPU
        else:
            cores = rng.choice(CPU_ONLY_CORES)
            cpu, memory = cores * 1000, cores * MEMORY_PER_CORE
        constraint = rng.random()
        preferred: tuple[str, ...]
        if constraint < 0.5:
            hard, preferred = RACK_KEY, ()
        elif constraint < 0.75:
            hard, preferred = BLOCK_KEY, ()
        else:
            hard, preferred = BLOCK_KEY, (RACK_KEY,)
        group = PodGroup(
            "bench",
            name,
            uid=name,
            gang_min_count=size,
            topology_key=hard,
            preferred_topology=preferred,
            created_at=float(self.count),
        )
        devices = {GPU_CLASS: gpus} if gpus else {}
        pods = [PodRequest(f"{name}-{pod}", f"{name}-{pod:02d}", cpu, memory, devices) for pod in range(size)]
        return _Gang(group, pods, size * gpus, rng.expovariate(1.0), self.count)


@dataclass(slots=True)
class _Churn:
    """What the steady state measured."""

    placed_seconds: list[float] = field(default_factory=list)
    failed_seconds: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    placed_pods: int = 0
    fills: list[float] = field(default_factory=list)
    completed_gangs: int = 0
    completed_pods: int = 0
    unbind_seconds: float = 0.0
    retried_cycles: int = 0
    given_up_gangs: int = 0


class _Fleet:
    """The snapshot with its running gangs (ordered by when they end) and the gangs waiting for a retry."""

    def __init__(self, snapshot: ClusterSnapshot, total_gpus: int, args: argparse.Namespace) -> None:
        self.snapshot = snapshot
        self.total_gpus = total_gpus
        self.low, self.high = args.fill_band
        self.period = args.churn_period
        self.attempts_allowed = args.churn_attempts
        self.used_gpus = 0
        self.clock = 0.0
        self.running: list[tuple[float, int, list[str], int]] = []
        self.waiting: deque[tuple[int, _Gang]] = deque()
        self.completions = 0
        self.cycles = 0
        self.arrivals = _Arrivals(args.seed)

    @property
    def fill(self) -> float:
        return self.used_gpus / self.total_gpus

    def next_gang(self) -> _Gang:
        """The first waiting gang whose backoff has passed, else a new arrival."""
        if self.waiting and self.waiting[0][0] <= self.completions:
            return self.waiting.popleft()[1]
        return next(self.arrivals)

    def fill_to_band(self) -> int:
        """Place gangs on the empty fleet until it reaches the bottom of the band; returns the cycles run."""
        cycles = 0
        unmeasured = _Churn()
        while self.fill < self.low and cycles < self.total_gpus:
            self.cycle(self.next_gang(), unmeasured)
            cycles += 1
        return cycles

    def churn(self, cycles: int, result: _Churn) -> None:
        """The steady state: before each cycle, completions bring the fleet down to the target fill."""
        for _ in range(cycles):
            self.finish_until(
                _target(self.cycles, self.period, self.low, self.high) * self.total_gpus, result
            )
            result.fills.append(self.fill)
            self.cycle(self.next_gang(), result)
            self.cycles += 1

    def cycle(self, gang: _Gang, result: _Churn) -> bool:
        """One cycle for the gang, timed into `result`."""
        snapshot, group, pods = self.snapshot, gang.group, gang.pods
        cpu_begin, begin = time.process_time(), time.perf_counter()
        decision = schedule_podgroup(snapshot, group, pods, now=self.clock)
        if decision.placed:
            snapshot.apply(decision)
        end, cpu_end = time.perf_counter(), time.process_time()
        gang.attempts += 1
        result.cpu_seconds += cpu_end - cpu_begin
        result.retried_cycles += gang.attempts > 1
        (result.placed_seconds if decision.placed else result.failed_seconds).append(end - begin)
        if decision.placed:
            uids = [placement.pod_uid for placement in decision.placements]
            heapq.heappush(self.running, (self.clock + gang.runs_for, gang.number, uids, gang.gpus))
            self.used_gpus += gang.gpus
            result.placed_pods += len(uids)
            return True
        if gang.attempts < self.attempts_allowed:
            self.waiting.append((self.completions + 2 ** (gang.attempts - 1), gang))
        else:
            result.given_up_gangs += 1
        return False

    def finish_until(self, target_gpus: float, result: _Churn) -> None:
        """Let the running gangs that end first finish until the fleet holds at most `target_gpus`."""
        snapshot, running = self.snapshot, self.running
        while self.used_gpus > target_gpus and running:
            ends, _, uids, gpus = heapq.heappop(running)
            self.clock = max(self.clock, ends)
            begin = time.perf_counter()
            for uid in uids:
                snapshot.unbind(uid)
            result.unbind_seconds += time.perf_counter() - begin
            self.used_gpus -= gpus
            self.completions += 1
            result.completed_gangs += 1
            result.completed_pods += len(uids)


def _target(cycle: int, period: int, low: float, high: float) -> float:
    """The fill the steady state aims at: a triangle wave from `low` up to `high` and back each period."""
    phase = (cycle % period) / period
    return low + (high - low) * (1 - abs(2 * phase - 1))


def run_churn(args: argparse.Namespace, snapshot: ClusterSnapshot, total_gpus: int) -> dict[str, Any]:
    """Fill the fleet to the band, churn it unmeasured, then measure the steady state; returns the metrics."""
    thresholds = gc.get_threshold()
    if args.gc_freeze:
        tune_collector()
    try:
        return _measure(args, _Fleet(snapshot, total_gpus, args))
    finally:
        gc.set_threshold(*thresholds)


def _measure(args: argparse.Namespace, fleet: _Fleet) -> dict[str, Any]:
    # 1. Fill the empty fleet to the bottom of the band; 2. let it churn until its fragmentation settles.
    fill_cycles = fleet.fill_to_band()
    fleet.churn(args.churn_warmup, _Churn())
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    # 3. Measure.
    result = _Churn()
    fleet.churn(args.churn_cycles, result)
    placed, failed = result.placed_seconds, result.failed_seconds
    elapsed = sum(placed) + sum(failed)
    return {
        "churn_pods_per_second": round(result.placed_pods / elapsed if elapsed else 0.0, 1),
        "churn_cpu_pods_per_second": round(
            result.placed_pods / result.cpu_seconds if result.cpu_seconds else 0.0, 1
        ),
        "placed_cycle_ms_p50": round(percentile(placed, 0.50) * 1000, 4),
        "placed_cycle_ms_p99": round(percentile(placed, 0.99) * 1000, 4),
        "placed_cycle_ms_max": round(max(placed, default=0.0) * 1000, 4),
        "failed_cycle_ms_p50": round(percentile(failed, 0.50) * 1000, 4),
        "failed_cycle_ms_p99": round(percentile(failed, 0.99) * 1000, 4),
        "failed_cycle_ms_max": round(max(failed, default=0.0) * 1000, 4),
        "placed_cycles": len(placed),
        "failed_cycles": len(failed),
        "retried_cycles": result.retried_cycles,
        "placed_pods": result.placed_pods,
        "given_up_gangs": result.given_up_gangs,
        "completed_gangs": result.completed_gangs,
        "unbind_us_per_pod": round(
            result.unbind_seconds * 1e6 / result.completed_pods if result.completed_pods else 0.0, 2
        ),
        "gpu_fill_ratio_min": round(min(result.fills, default=0.0), 4),
        "gpu_fill_ratio_mean": round(sum(result.fills) / len(result.fills) if result.fills else 0.0, 4),
        "gpu_fill_ratio_max": round(max(result.fills, default=0.0), 4),
        "fill_cycles": fill_cycles,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def churn_params(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "fill_band": list(args.fill_band),
        "churn_warmup": args.churn_warmup,
        "churn_cycles": args.churn_cycles,
        "churn_period": args.churn_period,
        "churn_attempts": args.churn_attempts,
        "collector": "tuned" if args.gc_freeze else "default",
        "gang_sizes": "2-32 log-uniform",
        "gpus_per_pod": dict(zip(map(str, GPUS_PER_POD), GPUS_PER_POD_WEIGHTS, strict=True)),
        "topology": {"rack": 0.5, "block": 0.25, "block_preferring_rack": 0.25},
        "python": sys.version.split()[0],
        "scheduling_core": scheduling_core(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
