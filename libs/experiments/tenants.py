"""`podway simulate --tenants`: a timed trace replayed with its jobs split over teams that share the fleet by
quota (fair sharing on), beside the same jobs replayed without quotas."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from libs.core.placement import NodeSpec
from libs.core.simulation.fairness import (
    GangUse,
    PodUse,
    TeamSeries,
    dominant_shares,
    fairness_when_saturated,
    reclaim_waits,
    team_series,
    unallocated_when_saturated,
)
from libs.core.simulation.replay import (
    Arrival,
    GangMix,
    ReplayJob,
    ReplayResult,
    cluster_manifests,
    job_arrival,
    multiplied,
    replay_arrivals,
    stored,
    synthesise_jobs,
)
from libs.core.simulation.tenants import (
    DEFAULT_TEAMS,
    FleetCapacity,
    Team,
    nominal_quotas,
    quota_manifests,
    team_of,
)

from .experiments import Progress
from .replay import DEFAULT_SPEEDUP, timed_pods
from .traces import Trace

FAIRNESS_GOAL = 0.95
DEFAULT_LOAD = 2.0
"""The openb trace asks for 1.2 times the fleet's GPUs in all: replayed once, the fleet is saturated only
while nearly every pod is present (seconds). Twice over, every team asks for more than its weighted share for
most of the run, which is when fair sharing decides anything."""
UNALLOCATED_TOLERANCE = 0.02
"""The tenants' mean unallocated GPUs may exceed the replay without tenants' by at most 2 %."""


def fleet_capacity(nodes: Sequence[NodeSpec]) -> FleetCapacity:
    return FleetCapacity(
        sum(node.cpu_milli for node in nodes),
        sum(node.memory_mib for node in nodes),
        sum(node.gpus for node in nodes),
    )


@dataclass(frozen=True, slots=True)
class TenantJobs:
    """One seed's jobs as the replay submits them, each in its team's namespace, GPU jobs as gangs (of one
    too, so that they are quota-managed), and what their pods use."""

    arrivals: list[Arrival]
    pods: dict[str, PodUse]
    gangs: dict[str, tuple[Team, ReplayJob, tuple[str, ...]]]
    """PodGroup key -> its team, job and pod uids."""


def tenant_jobs(jobs: Sequence[ReplayJob], teams: Sequence[Team], seed: int) -> TenantJobs:
    arrivals: list[Arrival] = []
    pods: dict[str, PodUse] = {}
    gangs: dict[str, tuple[Team, ReplayJob, tuple[str, ...]]] = {}
    for job in jobs:
        team = team_of(job.name, teams, seed)
        gpu_job = any(pod.gpus for pod in job.pods)
        arrival = job_arrival(job, team.name, as_gang=gpu_job)
        arrivals.append(arrival)
        if not gpu_job:
            continue
        uids = tuple(obj.uid for obj in arrival.objects if obj.kind == "Pod")
        for uid, demand in zip(uids, job.pods, strict=True):
            pods[uid] = PodUse(team.name, demand.gpus, demand.cpu_milli, demand.memory_mib)
        gangs[f"{team.name}/{job.name}"] = (team, job, uids)
    return TenantJobs(arrivals, pods, gangs)


def tenant_metrics(
    trace: Trace,
    seeds: Sequence[int],
    *,
    speedup: float | None = None,
    load: float = DEFAULT_LOAD,
    teams: Sequence[Team] = DEFAULT_TEAMS,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every seed replayed with tenants and without, its jobs `load` times over; the figures per seed, and the
    first seed's shares over time for the plot."""
    speedup = speedup or DEFAULT_SPEEDUP
    capacity = fleet_capacity(trace.nodes)
    cluster = [stored(manifest) for manifest in cluster_manifests(trace.nodes)]
    quota_objects = [stored(manifest) for manifest in quota_manifests(capacity, teams)]
    nominal = {name: quota["nvidia.com/gpu"] for name, quota in nominal_quotas(capacity, teams).items()}
    pods = timed_pods(trace)
    per_seed: dict[str, Any] = {}
    shares_plot: dict[str, Any] = {}
    for seed in seeds:
        synthesised = synthesise_jobs(pods, seed=seed, speedup=speedup, mix=GangMix())
        jobs = tenant_jobs(multiplied(synthesised, load), teams, seed)
        started = time.perf_counter()
        tenants = replay_arrivals([*cluster, *quota_objects], jobs.arrivals, fair_sharing=True)
        tenants_s = time.perf_counter() - started
        started = time.perf_counter()
        baseline = replay_arrivals(cluster, jobs.arrivals)
        baseline_s = time.perf_counter() - started
        figures, series = _seed_figures(tenants, baseline, jobs, capacity, nominal, teams)
        figures["seconds"] = {"tenants": round(tenants_s, 2), "without_tenants": round(baseline_s, 2)}
        per_seed[str(seed)] = figures
        if not shares_plot:
            shares_plot = _shares_over_time(series, capacity, until=tenants.last_arrival or tenants.end)
        if progress is not None:
            progress(
                f"tenants seed {seed}: Jain {_shown(figures['jain_saturated'])} over "
                f"{figures['contended_s']:.0f} s contended, reclaim p50 {figures['reclaim_s']['p50']} s "
                f"p99 {figures['reclaim_s']['p99']} s, unallocated GPUs while saturated "
                f"{figures['unallocated_gpus_saturated']} "
                f"(without tenants {figures['unallocated_gpus_saturated_without_tenants']}) "
                f"({tenants_s:.1f} s + {baseline_s:.1f} s)"
            )
    return {
        "protocol": "replay",
        "tenants": [
            {"name": team.name, "weight": team.weight, "nominal_gpus": nominal[team.name]} for team in teams
        ],
        "trace": trace.name,
        "seeds": list(seeds),
        "speedup": speedup,
        "load": load,
        "cluster": {"nodes": len(trace.nodes), "gpus": capacity.gpus},
        "fairness_goal": FAIRNESS_GOAL,
        "summary": _summary(per_seed),
        "per_seed": per_seed,
        "shares_over_time": shares_plot,
    }


