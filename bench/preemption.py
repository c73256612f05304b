"""Preemption: how long the victim search takes on a large full fleet, and what it evicts.

The scheduler state machine and the preemptor's state machine of libs/core (the ones the services run)
side by side on a virtual clock. A fleet (default 5,000 nodes: 10 blocks x 25 racks x 20 nodes of 8
GPUs) is filled by the scheduler with low-priority gangs of 8 pods x 2 GPUs, each in one rack, of mixed
priorities (10, 20, 50 or 100 at random; 16 gangs a virtual minute apart), until no more fit.
Then a stream of high-priority (1000) gangs of 32 pods x 4 GPUs, each needing most of one rack, arrives
one at a time: the scheduler finds it does not fit and asks for preemption; the preemptor searches; the
victims end; the scheduler binds the preemptor on the nominated room. Measured: the victim search of each
request (`victim_search_ms_*`, wall time of the search; `victim_search_cpu_ms_*`, CPU time of the
preemptor's pass, which other processes on the host do not inflate), the pods each preemption evicts, the
domains searched in full, and whether every preemptor bound where it was nominated.

`--services` instead runs the stack (admission, scheduler, preemptor, node agent) on an embedded
nats-server and SQLite, with a smaller fleet (default 256 nodes), and measures a high-priority gang from
its apply to its last pod bound (`preemptor_admitted_to_bound_ms_*`), the eviction grace being 0 (the
node agent stops an evicted pod at once).

The collector is tuned and the filled fleet frozen out of its reach, as in the services.

Left out: DRA claims (victims free GPUs counted as devices, not claims), the event bus and the database
in the core case, preemptors arriving while earlier victims are still terminating, and the low gangs of
the last fill batch (withdrawn: they did not fit, and would otherwise preempt lower-priority gangs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Iterator
from typing import Any

from bench.admission import DEFAULT_PG
from bench.measure import percentile
from bench.objects import api_object as _object
from libs.core.preemption import Preempted, PreemptorStateMachine
from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import (
    Nominated,
    ObjectRemoved,
    ObjectStored,
    PodsBound,
    PodsFinished,
    World,
)
from libs.core.scheduling.machine import MachineSettings, SchedulerStateMachine
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import Binding, CycleRan
from libs.runtime.memory import freeze_long_lived, tune_collector

RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
GPU_CLASS = "gpu.example.com"
LOW_PRIORITIES = (10, 20, 50, 100)
HIGH_PRIORITY = 1000
CORE_FLEET = {"blocks": 10, "racks_per_block": 25, "nodes_per_rack": 20}
FILL_BATCH = 16
"""Low-priority gangs per scheduling pass while filling: the queue orders a pass by priority, so small
batches mix priorities within racks."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--blocks", type=int, default=None, help="10 (--services: 2)")
    parser.add_argument("--racks-per-block", type=int, default=None, help="25 (--services: 8)")
    parser.add_argument("--nodes-per-rack", type=int, default=None, help="20 (--services: 16)")
    parser.add_argument("--preemptors", type=int, default=200, help="high-priority gangs in the stream")
    parser.add_argument("--preemptor-pods", type=int, default=32)
    parser.add_argument("--preemptor-gpus", type=int, default=4, help="GPUs per preemptor pod")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--services", action="store_true", help="through the services (smaller fleet)")
    parser.add_argument("--services-preemptors", type=int, default=12, help="high-priority gangs, --services")
    parser.add_argument("--database-url", default=os.environ.get("PODWAY_BENCH_DATABASE_URL", DEFAULT_PG))


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.services:
        from bench.preemption_services import run_services

        result: dict[str, Any] = run_services(args)
        return result
    for key, value in CORE_FLEET.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return _core(args)


