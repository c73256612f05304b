"""The quota benchmark's e2e phase: gangs through the services with quotas on (see `bench.quota` for what it
measures and what it leaves out). Admission, a simulated node agent, the scheduler and the preemptor, each
its own process, on an embedded nats-server and SQLite (`--database postgres`: a fresh PostgreSQL database)."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.backends import backends
from bench.measure import host_cpu_seconds, percentile
from bench.quota_config import (
    GPU,
    MODEL_LABEL,
    Arrival,
    QuotaWorld,
    WorkloadClass,
    arrivals,
    namespace_of,
)
from bench.quota_core import core_inputs, workload_request
from bench.scheduler_e2e import GPU_CLASS, BusWatch, Processes, until_leader
from libs.api.annotations import RUN_SECONDS
from libs.api.models.kueue import QUEUE_NAME_LABEL
from libs.client.client import PodwayClient
from libs.cluster.generator import ClusterShape, gpu_slice_manifest, node_manifest
from libs.core.quota import Mode, QuotaSnapshot, admit
from libs.events.rpc import ApplyReply
from libs.runtime.health import health_file

GPUS_PER_NODE = 8
IN_FLIGHT = 16
"""Applies in flight, as scheduler-e2e applies its gangs."""
BATCH = 200
"""Quota objects per apply."""


@dataclass
class QuotaWatch(BusWatch):
    """scheduler-e2e's watch, and which gangs told they wait for quota (`podgroup.unschedulable`)."""

    waiting_for_quota: set[str] = field(default_factory=set)

    async def subscribe(self, client: PodwayClient) -> None:
        await super().subscribe(client)
        await client.broker.connection.subscribe("podway.events.podgroup.unschedulable", cb=self._on_waiting)

    async def _on_waiting(self, msg: Any) -> None:
        payload = orjson.loads(msg.data)["payload"]
        if "waiting for quota" in payload.get("message", ""):
            self.waiting_for_quota.add(payload["podgroup"]["uid"])
            self.changed.set()


def fleet(world: QuotaWorld, nodes: int) -> list[dict[str, Any]]:
    """`nodes` nodes shared among the flavors in proportion to their nominal quota (cohorts' pools
    included), labelled as each flavor says, and their GPUs' ResourceSlices: nodes of 8 GPUs with 8 CPUs
    and 64 Gi each for the gpu mix, of 160 CPUs for the kueue mix's cpu quota."""
    flavors, cohorts, queues = core_inputs(world)
    unit = "cpu" if world.mix == "kueue" else GPU
    shape = (
        ClusterShape(gpus_per_node=0, cpu=160, memory_gi=1024)
        if world.mix == "kueue"
        else ClusterShape(gpus_per_node=GPUS_PER_NODE, cpu=8 * GPUS_PER_NODE, memory_gi=64 * GPUS_PER_NODE)
    )
    nominal: dict[str, int] = {}
    for quotas in [q.quotas for q in queues] + [c.quotas for c in cohorts]:
        for (flavor_name, resource), quota in quotas.items():
            if resource == unit:
                nominal[flavor_name] = nominal.get(flavor_name, 0) + quota.nominal
    total = sum(nominal.values()) or 1
    manifests: list[dict[str, Any]] = []
    for flavor in flavors:
        for index in range(round(nodes * nominal.get(flavor.name, 0) / total)):
            name = f"{flavor.name}-n{index:04d}"
            node = node_manifest(name, "zone-0", f"{flavor.name}-b0", f"{flavor.name}-r{index // 20}", shape)
            node["metadata"]["labels"] |= dict(flavor.node_labels)
            manifests.append(node)
            if shape.gpus_per_node:
                manifests.append(gpu_slice_manifest(name, shape))
    return manifests


def gang(arrival: Arrival, name: str, run_seconds: float) -> list[dict[str, Any]]:
    """A PodGroup naming its queue and its pods, which run `run_seconds` (0: until the end)."""
    shape = arrival.workload_class
    namespace = namespace_of(arrival.queue)
    labels = {QUEUE_NAME_LABEL: arrival.queue}
    requests = {resource: _quantity(resource, amount) for resource, amount in shape.per_pod}
    spec: dict[str, Any] = {
        "schedulingGroup": {"podGroupName": name},
        "priorityClassName": priority_class(shape),
        "containers": [{"name": "w", "image": "trainer:v1", "resources": {"requests": requests}}],
    }
    if arrival.pin:
        spec["nodeSelector"] = {MODEL_LABEL: arrival.pin}
    annotations = {RUN_SECONDS: f"{run_seconds:g}"} if run_seconds else {}
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": shape.pods}},
            "priorityClassName": priority_class(shape),
        },
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }
        for i in range(shape.pods)
    ]
    return [group, *pods]


def priority_class(workload_class: WorkloadClass) -> str:
    return f"quota-{workload_class.name}"


