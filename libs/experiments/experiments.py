"""`podway simulate`: run a protocol over policies and seeds, and write `metrics.json` and the plots."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from libs.core.placement import POLICY_NAMES, GpuFleet, make_policy
from libs.core.simulation.inflation import INFLATION_RATIO, InflationRun, run_inflation

from .traces import Trace

Progress = Callable[[str], None]


def policies_named(names: str) -> list[str]:
    """`all` or a comma-separated list of policy names, checked."""
    if names == "all":
        return list(POLICY_NAMES)
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in POLICY_NAMES]
    if unknown or not chosen:
        raise ValueError(
            f"--policy: Unsupported value: {', '.join(unknown) or repr(names)}: "
            f"supported values: all, {', '.join(POLICY_NAMES)}"
        )
    return chosen


def inflation_metrics(
    trace: Trace,
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    ratio: float = INFLATION_RATIO,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], dict[str, list[InflationRun]]]:
    """Every policy over every seed on the trace; the metrics (means over seeds) and the runs."""
    fleet = GpuFleet(trace.nodes)
    workload = trace.workload
    runs: dict[str, list[InflationRun]] = {}
    metrics: dict[str, Any] = {
        "protocol": "inflation",
        "trace": trace.name,
        "seeds": list(seeds),
        "ratio": ratio,
        "cluster": {"nodes": len(fleet), "gpus": fleet.total_gpus},
        "workload_pods": len(workload),
        "policies": {},
    }
    top = round(ratio * 100)
    for name in policies:
        runs[name] = []
        seconds = []
        for seed in seeds:
            started = time.perf_counter()
            run = run_inflation(fleet, workload, make_policy(name, seed=seed, workload=workload), seed=seed)
            seconds.append(time.perf_counter() - started)
            runs[name].append(run)
            if progress is not None:
                progress(
                    f"{name} seed {seed}: {run.final_gpu_alloc_pct:.2f}% of GPUs allocated, "
                    f"{run.unallocated_gpus:.0f} unallocated ({seconds[-1]:.1f} s)"
                )
        curve = np.mean([run.gpu_alloc_pct for run in runs[name]], axis=0)
        metrics["policies"][name] = {
            "gpu_alloc_pct_at_100": round(float(np.mean([run.alloc_at(100) for run in runs[name]])), 2),
            f"gpu_alloc_pct_at_{top}": round(
                float(np.mean([run.final_gpu_alloc_pct for run in runs[name]])), 2
            ),
            f"unallocated_gpus_at_{top}": round(
                float(np.mean([run.unallocated_gpus for run in runs[name]])), 1
            ),
            "pods_per_run": round(float(np.mean([run.pods for run in runs[name]])), 1),
            "pods_placed_per_run": round(float(np.mean([run.placed for run in runs[name]])), 1),
            "seconds_per_experiment": round(float(np.mean(seconds)), 2),
            "per_seed": {
                str(run.seed): {
                    f"gpu_alloc_pct_at_{top}": round(run.final_gpu_alloc_pct, 2),
                    f"unallocated_gpus_at_{top}": round(run.unallocated_gpus, 1),
                }
                for run in runs[name]
            },
            "curve": {
                "arrived_pct": list(runs[name][0].steps),
                "gpu_alloc_pct": [round(v, 3) for v in curve],
            },
        }
    return metrics, runs


def write_metrics(metrics: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "metrics.json"
    path.write_text(json.dumps(metrics, indent=2) + "\n")
    return path


def summary_table(metrics: dict[str, Any]) -> str:
    """The metrics as a text table, one line per policy."""
    lines = []
    if metrics["protocol"] == "inflation":
        top = round(metrics["ratio"] * 100)
        width = max([10, *map(len, metrics["policies"])])
        lines.append(
            f"{'policy':<{width}} {'alloc@100%':>10} {f'alloc@{top}%':>10} {'unallocated GPUs':>17} {'s/run':>6}"
        )
        for name, figures in metrics["policies"].items():
            lines.append(
                f"{name:<{width}} {figures['gpu_alloc_pct_at_100']:>9.2f}% {figures[f'gpu_alloc_pct_at_{top}']:>9.2f}% "
                f"{figures[f'unallocated_gpus_at_{top}']:>17.1f} {figures['seconds_per_experiment']:>6.2f}"
            )
    else:
        lines.append(
            f"{'policy':<10} {'delay p50 s':>12} {'delay p99 s':>12} {'GPU alloc %':>12} "
            f"{'gangs preempted':>16} {'never placed':>13}"
        )
        for name, figures in metrics["policies"].items():
            lines.append(
                f"{name:<10} {figures['queueing_delay_s_p50']:>12.1f} {figures['queueing_delay_s_p99']:>12.1f} "
                f"{figures['gpu_alloc_pct_mean']:>12.2f} {figures['gangs_preempted']:>16} "
                f"{figures['pods_never_placed']:>13}"
            )
    return "\n".join(lines)
