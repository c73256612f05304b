"""DRA in the scheduling core: pods whose claims get exact devices from the allocation search, one cycle each.

Default: 5,000 nodes (10 blocks x 10 racks x 50 nodes, 8 H200 GPUs of 141 Gi, 64 CPU, 512 Gi each) published
as ResourceSlices and loaded by the scheduler state machine (its DeviceClass CEL selectors, its device
inventory); pods each with a claim made from a 1-GPU template whose CEL selector checks the model and the
memory (`device.attributes[...].model == "H200" && device.capacity[...].memory >= 80Gi`), one standalone pod
in gangs of 8 with a hard rack constraint (as `scheduler-core`), filled to 90 % of the GPUs:
`pods_per_second`. Then the fractional case on a fleet of the trace's dominant 8-GPU node (96 CPU, 384 Gi),
every GPU shareable (consumable `cores` and `memory`): the GPU pods of the openb trace (`alibaba-openb-2023/openb_pod_list_default.csv`, read in
place) in trace order, repeated, each asking its `gpu_milli` of one GPU's cores (a share) or `num_gpu`
whole GPUs, 8 to a basic PodGroup (the trace's pods are independent), until 90 % of the GPU cores are taken
or 200 cycles in a row fail: `fractional_pods_per_second`. `--group-size 1` measures one pod per cycle,
where the cycle's own cost (about 40 us on a loaded 2-core host, without claims) dominates.

Timed: each cycle (`schedule_podgroup`, which runs the allocation search on the nodes it tries), applying
its decision to the snapshot and holding its shares, as the state machine does; the rates are placed pods
over the cycles' wall time, and (`*pods_per_cpu_second`) over the CPU time the process spent in them, which
a host busy with other work inflates less than wall time (a process waiting for a core is not charged). Not timed: loading the
fleet (reported as `load_ms`), making the pod requests, the queue and the writes (see `scheduler-e2e
--claims` for the service). Left out: claims shared by name (`resourceClaimName`), preemption, churn.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.measure import percentile
from libs.cluster.device_classes import device_classes_of
from libs.cluster.generator import GPU_DRIVER, ClusterShape, generate_cluster
from libs.core.dra.claims import ClaimSpec, claim_spec
from libs.core.scheduling import RACK_KEY, PodGroup, PodRequest, SchedulerStateMachine, schedule_podgroup
from libs.core.scheduling.inputs import World
from libs.core.scheduling.objects import ApiObject

GPU_CLASS = GPU_DRIVER
GIB = 1024**3
TRACE = Path(os.environ.get("PODWAY_TRACES", "/work/shared/traces")) / "alibaba-openb-2023"
SELECTOR = (
    f'device.attributes["{GPU_DRIVER}"].model == "H200" && '
    f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("80Gi")) >= 0'
)
_MAX_CONSECUTIVE_FAILURES = 200


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--racks-per-block", type=int, default=10)
    parser.add_argument("--nodes-per-rack", type=int, default=50)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--fill", type=float, default=0.9)
    parser.add_argument("--trace", type=Path, default=TRACE / "openb_pod_list_default.csv")
    parser.add_argument("--case", choices=("both", "whole", "fractional"), default="both")
    parser.add_argument("--group-size", type=int, default=8, help="pods per PodGroup (one cycle each)")


def load_fleet(args: argparse.Namespace, *, shared: bool) -> tuple[SchedulerStateMachine, float]:
    """The fleet as the scheduler loads it: DeviceClasses, Nodes and their ResourceSlices. Shared, the
    nodes are the trace's dominant 8-GPU node (96 CPU, 384 Gi), every GPU shareable."""
    shape = ClusterShape(
        blocks=args.blocks,
        racks_per_block=args.racks_per_block,
        nodes_per_rack=args.nodes_per_rack,
        gpus_per_node=args.gpus_per_node,
        rack_fabric=False,
        shared_gpus_per_node=args.gpus_per_node if shared else 0,
        cpu=96 if shared else 64,
        memory_gi=384 if shared else 512,
    )
    docs = generate_cluster(shape)
    docs = device_classes_of(docs) + docs
    objects = [ApiObject.from_manifest(doc, uid=f"uid-{index}") for index, doc in enumerate(docs)]
    machine = SchedulerStateMachine()
    started = time.perf_counter()
    machine.load(World(objects, {}), now=0.0)
    return machine, (time.perf_counter() - started) * 1000


@dataclass(slots=True)
class _Fill:
    cycle_seconds: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    placed_pods: int = 0
    used: int = 0
    unschedulable: int = 0


def _fill(
    machine: SchedulerStateMachine,
    groups: Iterator[tuple[PodGroup, list[PodRequest], dict[str, int]]],
    target: float,
) -> _Fill:
    """One PodGroup per cycle, each placed decision applied and its shares held, until `target` units
    (GPUs, or milli-GPUs) are used or too many cycles in a row fail."""
    snapshot, claims = machine.snapshot, machine.claims
    result = _Fill()
    failures_in_row = 0
    timer = time.perf_counter
    cpu_timer = time.process_time
    for index, (group, pods, units) in enumerate(groups):
        if result.used >= target or failures_in_row >= _MAX_CONSECUTIVE_FAILURES:
            break
        begin_cpu = cpu_timer()
        begin = timer()
        decision = schedule_podgroup(snapshot, group, pods, now=float(index))
        if decision.placed:
            snapshot.apply(decision)
            for owner, allocations in (decision.claims or {}).items():
                claims.hold(owner or group.key, allocations)
        result.cycle_seconds.append(timer() - begin)
        result.cpu_seconds += cpu_timer() - begin_cpu
        if decision.placed:
            result.placed_pods += len(decision.placements)
            result.used += sum(units[placement.pod_uid] for placement in decision.placements)
            failures_in_row = 0
        else:
            result.unschedulable += 1
            failures_in_row += 1
    return result