def priority_classes(world: QuotaWorld) -> list[dict[str, Any]]:
    """A PriorityClass per workload class, of its priority."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class(c)},
            "value": c.priority,
        }
        for c in world.classes
    ]


def _quantity(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"{amount}m"
    return str(amount)


def admissible(world: QuotaWorld, seed: int, count: int) -> list[Arrival]:
    """The first `count` workloads of the world (in order of creation) that their queue could ever admit: a
    gang that does not fit its queue with nothing admitted would wait for ever."""
    empty = QuotaSnapshot(*core_inputs(world))
    found = []
    for arrival in arrivals(world, seed=seed):
        if admit(empty, workload_request(arrival)).mode is not Mode.NO_FIT:
            found.append(arrival)
        if len(found) == count:
            break
    return found


async def apply_all(client: PodwayClient, manifests: list[dict[str, Any]]) -> None:
    for start in range(0, len(manifests), BATCH):
        _admitted(await client.apply(manifests[start : start + BATCH]))


def _admitted(reply: ApplyReply) -> None:
    rejected = [r for r in reply.results if r.outcome == "rejected"]
    if rejected:
        raise RuntimeError(f"{rejected[0].kind} {rejected[0].name}: {rejected[0].message}")


async def apply_gangs(
    client: PodwayClient, watch: BusWatch, gangs: Iterable[tuple[str, list[dict[str, Any]]]]
) -> None:
    semaphore = asyncio.Semaphore(IN_FLIGHT)

    async def one(name: str, manifests: list[dict[str, Any]]) -> None:
        async with semaphore:
            watch.applied_at[name] = time.time()
            _admitted(await client.apply(manifests))

    await asyncio.gather(*(one(name, manifests) for name, manifests in gangs))


def _gangs_of(watch: BusWatch, prefix: str) -> list[str]:
    return [uid for uid in watch.gangs(prefix) if uid in watch.bound_at]


async def until_bound(watch: BusWatch, gangs: dict[str, int], timeout_s: float) -> None:
    """Until every gang (name: pods) has had all its pods bound. Gangs are told apart by uid, not by counting
    pods: an event may reach a core-NATS subscriber twice."""

    def bound() -> int:
        uids = {name: uid for uid, name in watch.name_of.items() if name in gangs}
        return sum(1 for name, uid in uids.items() if watch.pods_of.get(uid, 0) >= gangs[name])

    if not await watch.until(lambda: bound() == len(gangs), timeout_s):
        raise RuntimeError(f"only {bound()} of {len(gangs)} gangs were bound in {timeout_s:.0f} s")


async def _run(args: argparse.Namespace, world: QuotaWorld, tmp: Path) -> dict[str, Any]:
    backlog = admissible(world, args.seed, args.e2e_gangs + args.e2e_rate * args.e2e_seconds)
    paced, backlog = backlog[args.e2e_gangs :], backlog[: args.e2e_gangs]
    cluster = fleet(world, args.e2e_nodes)
    cluster_file = tmp / "cluster.yaml"
    cluster_file.write_text(yaml.safe_dump_all(cluster))
    flavors = [o for o in world.objects if o["kind"] == "ResourceFlavor"]
    others = [o for o in world.objects if o["kind"] != "ResourceFlavor"]
    metrics: dict[str, Any] = {}
    async with backends(args.database, args.database_url, tmp) as stack:
        env = {
            **os.environ,
            "PODWAY_NATS_URL": stack.nats_url,
            "PODWAY_DATABASE_URL": stack.database_url,
            "PODWAY_LOG_LEVEL": "WARNING",
            "PODWAY_METRICS_PORT": "0",
        }
        procs = Processes(env, tmp, nats_pids=[stack.nats_pid] if stack.nats_pid else [])
        try:
            procs.start("admission", "services.admission.main", tmp / "admission")
            procs.wait_healthy("admission", health_file(tmp / "admission" / "run", "admission"))
            async with PodwayClient(stack.nats_url, timeout_s=120) as client:
                watch = QuotaWatch()
                await watch.subscribe(client)
                # 1. The quota objects, but not the flavors: every ClusterQueue is inactive until they come.
                started = time.monotonic()
                await apply_all(client, [GPU_CLASS, *priority_classes(world), *others])
                metrics["e2e_quota_objects_applied_s"] = round(time.monotonic() - started, 2)
                procs.start(
                    "node_agent",
                    "services.node_agent.main",
                    tmp / "node_agent",
                    PODWAY_CLUSTER_FILE=str(cluster_file),
                )
                procs.wait_healthy("node_agent", health_file(tmp / "node_agent" / "run", "node_agent"))
                for name in ("scheduler", "preemptor"):
                    procs.start(name, f"services.{name}.main", tmp / name)
                    await until_leader(health_file(tmp / name / "run", name))
                # 2. The backlog waits for quota, each gang told why.
                run_s = args.e2e_run_seconds
                await apply_gangs(
                    client,
                    watch,
                    ((f"backlog-{i:05d}", gang(a, f"backlog-{i:05d}", run_s)) for i, a in enumerate(backlog)),
                )
                if not await watch.until(lambda: len(watch.waiting_for_quota) >= len(backlog), 300):
                    raise RuntimeError(
                        f"only {len(watch.waiting_for_quota)} of {len(backlog)} gangs waited for quota"
                    )
                # 3. The flavors come: every queue is active at once and the backlog is admitted and bound.
                cpu_before, host_before = procs.cpu_seconds(), host_cpu_seconds()
                released = time.time()
                await apply_all(client, flavors)
                expected = sum(a.workload_class.pods for a in backlog)
                await until_bound(
                    watch, {f"backlog-{i:05d}": a.workload_class.pods for i, a in enumerate(backlog)}, 300
                )
                cpu_after, host_after = procs.cpu_seconds(), host_cpu_seconds()
                window = time.time() - released
                if args.database != "postgres":
                    cpu_after.pop("postgres", None)
                spent = {name: s - cpu_before.get(name, 0.0) for name, s in cpu_after.items()}
                metrics["e2e_backlog_cpu_ms_per_gang"] = round(sum(spent.values()) * 1000 / len(backlog), 2)
                for name, seconds in spent.items():
                    metrics[f"e2e_backlog_cpu_ms_per_gang_{name}"] = round(seconds * 1000 / len(backlog), 2)
                for reading, start, end in zip(("busy", "steal"), host_before, host_after, strict=True):
                    metrics[f"e2e_backlog_host_{reading}_cores"] = round((end - start) / window, 2)
                bound = sorted(watch.bound_at[uid] for uid in _gangs_of(watch, "backlog-"))
                metrics["e2e_backlog_gangs"] = len(bound)
                metrics["e2e_backlog_pods"] = expected
                # From the flavors' apply sent (every gang admissible from then on) to the last gang bound.
                metrics["e2e_gangs_per_second"] = round(len(bound) / max(bound[-1] - released, 1e-6), 1)
                metrics["e2e_pods_per_second"] = round(expected / max(bound[-1] - released, 1e-6), 1)
                since_release = [(t - released) * 1000 for t in bound]
                metrics["e2e_release_to_bound_ms_p50"] = round(percentile(since_release, 0.5), 1)
                metrics["e2e_release_to_bound_ms_max"] = round(max(since_release), 1)
                if run_s:
                    await watch.until(lambda: watch.succeeded >= expected, 300)
                # 4. Gangs at a rate: from each gang's admission to its pods bound.
                if paced:
                    metrics |= await _paced(client, watch, args, paced)
        finally:
            procs.stop_all()
    return metrics


async def _paced(
    client: PodwayClient, watch: QuotaWatch, args: argparse.Namespace, paced: list[Arrival]
) -> dict[str, Any]:
    interval = 1.0 / args.e2e_rate
    started = time.monotonic()
    tasks = []
    for index, arrival in enumerate(paced):
        delay = started + index * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        name = f"paced-{index:05d}"
        watch.applied_at[name] = time.time()
        tasks.append(asyncio.create_task(client.apply(gang(arrival, name, args.e2e_run_seconds))))
    for reply in await asyncio.gather(*tasks):
        _admitted(reply)
    await until_bound(watch, {f"paced-{i:05d}": a.workload_class.pods for i, a in enumerate(paced)}, 120)
    gangs = _gangs_of(watch, "paced-")
    spent = [(watch.bound_at[uid] - watch.admitted_at[uid]) * 1000 for uid in gangs]
    admitted = sorted(watch.admitted_at[uid] for uid in gangs)
    bound = sorted(watch.bound_at[uid] for uid in gangs)
    return {
        "e2e_paced_gangs": len(gangs),
        "e2e_paced_rate_gangs_per_second": args.e2e_rate,
        "e2e_paced_admitted_gangs_per_second": round(
            (len(admitted) - 1) / max(admitted[-1] - admitted[0], 1e-6), 1
        ),
        "e2e_paced_bound_gangs_per_second": round((len(bound) - 1) / max(bound[-1] - bound[0], 1e-6), 1),
        "e2e_admitted_to_bound_ms_p50": round(percentile(spent, 0.5), 1),
        "e2e_admitted_to_bound_ms_p99": round(percentile(spent, 0.99), 1),
        "e2e_admitted_to_bound_ms_max": round(max(spent), 1),
    }


def run_services(args: argparse.Namespace, world: QuotaWorld) -> dict[str, Any]:
    """The e2e phase's metrics."""
    with tempfile.TemporaryDirectory(prefix="podway-bench-quota-") as tmp:
        return asyncio.run(_run(args, world, Path(tmp)))
