"""Queueing hints: how many parked gangs a pod completion wakes, and how many cycles then place nothing.

The scheduler state machine of libs/core (the one the scheduler service runs) on a virtual clock: a fleet
(default 512 nodes: 4 blocks x 8 racks x 16 nodes of 8 GPUs) is filled with running rack gangs of 4 pods
x 4 GPUs until no more fit; then `--parked` gangs (default 2,000) that cannot fit arrive and park
(whole-rack gangs of 16 x 8 GPUs, block gangs of 32 x 8 GPUs, and a few two-node rack gangs that fit as
soon as two nodes of a rack are free); then the running gangs finish one `pods.succeeded` at a time, a
virtual 0.25 s apart, each followed by a scheduling pass. The same run is repeated with the hints off
(every release wakes every parked gang, as before). Reported per completion event: parked gangs woken,
cycles that placed nothing, and the CPU time of the pass.

Left out: the event bus and the database (see scheduler-e2e), nodes and devices changing (they wake
every parked gang), and preemption.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterator
from typing import Any

from bench.objects import api_object as _object
from libs.core.scheduling import PodPhase
from libs.core.scheduling.inputs import ObjectStored, PodsFinished, World
from libs.core.scheduling.machine import MachineSettings, SchedulerStateMachine
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import CycleRan

RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
GPU_CLASS = "gpu.example.com"
STEP_S = 0.25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--racks-per-block", type=int, default=8)
    parser.add_argument("--nodes-per-rack", type=int, default=16)
    parser.add_argument("--parked", type=int, default=2000, help="gangs that wait parked")
    parser.add_argument("--completions", type=int, default=400, help="running gangs that finish")
    parser.add_argument("--seed", type=int, default=11)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with_hints = _scenario(args, hints=True)
    without = _scenario(args, hints=False)
    metrics = {
        "completion_events": with_hints["events"],
        "parked_gangs": with_hints["parked"],
        "wakeups_per_event": with_hints["wakeups_per_event"],
        "wakeups_per_event_without_hints": without["wakeups_per_event"],
        "empty_cycles": with_hints["empty_cycles"],
        "empty_cycles_without_hints": without["empty_cycles"],
        "placed_pods": with_hints["placed_pods"],
        "placed_pods_without_hints": without["placed_pods"],
        "pass_cpu_ms_per_event": with_hints["cpu_ms_per_event"],
        "pass_cpu_ms_per_event_without_hints": without["cpu_ms_per_event"],
    }
    params = {
        "nodes": args.blocks * args.racks_per_block * args.nodes_per_rack,
        "blocks": args.blocks,
        "racks_per_block": args.racks_per_block,
        "nodes_per_rack": args.nodes_per_rack,
        "parked": args.parked,
        "completions": args.completions,
        "seed": args.seed,
        "step_s": STEP_S,
    }
    return {"name": "scheduler-queue", "params": params, "metrics": metrics}


def _scenario(args: argparse.Namespace, *, hints: bool) -> dict[str, Any]:
    machine = SchedulerStateMachine(MachineSettings(queueing_hints=hints, max_cycles_per_pass=4096))
    machine.load(World(_fleet(args), {}), now=0.0)
    now = 1.0
    running: list[tuple[str, ...]] = []
    # 1. Fill with running rack gangs until a pass places none.
    for index in range(100_000):
        for obj in _gang(f"run-{index}", 4, 4, RACK, now=now):
            machine.handle(ObjectStored(obj), now=now)
        outputs = machine.run_pass(now)
        placed = [o for o in outputs if isinstance(o, CycleRan) and o.decision.placed]
        if not placed:
            break
        running += [tuple(p.pod_uid for p in o.decision.placements) for o in placed]
    # 2. The parked gangs arrive, are tried once, and park.
    rng = random.Random(args.seed)
    for index in range(args.parked):
        shape = rng.choices([(16, 8, RACK), (32, 8, BLOCK), (2, 8, RACK)], weights=[60, 35, 5])[0]
        for obj in _gang(f"parked-{index}", *shape, now=now):
            machine.handle(ObjectStored(obj), now=now)
    now += STEP_S
    machine.run_pass(now)
    parked = machine.queue.parked
    # 3. Running gangs finish one event at a time.
    rng.shuffle(running)
    wakeups_before = machine.stats.wakeups
    empty = placed_pods = 0
    cpu = 0.0
    events = min(args.completions, len(running))
    for uids in running[:events]:
        now += STEP_S
        started = time.process_time()
        machine.handle(PodsFinished(uids, PodPhase.SUCCEEDED), now=now)
        outputs = machine.run_pass(now)
        cpu += time.process_time() - started
        for output in outputs:
            if isinstance(output, CycleRan):
                if output.decision.placed:
                    placed_pods += len(output.decision.placements)
                else:
                    empty += 1
    return {
        "events": events,
        "parked": parked,
        "wakeups_per_event": round((machine.stats.wakeups - wakeups_before) / max(1, events), 2),
        "empty_cycles": empty,
        "placed_pods": placed_pods,
        "cpu_ms_per_event": round(cpu * 1000 / max(1, events), 3),
    }


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


def _gang(name: str, size: int, gpus: int, key: str, *, now: float) -> Iterator[ApiObject]:
    spec = {
        "schedulingPolicy": {"gang": {"minCount": size}},
        "schedulingConstraints": {"topology": [{"key": key}]},
    }
    yield _object("PodGroup", name, namespace="bench", spec=spec, created_at=now)
    requests = {"cpu": str(8 * gpus), "memory": f"{32 * gpus}Gi", "nvidia.com/gpu": str(gpus)}
    pod_spec = {
        "schedulingGroup": {"podGroupName": name},
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    for index in range(size):
        yield _object("Pod", f"{name}-{index}", namespace="bench", spec=pod_spec, created_at=now)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler_queue", description=__doc__)
    add_arguments(parser)
    parser.add_argument("-o", "--output", choices=("json",), default="json")
    print(json.dumps(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
