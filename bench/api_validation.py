"""Admission check of single manifests, in process: `libs.api.manifests.validate_document` (conversion,
decoding, unknown-field warnings, defaulting, priority resolution, validation) on gangs of one PodGroup with
a gang policy and its pods (one container asking cpu, memory and nvidia.com/gpu, with a schedulingGroup),
the shape `bench.admission` sends through the whole stack. PriorityClasses are given, as the admission
service gives them. No I/O: this is the CPU cost per object that the admission service pays before storing.

    python -m bench.api_validation -o json
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from typing import Any

from bench.admission import gang_manifests
from bench.measure import percentile
from libs.api.manifests import validate_document
from libs.api.models.meta import ObjectMeta
from libs.api.models.scheduling import PriorityClass

PRIORITY_CLASSES = {
    "batch-high": PriorityClass(metadata=ObjectMeta(name="batch-high"), value=10_000),
    "batch-low": PriorityClass(metadata=ObjectMeta(name="batch-low"), value=100),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument("--podgroups", type=int, default=400, help="gangs validated in the timed passes")
    parser.add_argument("--pods-per-group", type=int, default=8)
    parser.add_argument("--passes", type=int, default=3, help="timed passes over all gangs")
    parser.add_argument("--warmup", type=int, default=50, help="gangs validated before timing")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Validate every gang `passes` times, timing each object; return `{"name", "params", "metrics"}`."""
    gangs = [gang_manifests(index, args.pods_per_group) for index in range(args.podgroups)]
    for gang in gangs[: args.warmup]:
        for doc in gang:
            result = validate_document(doc, priority_classes=PRIORITY_CLASSES)
            if not result.ok:
                raise RuntimeError(f"benchmark manifest rejected: {result.message}")
    pod_us: list[float] = []
    group_us: list[float] = []
    busy_s = 0.0
    clock = time.perf_counter
    gc.collect()
    for _ in range(args.passes):
        for gang in gangs:
            for doc in gang:
                started = clock()
                validate_document(doc, priority_classes=PRIORITY_CLASSES)
                elapsed = clock() - started
                busy_s += elapsed
                (group_us if doc["kind"] == "PodGroup" else pod_us).append(elapsed * 1e6)
    pod_us.sort()
    group_us.sort()
    objects = len(pod_us) + len(group_us)
    metrics = {
        "pod_validate_us_p50": round(statistics.median(pod_us), 1),
        "pod_validate_us_p99": round(percentile(pod_us, 0.99), 1),
        "podgroup_validate_us_p50": round(statistics.median(group_us), 1),
        "podgroup_validate_us_p99": round(percentile(group_us, 0.99), 1),
        "objects_per_second": round(objects / busy_s, 1),
    }
    params = {
        "podgroups": args.podgroups,
        "pods_per_group": args.pods_per_group,
        "passes": args.passes,
        "objects_timed": objects,
        "priority_classes": len(PRIORITY_CLASSES),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    return {"name": "api-validation", "params": params, "metrics": metrics}


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.api_validation [options] [-o json|table]`, the same as `podway bench api-validation`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["api-validation", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