def _core(args: argparse.Namespace) -> dict[str, Any]:
    tune_collector()
    rng = random.Random(args.seed)
    now = 0.0
    world = World(_fleet(args), {})
    scheduler = SchedulerStateMachine(MachineSettings(max_cycles_per_pass=4096, max_pods_per_pass=100_000))
    scheduler.load(world, now=now)
    preemptor = PreemptorStateMachine(timer=time.perf_counter)
    preemptor.load(world, now=now)
    # 1. Fill the fleet with low-priority rack gangs until a pass places none.
    index = 0
    while True:
        batch = []
        for _ in range(FILL_BATCH):
            priority = rng.choice(LOW_PRIORITIES)
            batch += list(_gang(f"low-{index}", 8, 2, priority, created_at=now))
            index += 1
        now += 60.0
        for obj in batch:
            _tell(scheduler, preemptor, ObjectStored(obj), now)
        if not _bind(scheduler, preemptor, scheduler.run_pass(now), now):
            break
    # The last batch did not fit: its gangs are withdrawn, so that only the stream of high-priority gangs
    # preempts (a pending low gang of priority 100 would otherwise preempt those of 10 as the fleet churns).
    for group in [g for g in scheduler.book.groups.values() if g.pending and not g.placed]:
        for uid in sorted(group.pending):
            pod = scheduler.book.pods[uid].obj
            _tell(scheduler, preemptor, ObjectRemoved("Pod", pod.namespace, pod.name, uid), now)
        _tell(scheduler, preemptor, ObjectRemoved("PodGroup", group.namespace, group.name, group.uid), now)
    low_pods = sum(1 for pod in scheduler.book.pods.values() if pod.node is not None)
    # As the services do once their world is loaded: the fleet out of the garbage collector's reach.
    freeze_long_lived()
    # 2. The stream of high-priority gangs, one at a time.
    searches: list[float] = []
    cpu_ms: list[float] = []
    evicted: list[int] = []
    domains: list[int] = []
    bound_on_nominated = failed = 0
    for number in range(args.preemptors):
        now += 1.0
        name = f"high-{number}"
        for obj in _gang(name, args.preemptor_pods, args.preemptor_gpus, HIGH_PRIORITY, created_at=now):
            _tell(scheduler, preemptor, ObjectStored(obj), now)
        outputs = scheduler.run_pass(now)
        asked = [o for o in outputs if isinstance(o, CycleRan) and o.preemption_priority is not None]
        _bind(scheduler, preemptor, outputs, now)
        for ran in asked:
            preemptor.request(ran.group.uid, None)
        cpu_started = time.process_time()
        answers = [o for o in preemptor.run_pass(now) if isinstance(o, Preempted)]
        if answers:
            cpu_ms.append((time.process_time() - cpu_started) * 1000 / len(answers))
        for answer in answers:
            searches.append(answer.search_ms)
            domains.append(answer.decision.domains_evaluated)
            victims = tuple(pod.uid for victim in answer.decision.victims for pod in victim.pods)
            if not victims:
                failed += 1
                continue
            evicted.append(len(victims))
            assert answer.expires_at is not None
            scheduler.handle(
                Nominated(answer.preemptor.uid, answer.decision.nodes, answer.expires_at), now=now
            )
            _tell(scheduler, preemptor, PodsFinished(victims, PodPhase.FAILED), now)
            nodes = set(answer.decision.nodes)
            # The scheduler retries the preemptor once its back-off lapses.
            for _ in range(8):
                now += 0.5
                outputs = scheduler.run_pass(now)
                _bind(scheduler, preemptor, outputs, now)
                retried = [
                    o for o in outputs if isinstance(o, CycleRan) and o.group.uid == answer.preemptor.uid
                ]
                if retried and retried[-1].decision.placed:
                    placed = {p.node_name for p in retried[-1].decision.placements}
                    bound_on_nominated += placed <= nodes
                    break
    metrics = {
        "victim_search_ms_p50": round(percentile(searches, 0.50), 3),
        "victim_search_ms_p99": round(percentile(searches, 0.99), 3),
        "victim_search_ms_max": round(max(searches, default=0.0), 3),
        "victim_search_cpu_ms_p50": round(percentile(cpu_ms, 0.50), 3),
        "victim_search_cpu_ms_p99": round(percentile(cpu_ms, 0.99), 3),
        "host_load_1m": round(os.getloadavg()[0], 2),
        "pods_evicted_per_preemptor": round(sum(evicted) / max(1, len(evicted)), 2),
        "domains_searched_per_preemptor": round(sum(domains) / max(1, len(domains)), 2),
        "preemptions": len(evicted),
        "preemptions_without_victims": failed,
        "bound_on_nominated_nodes": bound_on_nominated,
        "low_priority_pods_running_at_start": low_pods,
    }
    params = {
        "nodes": args.blocks * args.racks_per_block * args.nodes_per_rack,
        "blocks": args.blocks,
        "racks_per_block": args.racks_per_block,
        "nodes_per_rack": args.nodes_per_rack,
        "gpus_per_node": 8,
        "low_gang": "8 pods x 2 GPUs, one rack, priority 10/20/50/100",
        "preemptors": args.preemptors,
        "preemptor_gang": f"{args.preemptor_pods} pods x {args.preemptor_gpus} GPUs, one rack, priority 1000",
        "seed": args.seed,
    }
    return {"name": "preemption", "params": params, "metrics": metrics}


