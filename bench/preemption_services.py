"""`podway bench preemption --services`: preemption through the running stack, every service its own
process on an embedded nats-server and a fresh PostgreSQL database (see bench/preemption.py).

The node agent registers the fleet (default 256 nodes: 2 blocks x 8 racks x 16 nodes of 8 GPUs); low-
priority gangs of 8 pods x 2 GPUs in one rack (priority 10, 20, 50 or 100) fill it; then high-priority
gangs (1000) of `--preemptor-pods` pods x `--preemptor-gpus` GPUs in one rack arrive one at a time, each
once the one before is bound. `preemptor_admitted_to_bound_ms_*` runs from a gang's `podgroup.admitted`
(its commit) to its `pods.bound` arriving on the bus: the cycle that fails, the preemption request, the
victim search, the evictions (the node agent stops an evicted pod at once: grace 0), the victims'
`pods.failed`, and the retry on the nominated room.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from bench.backends import drop_postgres, fresh_postgres
from bench.measure import percentile
from bench.scheduler_e2e import BusWatch, Processes, until_leader
from libs.client.client import PodwayClient
from libs.cluster.generator import RACK_KEY
from libs.messaging.broker import provision_streams
from libs.runtime.health import health_file
from libs.runtime.nats_server import EmbeddedNatsServer

NAMESPACE = "bench"
PRIORITIES = {"p10": 10, "p20": 20, "p50": 50, "p100": 100, "p1000": 1000}
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "extendedResourceName": "nvidia.com/gpu",
    },
}
SERVICES_FLEET = {"blocks": 2, "racks_per_block": 8, "nodes_per_rack": 16}


def run_services(args: argparse.Namespace) -> dict[str, Any]:
    fleet = {key: getattr(args, key) or value for key, value in SERVICES_FLEET.items()}
    load_before = os.getloadavg()[0]
    keep = os.environ.get("PODWAY_BENCH_KEEP")
    with tempfile.TemporaryDirectory(prefix="podway-bench-preempt-") as tmp:
        metrics = asyncio.run(_run(args, fleet, Path(keep or tmp)))
    params = {
        "nodes": fleet["blocks"] * fleet["racks_per_block"] * fleet["nodes_per_rack"],
        **fleet,
        "gpus_per_node": 8,
        "low_gang": "8 pods x 2 GPUs, one rack, priority 10/20/50/100",
        "preemptors": args.services_preemptors,
        "preemptor_gang": f"{args.preemptor_pods} pods x {args.preemptor_gpus} GPUs, one rack, priority 1000",
        "eviction_grace_s": 0,
        "database": "postgres",
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
        "host_load_avg_1m_after": round(os.getloadavg()[0], 2),
    }
    return {"name": "preemption", "params": params, "metrics": metrics}


async def _run(args: argparse.Namespace, fleet: dict[str, int], tmp: Path) -> dict[str, Any]:
    from libs.db.migrate import upgrade

    database_url, dropped = await fresh_postgres(args.database_url)
    await upgrade(database_url)
    nats = EmbeddedNatsServer(data_dir=tmp / "nats").start()
    await provision_streams(nats.url)
    env = {
        **os.environ,
        "PODWAY_NATS_URL": nats.url,
        "PODWAY_DATABASE_URL": database_url,
        "PODWAY_LOG_LEVEL": "WARNING",
        "PODWAY_METRICS_PORT": "0",
    }
    procs = Processes(env, tmp, nats_pids=nats.pids())
    try:
        procs.start("admission", "services.admission.main", tmp / "admission")
        procs.wait_healthy("admission", health_file(tmp / "admission" / "run", "admission"))
        async with PodwayClient(nats.url, timeout_s=120) as client:
            watch = BusWatch()
            await watch.subscribe(client)
            evicted = _Evictions()
            await client.broker.connection.subscribe("podway.events.pods.evicted", cb=evicted.on_evicted)
            await client.apply([GPU_CLASS, *_priority_classes(), *_workloads(args)])
            procs.start(
                "node_agent",
                "services.node_agent.main",
                tmp / "node_agent",
                PODWAY_CLUSTER_BLOCKS=str(fleet["blocks"]),
                PODWAY_CLUSTER_RACKS_PER_BLOCK=str(fleet["racks_per_block"]),
                PODWAY_CLUSTER_NODES_PER_RACK=str(fleet["nodes_per_rack"]),
                PODWAY_CLUSTER_GPUS_PER_NODE="8",
            )
            procs.wait_healthy("node_agent", health_file(tmp / "node_agent" / "run", "node_agent"))
            for name in ("scheduler", "preemptor"):
                procs.start(name, f"services.{name}.main", tmp / name)
                await until_leader(health_file(tmp / name / "run", name))
            # 1. Fill the fleet with low-priority rack gangs.
            rng = random.Random(args.seed)
            gangs = fleet["blocks"] * fleet["racks_per_block"] * fleet["nodes_per_rack"] * 8 // 16
            semaphore = asyncio.Semaphore(16)

            async def fill(index: int) -> None:
                async with semaphore:
                    await client.apply(
                        _gang(f"low-{index:05d}", rng.choice(["p10", "p20", "p50", "p100"]), 8, 2)
                    )

            await asyncio.gather(*(fill(index) for index in range(gangs)))
            if not await watch.until(lambda: watch.bound_pods >= gangs * 8, 300):
                raise RuntimeError(f"only {watch.bound_pods} of {gangs * 8} low-priority pods were bound")
            # 2. High-priority gangs one at a time.
            latencies: list[float] = []
            evicted_per: list[int] = []
            stages: dict[str, list[float]] = {}
            for number in range(args.services_preemptors):
                name = f"high-{number:03d}"
                before = evicted.pods
                await client.apply(_gang(name, "p1000", args.preemptor_pods, args.preemptor_gpus))
                bound = await watch.until(lambda: _bound(watch, name) is not None, 60)  # noqa: B023
                if not bound:
                    story = (await client.events(podgroup=f"{NAMESPACE}/{name}")).events
                    told = [
                        (e["type"], e["payload"].get("reason") or e["payload"].get("message")) for e in story
                    ]
                    raise RuntimeError(f"{name} was not bound within 60 s: {told}")
                uid = _bound(watch, name)
                assert uid is not None
                latencies.append((watch.bound_at[uid] - watch.admitted_at[uid]) * 1000)
                evicted_per.append(evicted.pods - before)
                for stage, spent in (await _stages(client, name)).items():
                    stages.setdefault(stage, []).append(spent)
        return {
            "preemptor_admitted_to_bound_ms_p50": round(percentile(latencies, 0.50), 1),
            "preemptor_admitted_to_bound_ms_p99": round(percentile(latencies, 0.99), 1),
            "preemptor_admitted_to_bound_ms_max": round(max(latencies, default=0.0), 1),
            "pods_evicted_per_preemptor": round(sum(evicted_per) / max(1, len(evicted_per)), 2),
            "low_priority_pods_running_at_start": gangs * 8,
            **{f"stage_{stage}_ms_p50": round(percentile(spent, 0.50), 1) for stage, spent in stages.items()},
        }
    finally:
        procs.stop_all()
        nats.stop()
        await drop_postgres(args.database_url, dropped)


async def _stages(client: PodwayClient, name: str) -> dict[str, float]:
    """Where a preemptor's admitted-to-bound time went, from the commit times in the audit log: until the
    scheduler asked for room, until the preemptor chose the victims, until the last victim pod ended, until
    the preemptor was bound."""
    story = (await client.events(podgroup=f"{NAMESPACE}/{name}")).events
    first: dict[str, float] = {}
    for event in story:
        first.setdefault(event["type"], _at(event))
    selected = next((e for e in story if e["type"] == "preemption.victims_selected"), None)
    if selected is None or "pods.bound" not in first:
        return {}
    ended = first["preemption.victims_selected"]
    for group in selected["payload"]["victim_groups"]:
        victim = (await client.events(podgroup=f"{group['namespace']}/{group['name']}")).events
        ended = max([ended, *(_at(e) for e in victim if e["type"] == "pods.failed")])
    return {
        "admitted_to_requested": (first["preemption.requested"] - first["podgroup.admitted"]) * 1000,
        "requested_to_victims_selected": (
            first["preemption.victims_selected"] - first["preemption.requested"]
        )
        * 1000,
        "victims_selected_to_victims_ended": (ended - first["preemption.victims_selected"]) * 1000,
        "victims_ended_to_bound": (first["pods.bound"] - ended) * 1000,
    }


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["occurred_at"].replace("Z", "+00:00")).timestamp()


class _Evictions:
    def __init__(self) -> None:
        self.pods = 0

    async def on_evicted(self, msg: Any) -> None:
        payload = orjson.loads(msg.data)["payload"]
        if payload.get("reason") == "PreemptionByScheduler":
            self.pods += len(payload["pods"])


def _bound(watch: BusWatch, name: str) -> str | None:
    uid = next((uid for uid, known in watch.name_of.items() if known == name), None)
    return uid if uid is not None and uid in watch.bound_at else None


def _priority_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in PRIORITIES.items()
    ]


def _workloads(args: argparse.Namespace) -> list[dict[str, Any]]:
    shapes = {name: 8 for name in PRIORITIES}
    shapes["p1000"] = args.preemptor_pods
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "podGroupTemplates": [
                    {
                        "name": "worker",
                        "schedulingPolicy": {"gang": {"minCount": size}},
                        "schedulingConstraints": {"topology": [{"key": RACK_KEY}]},
                        "priorityClassName": name,
                    }
                ]
            },
        }
        for name, size in shapes.items()
    ]


def _gang(name: str, priority_class: str, size: int, gpus: int) -> list[dict[str, Any]]:
    requests = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": str(gpus)}
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "podGroupTemplateRef": {
                "workload": {"workloadName": priority_class, "podGroupTemplateName": "worker"}
            },
            "schedulingPolicy": {"gang": {"minCount": size}},
            "schedulingConstraints": {"topology": [{"key": RACK_KEY}]},
            "priorityClassName": priority_class,
            "disruptionMode": "PodGroup",
        },
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "namespace": NAMESPACE},
            "spec": {
                "schedulingGroup": {"podGroupName": name},
                "priorityClassName": priority_class,
                "containers": [{"name": "w", "image": "trainer:v1", "resources": {"requests": requests}}],
            },
        }
        for i in range(size)
    ]
    return [group, *pods]
