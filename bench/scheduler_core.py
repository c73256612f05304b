"""Scheduling core throughput: fill a GPU fleet with rack-constrained gangs, one cycle per PodGroup.

Default: 5,000 nodes (10 blocks x 10 racks x 50 nodes, 8 GPUs, 64 CPU, 512 Gi each), 8-pod gangs of
1 GPU / 8 CPU / 64 Gi per pod with a hard rack constraint, filled to 90 % of the GPUs. `--mix hetero`: gangs
of 4, 8 or 16 pods asking 1, 2 or 4 GPUs each with proportional CPU and memory (seeded), filled to 85 %.
Timed: each cycle (`schedule_podgroup`, which builds the decision) plus `snapshot.apply(decision)`; not
timed: the one-off snapshot build (reported as `snapshot_build_ms`) and creating the pod requests. After
the build the heap is frozen (`gc.freeze()`), as a long-running scheduler does once it has loaded its
snapshot, so that collections do not keep walking the nodes; `--no-gc-freeze` measures without it.
`--mix churn` holds the same fleet at 90-95 % while gangs finish and arrive (see `bench.scheduler_churn`).
`--mix composite`: CompositePodGroups of 2-4 child gangs (4 or 8 pods of 1 or 2 GPUs, each child in one rack)
that must all be placed together in one block, filled to 85 %; one timed cycle is `schedule_composite` for the
whole composite plus applying each child's decision. Left out: claims, preemption, children arriving late.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench import scheduler_churn
from bench.measure import percentile, scheduling_core
from libs.core.scheduling import (
    BLOCK_KEY,
    HOSTNAME_KEY,
    RACK_KEY,
    ZONE_KEY,
    ClusterSnapshot,
    Node,
    PodGroup,
    PodRequest,
    schedule_podgroup,
)
from libs.core.scheduling.composite import ChildGroup, CompositeGroup, schedule_composite

GPU_CLASS = "gpu.example.com"
GPU_RESOURCE = "nvidia.com/gpu"
GIB = 1024**3
_MAX_CONSECUTIVE_FAILURES = 200


@dataclass(frozen=True, slots=True)
class _GangSpec:
    size: int
    gpus_per_pod: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--racks-per-block", type=int, default=10)
    parser.add_argument("--nodes-per-rack", type=int, default=50)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--mix", choices=("uniform", "hetero", "churn", "composite"), default="uniform")
    parser.add_argument("--fill", type=float, default=None, help="GPU fill target (default 0.9, hetero 0.85)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false")
    scheduler_churn.add_arguments(parser)


def build_nodes(args: argparse.Namespace) -> list[Node]:
    """The fleet: every node 8 GPUs, 64 CPU, 512 Gi, labelled with zone, block, rack and hostname."""
    nodes: list[Node] = []
    gpu_names = tuple(f"gpu-{index}" for index in range(args.gpus_per_node))
    for block in range(args.blocks):
        for rack in range(args.racks_per_block):
            for slot in range(args.nodes_per_rack):
                name = f"b{block:02d}-r{rack:02d}-n{slot:02d}"
                labels = {
                    ZONE_KEY: f"zone-{block % 2}",
                    BLOCK_KEY: f"b{block:02d}",
                    RACK_KEY: f"b{block:02d}-r{rack:02d}",
                    HOSTNAME_KEY: name,
                }
                nodes.append(
                    Node(name, labels, cpu_milli=64_000, memory=512 * GIB, devices={GPU_CLASS: gpu_names})
                )
    return nodes


def _gang(index: int, spec: _GangSpec) -> tuple[PodGroup, list[PodRequest]]:
    name = f"gang-{index}"
    group = PodGroup("bench", name, uid=name, gang_min_count=spec.size, topology_key=RACK_KEY)
    devices = {GPU_CLASS: spec.gpus_per_pod}
    pods = [
        PodRequest(
            f"{name}-{pod}",
            f"{name}-{pod:02d}",
            8_000 * spec.gpus_per_pod,
            64 * GIB * spec.gpus_per_pod,
            devices,
        )
        for pod in range(spec.size)
    ]
    return group, pods


def _specs(mix: str, rng: random.Random) -> Any:
    while True:
        if mix == "hetero":
            yield _GangSpec(rng.choice((4, 8, 16)), rng.choice((1, 2, 4)))
        else:
            yield _GangSpec(8, 1)


@dataclass(slots=True)
class _Fill:
    cycle_seconds: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    placed_pods: int = 0
    used_gpus: int = 0
    unschedulable: int = 0


def _composite(index: int, rng: random.Random) -> tuple[CompositeGroup, list[ChildGroup], int]:
    """A composite of 2-4 rack-constrained child gangs in one block, and the GPUs it asks for."""
    children, gpus = [], 0
    for child in range(rng.choice((2, 3, 4))):
        spec = _GangSpec(rng.choice((4, 8)), rng.choice((1, 2)))
        group, pods = _gang(index * 10 + child, spec)
        children.append(ChildGroup(group, pods))
        gpus += spec.size * spec.gpus_per_pod
    return CompositeGroup("bench", f"job-{index}", len(children), BLOCK_KEY), children, gpus


def _fill_composites(snapshot: ClusterSnapshot, args: argparse.Namespace, target_gpus: float) -> _Fill:
    """Schedule composites one cycle each, applying every placed child, until the GPU target is reached."""
    result = _Fill()
    rng = random.Random(args.seed)
    failures_in_row = index = 0
    while result.used_gpus < target_gpus and failures_in_row < _MAX_CONSECUTIVE_FAILURES:
        composite, children, gpus = _composite(index, rng)
        index += 1
        cpu_begin, begin = time.process_time(), time.perf_counter()
        decided = schedule_composite(
            snapshot, composite, children, needed=composite.min_group_count or 0, now=float(index)
        )
        for decision in decided.decisions:
            if decision.placed:
                snapshot.apply(decision)
        end, cpu_end = time.perf_counter(), time.process_time()
        result.cycle_seconds.append(end - begin)
        result.cpu_seconds += cpu_end - cpu_begin
        if decided.placed_groups:
            result.placed_pods += sum(len(decision.placements) for decision in decided.decisions)
            result.used_gpus += gpus
            failures_in_row = 0
        else:
            result.unschedulable += 1
            failures_in_row += 1
    return result


def _fill(snapshot: ClusterSnapshot, args: argparse.Namespace, target_gpus: float) -> _Fill:
    """Schedule gangs one cycle each, applying every placed decision, until the GPU target is reached."""
    if args.mix == "composite":
        return _fill_composites(snapshot, args, target_gpus)
    result = _Fill()
    specs = _specs(args.mix, random.Random(args.seed))
    failures_in_row = index = 0
    while result.used_gpus < target_gpus and failures_in_row < _MAX_CONSECUTIVE_FAILURES:
        spec = next(specs)
        group, pods = _gang(index, spec)
        index += 1
        cpu_begin, begin = time.process_time(), time.perf_counter()
        decision = schedule_podgroup(snapshot, group, pods, now=float(index))
        if decision.placed:
            snapshot.apply(decision)
        end, cpu_end = time.perf_counter(), time.process_time()
        result.cycle_seconds.append(end - begin)
        result.cpu_seconds += cpu_end - cpu_begin
        if decision.placed:
            result.placed_pods += len(decision.placements)
            result.used_gpus += len(decision.placements) * spec.gpus_per_pod
            failures_in_row = 0
        else:
            result.unschedulable += 1
            failures_in_row += 1
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the fleet, fill it gang by gang (or churn it), and report throughput and cycle latency.

    `pods_per_second` (or `hetero_pods_per_second`) is wall-clock; `cpu_pods_per_second` divides by the
    process CPU time spent in the same cycles, which a busy machine disturbs less.
    """
    nodes = build_nodes(args)
    started = time.perf_counter()
    snapshot = ClusterSnapshot(nodes, extended_resource_names={GPU_CLASS: GPU_RESOURCE})
    build_ms = (time.perf_counter() - started) * 1000
    total_gpus = len(nodes) * args.gpus_per_node
    params: dict[str, Any] = {
        "nodes": len(nodes),
        "blocks": args.blocks,
        "racks_per_block": args.racks_per_block,
        "nodes_per_rack": args.nodes_per_rack,
        "gpus_per_node": args.gpus_per_node,
        "mix": args.mix,
        "seed": args.seed,
        "gc_freeze": args.gc_freeze,
    }
    if args.mix == "churn":
        metrics = scheduler_churn.run_churn(args, snapshot, total_gpus)
        metrics["snapshot_build_ms"] = round(build_ms, 2)
        params |= scheduler_churn.churn_params(args)
        params["cpus"] = os.cpu_count()
        return {"name": "scheduler-core", "params": params, "metrics": metrics}
    if args.gc_freeze:
        gc.freeze()
    fill = args.fill if args.fill is not None else (0.9 if args.mix == "uniform" else 0.85)
    result = _fill(snapshot, args, fill * total_gpus)
    elapsed = sum(result.cycle_seconds)
    ordered = sorted(result.cycle_seconds)
    rate_key = f"{args.mix}_pods_per_second" if args.mix in ("hetero", "composite") else "pods_per_second"
    metrics = {
        rate_key: round(result.placed_pods / elapsed if elapsed else 0.0, 1),
        "cpu_pods_per_second": round(
            result.placed_pods / result.cpu_seconds if result.cpu_seconds else 0.0, 1
        ),
        "cycle_ms_p50": round(percentile(ordered, 0.50) * 1000, 4),
        "cycle_ms_p99": round(percentile(ordered, 0.99) * 1000, 4),
        "cycle_ms_max": round(ordered[-1] * 1000 if ordered else 0.0, 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "snapshot_build_ms": round(build_ms, 2),
        "cycles": len(ordered),
        "placed_pods": result.placed_pods,
        "unschedulable_cycles": result.unschedulable,
        "gpu_fill_ratio": round(result.used_gpus / total_gpus, 4),
    }
    params |= {
        "fill_target": fill,
        "topology_key": RACK_KEY,
        "python": sys.version.split()[0],
        "scheduling_core": scheduling_core(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }
    return {"name": "scheduler-core", "params": params, "metrics": metrics}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler_core", description=__doc__)
    add_arguments(parser)
    parser.add_argument("-o", "--output", choices=("json",), default="json")
    print(json.dumps(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