def _tell(scheduler: SchedulerStateMachine, preemptor: PreemptorStateMachine, event: Any, now: float) -> None:
    scheduler.handle(event, now=now)
    preemptor.handle(event, now=now)


def _bind(
    scheduler: SchedulerStateMachine, preemptor: PreemptorStateMachine, outputs: list[Any], now: float
) -> int:
    """The preemptor hears what the scheduler bound (as it would from `pods.bound`); returns pods bound."""
    bound = 0
    for output in outputs:
        binding = output.bind if isinstance(output, CycleRan) else output
        if isinstance(binding, Binding):
            placements = tuple((p.pod_uid, p.node_name, p.devices) for p in binding.placements)
            preemptor.handle(PodsBound(placements), now=now)
            bound += len(placements)
    return bound


def _fleet(args: argparse.Namespace) -> list[ApiObject]:
    objects = [
        _object(
            "DeviceClass",
            GPU_CLASS,
            spec={
                "selectors": [{"cel": {"expression": f'device.driver == "{GPU_CLASS}"'}}],
                "extendedResourceName": "nvidia.com/gpu",
            },
        )
    ]
    for block in range(args.blocks):
        for rack in range(args.racks_per_block):
            for slot in range(args.nodes_per_rack):
                name = f"b{block}-r{rack}-n{slot:02d}"
                labels = {BLOCK: f"b{block}", RACK: f"b{block}-r{rack}", "kubernetes.io/hostname": name}
                status = {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110"}}
                objects.append(_object("Node", name, labels=labels, status=status))
                devices = [{"name": f"gpu-{i}"} for i in range(8)]
                spec = {"driver": GPU_CLASS, "nodeName": name, "devices": devices}
                objects.append(_object("ResourceSlice", f"{name}-gpus", spec=spec))
    return objects


def _gang(name: str, size: int, gpus: int, priority: int, *, created_at: float) -> Iterator[ApiObject]:
    spec = {
        "schedulingPolicy": {"gang": {"minCount": size}},
        "schedulingConstraints": {"topology": [{"key": RACK}]},
        "priority": priority,
        "disruptionMode": "PodGroup",
    }
    yield _object("PodGroup", name, namespace="bench", spec=spec, created_at=created_at)
    requests = {"cpu": str(8 * gpus), "memory": f"{32 * gpus}Gi", "nvidia.com/gpu": str(gpus)}
    pod_spec = {
        "schedulingGroup": {"podGroupName": name},
        "priority": priority,
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    for index in range(size):
        yield _object("Pod", f"{name}-{index}", namespace="bench", spec=pod_spec, created_at=created_at)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.preemption", description=__doc__)
    add_arguments(parser)
    parser.add_argument("-o", "--output", choices=("json",), default="json")
    print(json.dumps(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
