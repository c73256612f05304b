"""`podway bench quota`: quota reservation at Kueue's large scale, in the pure core and through the services.

The anchor is Kueue's large-scale scheduler performance test (`test/performance/scheduler/configs/
large-scale`): 1,000 ClusterQueues in 10 cohorts, 50,000 workloads of three sizes arriving over a few seconds,
each running a few hundred milliseconds once admitted; its CI's mean wall time is 1,179 s (19 runs; threshold
1,416 s). See `bench.quota_config` for the world, both mixes (`gpu`, the default: gangs on two GPU flavors in
a cohort hierarchy with lending and borrowing limits; `kueue`: Kueue's configuration as it is).

1. Core (`--phase core`): the quota core (`libs.core.quota`: `admit`, `preemption_targets`) on one
   `QuotaSnapshot` that the loop keeps, on a virtual clock that runs arrivals, completions and requeues (it
   never sleeps; cycles take no virtual time). Each ClusterQueue queues its workloads BestEffortFIFO (priority,
   then creation or eviction time). An admission cycle takes one head from every queue that has one (as
   Kueue's scheduler does), in that order, and decides each on the quota the heads before it left: Fit
   reserves it (it finishes `runtime` later and releases it); Preempt asks `preemption_targets` and, when it
   names targets, evicts them (they end at once and are queued again) and decides the gang again, which then
   fits; NoFit, or Preempt without targets, parks the workload with every workload of its queue the core
   cannot tell apart from it (same shape, pinned flavor and priority: Kueue's scheduling equivalence hash,
   on by default since 0.18) until its cohort tree releases quota; such requeues are batched per tree, one
   per `--requeue-batch-ms` (1 s, Kueue's inadmissible-workload requeuer's period). A workload that does not
   fit a snapshot with nothing admitted never will: it is rejected. Measured (wall time, `perf_counter`):
   the whole loop until every workload was admitted or rejected and has finished (`wall_s`, target <= 60 s;
   Kueue's CI mean beside it), each cycle (`cycle_ms_*`, target p99 <= 5 ms), each `admit` and each
   preemption search; counted: workloads per second, cycles and their heads, preemptions, evictions,
   requeues, and, in virtual time, the makespan, each class's time to admission (Kueue reports its own
   mean per class) and the mean usage of the nominal quota. The benchmark keeps its own ledger of what it
   admitted and checks after every admission that no queue holds more than its nominal quota plus its
   borrowing limit and no cohort tree more than its nodes' nominal quota (`over_quota_cycles`, must be 0;
   its time is left out of the figures).
   Each stream of a queue starts at a seeded phase within its interval: Kueue's generator starts them all
   at once and they drift apart in real time; `--aligned` keeps them together (every 60 ms a cycle of 1,000
   heads). Left out: Kueue's nomination of all heads before admitting any and its ordering of non-borrowing
   heads first (here heads go by priority and age, each decided once); a preemptor waiting for its victims
   to end (they end at once); fair sharing and admission fair sharing; StrictFIFO; backoff; admission
   checks; the API server and the objects' status (Kueue's figure includes its API server, its controllers
   and the runner that plays the workloads).
2. Services (`--phase e2e`): admission, a simulated node agent, the scheduler and the preemptor, each its
   own process, on an embedded nats-server and SQLite (`--database postgres`: a fresh database beside
   PODWAY_BENCH_DATABASE_URL's). The same world's PriorityClasses, Cohorts, ClusterQueues and LocalQueues
   are applied, but not its ResourceFlavors, so every ClusterQueue is inactive; `--e2e-nodes` nodes labelled
   with the flavors' node labels (shared as the nominal quota is) register. `--e2e-gangs` gangs of the
   world's classes (its first workloads that their queue could ever admit), each a PodGroup naming its
   LocalQueue by `kueue.x-k8s.io/queue-name` with its pods, are applied and wait, each told it waits for
   quota. Then the flavors are applied: every queue becomes active at once, and every gang reserves quota
   in its queue (flavor assignment, borrowing) and is placed on its flavor's nodes and bound.
   `e2e_gangs_per_second` (target >= 300) runs from the flavors' apply to the last gang's `pods.bound`;
   the CPU each process spent per gang and how busy the host was meanwhile are beside it. Then gangs are
   applied at `--e2e-rate` for `--e2e-seconds`, each pod running `--e2e-run-seconds`:
   `e2e_admitted_to_bound_ms_*` runs from a gang's `podgroup.admitted` (admission's commit) to its
   `pods.bound` arriving on the bus.
   Left out: a standby scheduler and takeover (scheduler-e2e measures them), real processes (the node
   agent simulates the pods), quota status written to the ClusterQueues (not computed, docs/quotas.md),
   preemption for quota (the quota and the fleet hold every gang applied), composite gangs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from bench.admission import DEFAULT_PG
from bench.quota_config import (
    KUEUE_CI_MAX_WALL_S,
    KUEUE_CI_MEAN_TIME_TO_ADMISSION_MS,
    KUEUE_CI_MEAN_WALL_S,
    build_world,
)
from bench.quota_core import run_core
from libs.runtime.memory import tune_collector

TARGETS: dict[str, float] = {"wall_s": 60.0, "cycle_ms_p99": 5.0, "e2e_gangs_per_second": 300.0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", choices=("core", "e2e", "all"), default="all")
    parser.add_argument("--mix", choices=("gpu", "kueue"), default="gpu")
    parser.add_argument("--cohorts", type=int, default=10, help="root cohorts")
    parser.add_argument("--teams", type=int, default=5, help="team cohorts per root cohort (kueue mix: none)")
    parser.add_argument("--queues-per-team", type=int, default=20, help="ClusterQueues per team cohort")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--aligned",
        action="store_true",
        help="every queue's streams start together, as Kueue's generator schedules them (no drift)",
    )
    parser.add_argument("--requeue-batch-ms", type=float, default=1000.0)
    parser.add_argument(
        "--e2e-cohorts",
        type=int,
        default=None,
        help="root cohorts of the e2e phase's world (default --cohorts)",
    )
    parser.add_argument("--e2e-nodes", type=int, default=500, help="e2e: simulated nodes")
    parser.add_argument("--e2e-gangs", type=int, default=500, help="e2e: gangs released together")
    parser.add_argument("--e2e-rate", type=int, default=150, help="e2e: gangs/s applied after the backlog")
    parser.add_argument(
        "--e2e-seconds", type=int, default=5, help="e2e: how long gangs are applied at the rate"
    )
    parser.add_argument("--e2e-run-seconds", type=float, default=1.0, help="e2e: how long each pod runs")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", default=os.environ.get("PODWAY_BENCH_DATABASE_URL", DEFAULT_PG))


def run(args: argparse.Namespace) -> dict[str, Any]:
    tune_collector()
    world = build_world(args.mix, args.cohorts, args.teams, args.queues_per_team)
    load_before = os.getloadavg()[0]
    metrics: dict[str, Any] = {}
    if args.phase in ("core", "all"):
        metrics |= run_core(
            world, seed=args.seed, aligned=args.aligned, requeue_batch_ms=args.requeue_batch_ms
        )
        metrics["kueue_ci_mean_wall_s"] = KUEUE_CI_MEAN_WALL_S
        metrics["wall_target_met"] = (
            metrics["wall_s"] <= TARGETS["wall_s"] and metrics["all_admitted_or_rejected"]
        )
        metrics["cycle_target_met"] = metrics["cycle_ms_p99"] <= TARGETS["cycle_ms_p99"]
    e2e_params: dict[str, Any] = {}
    if args.phase in ("e2e", "all"):
        from bench.quota_services import run_services

        e2e_cohorts = args.cohorts if args.e2e_cohorts is None else args.e2e_cohorts
        e2e_world = build_world(args.mix, e2e_cohorts, args.teams, args.queues_per_team)
        metrics |= run_services(args, e2e_world)
        metrics["e2e_target_met"] = metrics["e2e_gangs_per_second"] >= TARGETS["e2e_gangs_per_second"]
        e2e_params = {
            "cluster_queues": len(e2e_world.queues),
            "cohorts": e2e_world.count("Cohort"),
            "nodes": args.e2e_nodes,
            "backlog_gangs": args.e2e_gangs,
            "rate_gangs_per_second": args.e2e_rate,
            "seconds": args.e2e_seconds,
            "pod_run_seconds": args.e2e_run_seconds,
            "database": args.database,
            "services": ["admission", "node_agent", "scheduler", "preemptor"],
        }
    params = {
        "phase": args.phase,
        "mix": world.mix,
        "cluster_queues": len(world.queues),
        "cohorts": world.count("Cohort"),
        "root_cohorts": args.cohorts,
        "flavors": world.count("ResourceFlavor"),
        "workloads": world.workloads,
        "classes": {
            c.name: {
                "per_queue": c.count,
                "interval_ms": c.interval_ms,
                "runtime_ms": c.runtime_ms,
                "priority": c.priority,
                "pods": c.pods,
                "per_pod": dict(c.per_pod),
                "pin": c.pin or None,
            }
            for c in world.classes
        },
        "seed": args.seed,
        "aligned": args.aligned,
        "requeue_batch_ms": args.requeue_batch_ms,
        "targets": TARGETS,
        "kueue_ci": {
            "mean_wall_s": KUEUE_CI_MEAN_WALL_S,
            "max_wall_s": KUEUE_CI_MAX_WALL_S,
            "mean_time_to_admission_ms": KUEUE_CI_MEAN_TIME_TO_ADMISSION_MS,
        },
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
        "host_load_avg_1m_after": round(os.getloadavg()[0], 2),
    }
    if e2e_params:
        params["e2e"] = e2e_params
    return {"name": "quota", "params": params, "metrics": metrics}


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.quota [options]`, the same as `podway bench quota`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["quota", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