def _seed_figures(
    tenants: ReplayResult,
    baseline: ReplayResult,
    jobs: TenantJobs,
    capacity: FleetCapacity,
    nominal: dict[str, int],
    teams: Sequence[Team],
) -> tuple[dict[str, Any], TeamSeries]:
    series = team_series(teams, jobs.pods, tenants.arrived, tenants.binds, tenants.ends)
    until = tenants.last_arrival or tenants.end
    fairness = fairness_when_saturated(series, capacity, until=until)
    bound_at = dict((uid, t) for t, uid in tenants.binds)
    gangs = [
        GangUse(
            team.name,
            job.arrival,
            sum(pod.gpus for pod in job.pods),
            max(bound_at[uid] for uid in uids) if all(uid in bound_at for uid in uids) else None,
        )
        for team, job, uids in jobs.gangs.values()
    ]
    waits, never = reclaim_waits(series, gangs, nominal)
    unallocated = unallocated_when_saturated(series, capacity, until=until)
    baseline_series = team_series(teams, jobs.pods, baseline.arrived, baseline.binds, baseline.ends)
    without = unallocated_when_saturated(
        baseline_series, capacity, until=baseline.last_arrival or baseline.end
    )
    figures = {
        "jain_saturated": None if fairness.jain is None else round(fairness.jain, 4),
        "saturated_s": round(fairness.saturated_s, 1),
        "contended_s": round(fairness.contended_s, 1),
        "reclaim_s": _percentiles(waits),
        "reclaiming_gangs": len(waits) + never,
        "reclaiming_gangs_never_placed": never,
        "unallocated_gpus_saturated": _rounded(unallocated),
        "unallocated_gpus_saturated_without_tenants": _rounded(without),
        "unallocated_within_tolerance": _within_tolerance(unallocated, without),
        "gpu_alloc_pct_mean": round(tenants.mean_allocation_pct(until), 2),
        "gpu_alloc_pct_mean_without_tenants": round(baseline.mean_allocation_pct(until), 2),
        "pods_never_placed": tenants.never_placed,
        "pods_never_placed_without_tenants": baseline.never_placed,
        "preemption_requests": tenants.preemption_requests,
        "gangs_preempted": tenants.gangs_preempted,
        "pods_preempted": tenants.pods_preempted,
    }
    return figures, series


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _within_tolerance(unallocated: float | None, without: float | None) -> bool:
    """Whether the tenants left at most 2 % more GPUs unallocated while saturated than the replay without
    tenants (a replay never saturated leaves none to compare)."""
    if unallocated is None or without is None:
        return True
    return unallocated <= without * (1 + UNALLOCATED_TOLERANCE)


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    array = np.array(values)
    return {
        "p50": round(float(np.percentile(array, 50)), 2),
        "p99": round(float(np.percentile(array, 99)), 2),
        "max": round(float(array.max()), 2),
    }