def _grouped(
    pods: Iterator[tuple[PodRequest, int]], size: int, *, gang: bool
) -> Iterator[tuple[PodGroup, list[PodRequest], dict[str, int]]]:
    """`size` pods to a PodGroup: a rack-constrained gang, or a basic group placing what fits."""
    index = 0
    while True:
        members = [next(pods) for _ in range(size)]
        name = f"group-{index}"
        if size == 1:
            group = PodGroup("bench", name, uid=name)
        elif gang:
            group = PodGroup("bench", name, uid=name, gang_min_count=size, topology_key=RACK_KEY)
        else:
            group = PodGroup("bench", name, uid=name)
        yield group, [pod for pod, _ in members], {pod.uid: units for pod, units in members}
        index += 1


def _whole_pods() -> Iterator[tuple[PodRequest, int]]:
    spec = claim_spec(
        "gpu",
        {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": GPU_CLASS,
                            "count": 1,
                            "selectors": [{"cel": {"expression": SELECTOR}}],
                        },
                    }
                ]
            }
        },
    )
    index = 0
    while True:
        name = f"pod-{index}"
        yield PodRequest(name, name, 4_000, 32 * GIB, {GPU_CLASS: 1}, claims=(spec,)), 1
        index += 1


def trace_shapes(path: Path) -> list[tuple[int, int, int, int]]:
    """(cpu milli, memory bytes, num_gpu, gpu_milli) of the trace's GPU pods, in trace order."""
    with path.open() as stream:
        return [
            (
                int(row["cpu_milli"]),
                int(row["memory_mib"]) * 1024**2,
                int(row["num_gpu"]),
                int(row["gpu_milli"]),
            )
            for row in csv.DictReader(stream)
            if int(row["num_gpu"]) > 0
        ]


def _fractional_pods(shapes: list[tuple[int, int, int, int]]) -> Iterator[tuple[PodRequest, int]]:
    specs: dict[tuple[int, int], ClaimSpec] = {}
    index = 0
    while True:
        for cpu, memory, gpus, milli in shapes:
            spec = specs.get((gpus, milli))
            if spec is None:
                exactly: dict[str, Any] = {"deviceClassName": GPU_CLASS, "count": gpus}
                if gpus == 1 and milli < 1000:
                    exactly["capacity"] = {"requests": {"cores": f"{milli}m"}}
                request = {"name": "gpu", "exactly": exactly}
                spec = specs[(gpus, milli)] = claim_spec("gpu", {"devices": {"requests": [request]}})
            name = f"share-{index}"
            yield (
                PodRequest(name, name, cpu, memory, claims=(spec,)),
                gpus * milli if gpus == 1 else gpus * 1000,
            )
            index += 1


def _metrics(result: _Fill, prefix: str, rate_key: str) -> dict[str, Any]:
    elapsed = sum(result.cycle_seconds)
    ordered = sorted(result.cycle_seconds)
    cpu = result.cpu_seconds
    return {
        rate_key: round(result.placed_pods / elapsed if elapsed else 0.0, 1),
        f"{prefix}pods_per_cpu_second": round(result.placed_pods / cpu if cpu else 0.0, 1),
        f"{prefix}cycle_ms_p50": round(percentile(ordered, 0.50) * 1000, 4),
        f"{prefix}cycle_ms_p99": round(percentile(ordered, 0.99) * 1000, 4),
        f"{prefix}placed_pods": result.placed_pods,
        f"{prefix}unschedulable_cycles": result.unschedulable,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both cases, each on a freshly loaded fleet; the heap is frozen after loading, as the scheduler does."""
    metrics: dict[str, Any] = {}
    nodes = args.blocks * args.racks_per_block * args.nodes_per_rack
    total_gpus = nodes * args.gpus_per_node
    if args.case in ("both", "whole"):
        machine, load_ms = load_fleet(args, shared=False)
        gc.freeze()
        evaluations = machine.claims.inventory.selectors.evaluations
        groups = _grouped(_whole_pods(), args.group_size, gang=True)
        result = _fill(machine, groups, args.fill * total_gpus)
        metrics |= _metrics(result, "", "pods_per_second")
        metrics["gpu_fill_ratio"] = round(result.used / total_gpus, 4)
        metrics["selector_evaluations"] = machine.claims.inventory.selectors.evaluations - evaluations
        metrics["load_ms"] = round(load_ms, 1)
        del machine
        gc.unfreeze()
        gc.collect()
    if args.case in ("both", "fractional"):
        shapes = trace_shapes(args.trace)
        machine, load_ms = load_fleet(args, shared=True)
        gc.freeze()
        groups = _grouped(_fractional_pods(shapes), args.group_size, gang=False)
        result = _fill(machine, groups, args.fill * total_gpus * 1000)
        metrics |= _metrics(result, "fractional_", "fractional_pods_per_second")
        metrics["fractional_gpu_cores_fill_ratio"] = round(result.used / (total_gpus * 1000), 4)
        metrics["fractional_load_ms"] = round(load_ms, 1)
    metrics["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    params = {
        "nodes": nodes,
        "gpus_per_node": args.gpus_per_node,
        "fill_target": args.fill,
        "selector": SELECTOR,
        "trace": str(args.trace),
        "case": args.case,
        "group_size": args.group_size,
        "topology_key": RACK_KEY,
        "python": sys.version.split()[0],
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }
    return {"name": "dra-core", "params": params, "metrics": metrics}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dra_core", description=__doc__)
    add_arguments(parser)
    parser.add_argument("-o", "--output", choices=("json",), default="json")
    print(json.dumps(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
