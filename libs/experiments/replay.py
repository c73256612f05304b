"""Dynamic replay of a timed trace (`--protocol replay`): metrics over seeds of the gang synthesis."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from libs.core.scheduling.objects import ApiObject
from libs.core.simulation.replay import (
    Arrival,
    GangMix,
    ReplayResult,
    TimedPod,
    cluster_manifests,
    delay_percentiles,
    replay,
    replay_arrivals,
    stored,
    synthesise_jobs,
)

from .experiments import Progress
from .traces import Trace

REPLAY_POLICIES = ("podway",)
"""The replay runs the scheduler state machine itself, whose policy is Podway's."""
DEFAULT_SPEEDUP = 4000.0
"""Arrivals come 4,000x faster than in the trace: GPU demand then peaks near the fleet's capacity."""


def timed_pods(trace: Trace) -> list[TimedPod]:
    """Pods with their arrival and run time: from creation to deletion (a pod the trace never scheduled
    runs as long as it waited there)."""
    pods = []
    for pod in trace.pods:
        if pod.creation_time is None:
            continue
        end = pod.deletion_time if pod.deletion_time is not None else pod.creation_time
        pods.append(TimedPod(pod.demand, pod.creation_time, max(end - pod.creation_time, 1.0), pod.qos))
    return pods


def replay_metrics(
    trace: Trace,
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    speedup: float | None = None,
    mix: GangMix | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    unsupported = [name for name in policies if name not in REPLAY_POLICIES]
    if unsupported:
        progress and progress(
            f"replay runs the scheduler state machine, whose policy is podway; skipping {', '.join(unsupported)}"
        )
    speedup = speedup or DEFAULT_SPEEDUP
    pods = timed_pods(trace)
    mix = mix or GangMix()
    cluster = [stored(manifest) for manifest in cluster_manifests(trace.nodes)]
    results: list[ReplayResult] = []
    seconds = []
    for seed in seeds:
        started = time.perf_counter()
        jobs = synthesise_jobs(pods, seed=seed, speedup=speedup, mix=mix)
        result = replay(cluster, jobs)
        seconds.append(time.perf_counter() - started)
        results.append(result)
        if progress is not None:
            p50, p99 = delay_percentiles(result.delays)
            progress(
                f"podway seed {seed}: {result.pods} pods in {result.gangs} jobs, delay p50 {p50:.1f} s "
                f"p99 {p99:.1f} s, {result.never_placed} never placed ({seconds[-1]:.1f} s)"
            )
    return {
        "protocol": "replay",
        "trace": trace.name,
        "seeds": list(seeds),
        "speedup": speedup,
        "gang_mix": {"widths": list(mix.widths), "weights": list(mix.weights)},
        "cluster": {"nodes": len(trace.nodes), "gpus": results[0].total_gpus if results else 0},
        "policies": {"podway": replay_figures(results, seconds)},
    }


def manifest_replay_metrics(
    name: str, cluster: Sequence[ApiObject], arrivals: Sequence[Arrival], *, progress: Progress | None = None
) -> dict[str, Any]:
    """Podway manifests replayed once (no seed: nothing is synthesised)."""
    started = time.perf_counter()
    result = replay_arrivals(cluster, arrivals)
    seconds = time.perf_counter() - started
    if progress is not None:
        progress(f"podway: {result.pods} pods, {result.never_placed} never placed ({seconds:.1f} s)")
    return {
        "protocol": "replay",
        "trace": name,
        "seeds": [],
        "cluster": {"nodes": sum(1 for obj in cluster if obj.kind == "Node"), "gpus": result.total_gpus},
        "policies": {"podway": replay_figures([result], [seconds])},
    }


def replay_figures(results: Sequence[ReplayResult], seconds: Sequence[float]) -> dict[str, Any]:
    """Queueing delay over every run's pods, the rest averaged over the runs."""
    delays = np.concatenate([np.array(result.delays) for result in results]) if results else np.zeros(0)
    p50, p99 = delay_percentiles(delays.tolist())
    quantiles = np.linspace(0, 1, 101)
    peaks = [max(v for _, v in r.allocation) * 100 / max(r.total_gpus, 1) for r in results]
    return {
        "queueing_delay_s_p50": round(p50, 3),
        "queueing_delay_s_p99": round(p99, 3),
        "gpu_alloc_pct_mean": round(
            float(np.mean([r.mean_allocation_pct(r.last_arrival or None) for r in results])), 2
        ),
        "gpu_alloc_pct_peak": round(float(np.mean(peaks)), 2),
        "gangs_preempted": int(np.mean([r.gangs_preempted for r in results])),
        "pods_preempted": int(np.mean([r.pods_preempted for r in results])),
        "preemption_requests": int(np.mean([r.preemption_requests for r in results])),
        "pods_never_placed": int(np.mean([r.never_placed for r in results])),
        "pods": int(np.mean([r.pods for r in results])),
        "jobs": int(np.mean([r.gangs for r in results])),
        "cycles": int(np.mean([r.cycles for r in results])),
        "seconds_per_experiment": round(float(np.mean(seconds)), 2),
        "allocation_over_time": _sampled(results[0]) if results else [],
        "delay_cdf": {
            "delay_s": [round(float(v), 3) for v in np.quantile(delays, quantiles)] if len(delays) else [],
            "fraction": [round(float(q), 2) for q in quantiles],
        },
    }


def _sampled(result: ReplayResult, points: int = 200) -> list[list[float]]:
    """GPU allocation (%) at evenly spaced virtual times of the first run, until its last arrival (a trace's
    long-running pods then finish over months, the fleet nearly idle), or its end when all arrive at once."""
    times = np.array([t for t, _ in result.allocation])
    values = np.array([v for _, v in result.allocation], dtype=np.float64)
    grid = np.linspace(0, result.last_arrival or result.end, points)
    at = values[np.maximum(np.searchsorted(times, grid, side="right") - 1, 0)]
    return [
        [round(float(t), 1), round(float(v) * 100 / max(result.total_gpus, 1), 2)]
        for t, v in zip(grid, at, strict=True)
    ]