def _summary(per_seed: dict[str, Any]) -> dict[str, Any]:
    seeds = list(per_seed.values())

    def mean(key: str) -> float | None:
        values = [figures[key] for figures in seeds if figures[key] is not None]
        return round(float(np.mean(values)), 4) if values else None

    return {
        "jain_saturated_mean": mean("jain_saturated"),
        "jain_saturated_min": min(
            (figures["jain_saturated"] for figures in seeds if figures["jain_saturated"] is not None),
            default=None,
        ),
        "contended_s_mean": mean("contended_s"),
        "unallocated_gpus_saturated_mean": mean("unallocated_gpus_saturated"),
        "unallocated_gpus_saturated_without_tenants_mean": mean("unallocated_gpus_saturated_without_tenants"),
        "unallocated_within_tolerance": all(figures["unallocated_within_tolerance"] for figures in seeds),
        "reclaim_s_p50_max": max((figures["reclaim_s"]["p50"] or 0) for figures in seeds),
        "reclaim_s_p99_max": max((figures["reclaim_s"]["p99"] or 0) for figures in seeds),
        "reclaim_s_max": max((figures["reclaim_s"]["max"] or 0) for figures in seeds),
    }


def summary_lines(metrics: dict[str, Any]) -> list[str]:
    """The figures per seed as a text table."""
    lines = [
        f"{'seed':<6} {'Jain (saturated)':>16} {'contended s':>12} {'reclaim p50/p99/max s':>22} "
        f"{'unallocated GPUs (without tenants)':>35}"
    ]
    for seed, figures in metrics["per_seed"].items():
        reclaim = figures["reclaim_s"]
        waits = "/".join(
            "-" if reclaim[key] is None else f"{reclaim[key]:g}" for key in ("p50", "p99", "max")
        )
        unallocated = figures["unallocated_gpus_saturated"]
        without = figures["unallocated_gpus_saturated_without_tenants"]
        lines.append(
            f"{seed:<6} {_shown(figures['jain_saturated']):>16} {figures['contended_s']:>12.0f} {waits:>22} "
            f"{str(unallocated) + ' (' + str(without) + ')':>35}"
        )
    return lines


def _shares_over_time(
    series: TeamSeries, capacity: FleetCapacity, *, until: float, points: int = 400
) -> dict[str, Any]:
    """Each team's dominant share at evenly spaced virtual times until `until` (first seed)."""
    shares = dominant_shares(series, capacity)
    grid = np.linspace(0, until, points)
    at = np.searchsorted(series.times, grid, side="right") - 1
    values = np.where(at[:, None] >= 0, shares[np.maximum(at, 0)], 0.0)
    return {
        "time_s": [round(float(t), 1) for t in grid],
        "shares": {
            team.name: [round(float(v), 4) for v in values[:, i]] for i, team in enumerate(series.teams)
        },
        "weights": {team.name: team.weight for team in series.teams},
    }
