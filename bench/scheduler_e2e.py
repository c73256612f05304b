"""`podway bench scheduler-e2e`: gangs bound on a generated fleet through the real stack, every service its
own process: NATS, PostgreSQL (a fresh database), admission, the node agent, and two schedulers (one
active, one standby).

By default (`--case rack`) each gang spans several nodes inside one rack: 16 pods of 2 GPUs with a hard
rack constraint (four nodes of a 20-node rack), and its pods run `--run-seconds` (2 s) before they
succeed, so the fleet churns: bound pods finish and give their room back while new gangs arrive.
`--case single-node` is the earlier case: gangs of 8 pods of 1 GPU (one node each), no topology
constraint, pods running until the end. `--gang-size`, `--gpus-per-pod`, `--topology-key` (`none` for
none) and `--run-seconds` override either case.

1. Throughput: the pods of `--throughput-gangs` gangs are admitted while their PodGroups do not exist (a
   PodGroup naming a Workload that does not exist is refused, so the gangs cannot wait for their Workload);
   then the Workload and the PodGroups are applied, 16 applies in flight, and the gangs become ready as
   their PodGroups are admitted. `pods_per_second` is bound pods over the time from the first to the last
   `pods.bound` seen on the bus (sustained: the scheduler is caught up with the event stream beforehand).
2. Apply to bound (the headline, admission included): once the fleet is empty again, the client applies
   `--apply-gangs` gangs as fast as admission takes them (16 applies in flight), and
   `apply_to_bound_pods_per_second` is their pods over the time from the first apply sent to the last
   `pods.bound` seen; `apply_to_bound_ms_p50`/`p99` run, for each pod, from the moment its gang's apply
   was sent to its `pods.bound`; `apply_cpu_ms_per_pod_*` is the CPU each process spent per pod meanwhile,
   and `apply_host_busy_cores` (`_steal_cores`) what the whole host used meanwhile (other work included).
   With pods finishing, the fleet holds at most its room per `--run-seconds`
   (`params.fleet_pods_per_second_ceiling`); phases 1 and 2 each start on an empty fleet.
3. Latency: gangs are admitted at `--latency-rate` pods/s (default 500: half the 1,000 pods/s target; 0 =
   half the measured throughput) for `--latency-seconds` (at most what the fleet's room holds, unless
   `--latency-run-seconds` lets the pods finish, which adds their completions to the load);
   `admitted_to_bound_ms_p99` runs, for each pod, from its PodGroup's `podgroup.admitted` (the commit
   time of the apply that admitted the gang) to its `pods.bound` arriving on the bus;
   `latency_apply_to_bound_ms_p99` from the apply sent instead.
   `latency_admitted_pods_per_second` is the rate admission actually achieved.
4. Takeover: the active scheduler is killed (SIGKILL: no lease release) while gangs keep arriving;
   `lease_takeover_ms` runs from the kill to the standby's first `pods.bound` under the next epoch.

`--claims`: every pod asks its GPUs through a claim of its own made from a ResourceClaimTemplate (`gpus-N`:
N whole GPUs) instead of `nvidia.com/gpu`, and the DRA allocator service runs too (its own process): each
cycle proposes exact devices, the allocator commits them (device rows, ResourceClaims, claim statuses) and
only then is the gang bound. `allocation_ms_p50`/`p99` run, per gang, from its `placement.proposed` to its
`claims.allocated` arriving on the bus.

`--nats-cluster N`: the bus is a JetStream cluster of N nats-servers on loopback (libs/runtime/nats_cluster.py)
and every stream is on all N (`podway migrate --replicas N`); each process is given every server's URL. The
servers share this host's cores with everything else, so the figures show what replication costs in CPU and
round trips, not what separate machines (and their network) would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import psutil

from bench.admission import DEFAULT_PG
from bench.backends import drop_postgres, fresh_postgres
from bench.measure import cpu_seconds, host_cpu_seconds, percentile, postgres_cpu_seconds, scheduling_core
from libs.api.annotations import RUN_SECONDS
from libs.client.client import PodwayClient
from libs.cluster.generator import RACK_KEY
from libs.messaging.broker import provision_streams
from libs.runtime.health import health_file, last_beat, process_name
from libs.runtime.nats_cluster import NatsCluster
from libs.runtime.nats_server import EmbeddedNatsServer

NAMESPACE = "bench"
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "extendedResourceName": "nvidia.com/gpu",
    },
}


CASES: dict[str, dict[str, Any]] = {
    "rack": {"gang_size": 16, "gpus_per_pod": 2, "topology_key": RACK_KEY, "run_seconds": 2.0},
    "single-node": {"gang_size": 8, "gpus_per_pod": 1, "topology_key": None, "run_seconds": 0.0},
}
"""What each `--case` sets, unless an option says otherwise."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--case", choices=tuple(CASES), default="rack")
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--racks-per-block", type=int, default=10)
    parser.add_argument("--nodes-per-rack", type=int, default=20, help="default fleet: 1,000 nodes")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--gang-size", type=int, default=None, help="pods per gang (case: 16 or 8)")
    parser.add_argument("--gpus-per-pod", type=int, default=None, help="case: 2 or 1")
    parser.add_argument(
        "--topology-key", default=None, help=f"hard topology key of every gang, or none (case: {RACK_KEY})"
    )
    parser.add_argument(
        "--run-seconds", type=float, default=None, help="how long pods run, 0: until the end (case: 2 or 0)"
    )
    parser.add_argument(
        "--throughput-gangs",
        type=int,
        default=None,
        help="backlog bound in phase 1 (default: 80 %% of the room)",
    )
    parser.add_argument(
        "--apply-gangs",
        type=int,
        default=None,
        help="gangs applied in phase 2 (default: the room; 0: skip)",
    )
    parser.add_argument(
        "--latency-rate", type=float, default=500.0, help="pods/s (half the target); 0 = half the throughput"
    )
    parser.add_argument("--latency-seconds", type=float, default=6.0)
    parser.add_argument(
        "--latency-run-seconds",
        type=float,
        default=None,
        help="how long latency-phase pods run (0: until the end; default --run-seconds); with pods "
        "finishing, a longer phase fits",
    )
    parser.add_argument("--lease-seconds", type=float, default=2.0)
    parser.add_argument("--database-url", default=os.environ.get("PODWAY_BENCH_DATABASE_URL", DEFAULT_PG))
    parser.add_argument(
        "--claims", action="store_true", help="GPUs through per-pod claim templates and the DRA allocator"
    )
    parser.add_argument(
        "--nats-cluster",
        type=int,
        default=0,
        help="run on a JetStream cluster of this many nats-servers (loopback), every stream on all of them; "
        "0: one embedded nats-server",
    )


def resolve_case(args: argparse.Namespace) -> None:
    """Fill the options left unset from `--case`, and the phase sizes from the fleet's room."""
    for name, value in CASES[args.case].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.topology_key in ("", "none"):
        args.topology_key = None
    if args.latency_run_seconds is None:
        args.latency_run_seconds = args.run_seconds
    room = gang_room(args)
    if args.throughput_gangs is None:
        args.throughput_gangs = max(1, room * 4 // 5)
    if args.apply_gangs is None:
        args.apply_gangs = room if args.run_seconds else 0


def gang_room(args: argparse.Namespace) -> int:
    """How many gangs the empty fleet holds at once (per rack when gangs are rack-constrained)."""
    per_node: int = args.gpus_per_node // args.gpus_per_pod
    size: int = args.gang_size
    racks: int = args.blocks * args.racks_per_block
    nodes_per_rack: int = args.nodes_per_rack
    if args.topology_key == RACK_KEY:
        return racks * (nodes_per_rack * per_node // size)
    return racks * nodes_per_rack * per_node // size


# -- manifests ---------------------------------------------------------------------------------------------


HELD = "held"
"""The Workload the throughput gangs wait for: they are admitted first and released together."""
SHARED = "shared"
"""The Workload every latency and takeover gang runs from."""
TAKEOVER_GANGS = 8
"""Gangs admitted while the standby takes over (four a second for two seconds)."""


def workload_manifest(name: str, size: int, topology_key: str | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"name": "worker", "schedulingPolicy": {"gang": {"minCount": size}}}
    if topology_key:
        template["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"podGroupTemplates": [template]},
    }


def claim_template(gpus: int) -> dict[str, Any]:
    """`gpus-N`: a claim for N whole GPUs, one per pod."""
    request = {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": gpus}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"gpus-{gpus}", "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def gang_manifests(
    name: str,
    size: int,
    gpus: int,
    workload: str = SHARED,
    run_seconds: float = 0.0,
    topology_key: str | None = None,
    claims: bool = False,
) -> list[dict[str, Any]]:
    """One PodGroup run of `workload` and its pods, which run `run_seconds` (0: until the end); with
    `claims` each pod asks its GPUs through a claim of its own (template `gpus-N`)."""
    annotations = {RUN_SECONDS: f"{run_seconds:g}"} if run_seconds else {}
    spec: dict[str, Any] = {
        "podGroupTemplateRef": {"workload": {"workloadName": workload, "podGroupTemplateName": "worker"}},
        "schedulingPolicy": {"gang": {"minCount": size}},
    }
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    requests = (
        {"cpu": "4", "memory": "32Gi"}
        if claims
        else {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": str(gpus)}
    )
    pod_claims = [{"name": "gpus", "resourceClaimTemplateName": f"gpus-{gpus}"}] if claims else []
    container: dict[str, Any] = {"name": "w", "image": "trainer:v1", "resources": {"requests": requests}}
    if claims:
        container["resources"]["claims"] = [{"name": "gpus"}]
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        },
        *(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "namespace": NAMESPACE, "annotations": annotations},
                "spec": {
                    "schedulingGroup": {"podGroupName": name},
                    "containers": [container],
                    **({"resourceClaims": pod_claims} if claims else {}),
                },
            }
            for i in range(size)
        ),
    ]


def gang_of(
    args: argparse.Namespace, name: str, workload: str = SHARED, run_seconds: float = 0.0
) -> list[dict[str, Any]]:
    """A gang of the benchmark's shape."""
    return gang_manifests(
        name, args.gang_size, args.gpus_per_pod, workload, run_seconds, args.topology_key, args.claims
    )


# -- processes ---------------------------------------------------------------------------------------------


@dataclass
class Processes:
    env: dict[str, str]
    tmp: Path
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    nats_pids: list[int] = field(default_factory=list)

    def start(self, name: str, module: str, data_dir: Path, **extra: str) -> subprocess.Popen[bytes]:
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {**self.env, "PODWAY_DATA_DIR": str(data_dir), **extra}
        log = (self.tmp / f"{name}.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", module], env=env, stdout=log, stderr=log)
        self.running[name] = proc
        return proc

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by each running service, by the benchmark's own process (it publishes the
        applies and decodes every event it watches), by nats-server and by PostgreSQL: where the pods' cost
        goes on a shared host."""
        used: dict[str, float] = {}
        for name, proc in self.running.items():
            with contextlib.suppress(psutil.Error):
                used[name] = cpu_seconds(psutil.Process(proc.pid))
        used["bench"] = cpu_seconds(psutil.Process())
        for pid in self.nats_pids:  # every server of a cluster together: what the bus costs
            with contextlib.suppress(psutil.Error):
                used["nats_server"] = used.get("nats_server", 0.0) + cpu_seconds(psutil.Process(pid))
        used["postgres"] = postgres_cpu_seconds()
        return used

    def wait_healthy(self, name: str, beacon: Path, timeout_s: float = 120.0) -> None:
        proc = self.running[name]
        deadline = time.monotonic() + timeout_s
        while last_beat(beacon) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start; see {self.tmp / (name + '.log')}")
            time.sleep(0.05)

    def stop_all(self) -> None:
        for proc in self.running.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.running.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def beacon_detail(path: Path) -> dict[str, Any]:
    try:
        return dict(orjson.loads(path.read_bytes()))
    except (OSError, ValueError):
        return {}


async def until_leader(beacon: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not beacon_detail(beacon).get("leader"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no leader after {timeout_s:.0f} s ({beacon})")
        await asyncio.sleep(0.1)


# -- watching the bus --------------------------------------------------------------------------------------


@dataclass
class BusWatch:
    """`podgroup.admitted` commit times and `pods.bound` arrival times, by PodGroup uid, straight off core
    NATS. (One admitted event per gang, not one per pod: the watch costs the shared host less.)"""

    admitted_at: dict[str, float] = field(default_factory=dict)
    admitted_seen_at: dict[str, float] = field(default_factory=dict)
    name_of: dict[str, str] = field(default_factory=dict)
    bound_at: dict[str, float] = field(default_factory=dict)
    bound_committed_at: dict[str, float] = field(default_factory=dict)
    pods_of: dict[str, int] = field(default_factory=dict)
    bound_pods: int = 0
    bound_times: list[tuple[float, int, int]] = field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    applied_at: dict[str, float] = field(default_factory=dict)
    """When the client sent each gang's apply, by PodGroup name (recorded by the phases, not the bus)."""
    proposed_at: dict[str, float] = field(default_factory=dict)
    allocation_s: list[float] = field(default_factory=list)
    """From `placement.proposed` to `claims.allocated` arriving, per gang (with `--claims`)."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` holds after some event arrived, or the timeout; returns `done()`."""
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), deadline - time.monotonic())
        return done()

    async def subscribe(self, client: PodwayClient) -> None:
        nc = client.broker.connection
        await nc.subscribe("podway.events.podgroup.admitted", cb=self._on_admitted)
        await nc.subscribe("podway.events.pods.bound", cb=self._on_bound)
        await nc.subscribe("podway.events.pods.running", cb=self._on_running)
        await nc.subscribe("podway.events.pods.succeeded", cb=self._on_succeeded)
        await nc.subscribe("podway.events.placement.proposed", cb=self._on_proposed)
        await nc.subscribe("podway.events.claims.allocated", cb=self._on_allocated)

    async def _on_proposed(self, msg: Any) -> None:
        self.proposed_at[orjson.loads(msg.data)["payload"]["podgroup"]["uid"]] = time.time()

    async def _on_allocated(self, msg: Any) -> None:
        proposed = self.proposed_at.pop(orjson.loads(msg.data)["payload"]["podgroup"]["uid"], None)
        if proposed is not None:
            self.allocation_s.append(time.time() - proposed)

    def gangs(self, prefix: str) -> list[str]:
        """Uids of the admitted PodGroups whose names start with `prefix`."""
        return [uid for uid, name in self.name_of.items() if name.startswith(prefix)]

    async def _on_running(self, msg: Any) -> None:
        self.running += len(orjson.loads(msg.data)["payload"]["pods"])
        self.changed.set()

    async def _on_succeeded(self, msg: Any) -> None:
        self.succeeded += len(orjson.loads(msg.data)["payload"]["pods"])
        self.changed.set()

    async def _on_admitted(self, msg: Any) -> None:
        seen = time.time()
        envelope = orjson.loads(msg.data)
        uid = envelope["payload"]["uid"]
        self.admitted_at[uid] = _occurred(envelope)
        self.admitted_seen_at[uid] = seen
        self.name_of[uid] = envelope["payload"]["name"]

    async def _on_bound(self, msg: Any) -> None:
        now = time.time()
        envelope = orjson.loads(msg.data)
        payload = envelope["payload"]
        pods = len(payload["pods"])
        if payload.get("podgroup"):
            uid = payload["podgroup"]["uid"]
            self.bound_at[uid] = now
            self.bound_committed_at[uid] = _occurred(envelope)
            self.pods_of[uid] = self.pods_of.get(uid, 0) + pods
        self.bound_pods += pods
        self.bound_times.append((now, pods, payload["epoch"]))
        self.changed.set()


def _occurred(envelope: dict[str, Any]) -> float:
    return datetime.fromisoformat(envelope["occurred_at"].replace("Z", "+00:00")).timestamp()


def per_pod(watch: BusWatch, gangs: list[str], value: Callable[[str], float]) -> list[float]:
    """A gang's value once for each of its bound pods, in milliseconds: percentiles are over pods."""
    return [value(uid) * 1000 for uid in gangs for _ in range(watch.pods_of.get(uid, 0))]


def latency_stages(watch: BusWatch, gangs: list[str]) -> dict[str, float]:
    """Where the admitted-to-bound time goes: until admission's relay put `podgroup.admitted` on the bus,
    until the scheduler committed the binding, until its relay put `pods.bound` on the bus."""
    stages: dict[str, Callable[[str], float]] = {
        "admitted_published": lambda u: watch.admitted_seen_at[u] - watch.admitted_at[u],
        "published_to_bind_committed": lambda u: watch.bound_committed_at[u] - watch.admitted_seen_at[u],
        "bind_committed_to_published": lambda u: watch.bound_at[u] - watch.bound_committed_at[u],
    }
    return {
        f"stage_{name}_ms_p{q}": round(percentile(per_pod(watch, gangs, stage), q / 100), 1)
        for name, stage in stages.items()
        for q in (50, 99)
    }


# -- phases ------------------------------------------------------------------------------------------------


def names(prefix: str, count: int) -> Iterator[str]:
    return (f"{prefix}-{i:05d}" for i in range(count))


async def admit(
    client: PodwayClient,
    watch: BusWatch,
    gangs: list[str],
    args: argparse.Namespace,
    *,
    workload: str,
    run_seconds: float = 0.0,
    in_flight: int = 16,
    part: slice = slice(None),
) -> None:
    """Apply the gangs as fast as admission takes them, `in_flight` applies at a time; `part` picks from
    each gang's manifests (the PodGroup first, then its pods)."""
    semaphore = asyncio.Semaphore(in_flight)

    async def one(name: str) -> None:
        async with semaphore:
            manifests = gang_of(args, name, workload, run_seconds)[part]
            watch.applied_at[name] = time.time()
            await client.apply(manifests)

    await asyncio.gather(*(one(name) for name in gangs))


async def wait_bound(watch: BusWatch, expected: int, timeout_s: float) -> None:
    if not await watch.until(lambda: watch.bound_pods >= expected, timeout_s):
        raise RuntimeError(f"only {watch.bound_pods} of {expected} pods were bound in {timeout_s:.0f} s")


async def wait_empty(watch: BusWatch, bound: int, timeout_s: float) -> None:
    """Until every bound pod has succeeded (the fleet is empty again)."""
    if not await watch.until(lambda: watch.succeeded >= bound, timeout_s):
        raise RuntimeError(f"only {watch.succeeded} of {bound} pods succeeded in {timeout_s:.0f} s")


async def paced(
    client: PodwayClient,
    watch: BusWatch,
    args: argparse.Namespace,
    prefix: str,
    rate: float,
    seconds: float,
    most: int,
    run_seconds: float = 0.0,
) -> list[str]:
    """Admit one gang every gang_size / rate seconds (open loop), for `seconds` but at most `most` gangs;
    returns the gang names."""
    interval = args.gang_size / rate
    count = max(1, min(most, int(seconds / interval)))
    started = time.monotonic()
    tasks = []
    gangs = list(names(prefix, count))
    for index, name in enumerate(gangs):
        delay = started + index * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        watch.applied_at[name] = time.time()
        tasks.append(asyncio.create_task(client.apply(gang_of(args, name, run_seconds=run_seconds))))
    await asyncio.gather(*tasks)
    return gangs


def apply_to_bound(watch: BusWatch, gangs: list[str]) -> list[float]:
    """For each bound pod of the gangs (uids), milliseconds from its gang's apply sent to its `pods.bound`."""
    return per_pod(watch, gangs, lambda uid: watch.bound_at[uid] - watch.applied_at[watch.name_of[uid]])


def bus(args: argparse.Namespace, tmp: Path) -> EmbeddedNatsServer | NatsCluster:
    """One embedded nats-server, or with `--nats-cluster N` a cluster of N (streams on all N)."""
    if args.nats_cluster:
        return NatsCluster(tmp / "nats", size=args.nats_cluster).start()
    return EmbeddedNatsServer(data_dir=tmp / "nats").start()


async def _run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from libs.db.migrate import upgrade

    database_url, dropped = await fresh_postgres(args.database_url)
    await upgrade(database_url)
    nats = bus(args, tmp)
    await provision_streams(nats.url, replicas=args.nats_cluster or None)
    env = {
        **os.environ,
        "PODWAY_NATS_URL": nats.url,
        "PODWAY_DATABASE_URL": database_url,
        "PODWAY_LOG_LEVEL": "WARNING",
        "PODWAY_LEASE_SECONDS": str(args.lease_seconds),
        "PODWAY_METRICS_PORT": "0",
    }
    procs = Processes(env, tmp, nats_pids=nats.pids())
    nodes = args.blocks * args.racks_per_block * args.nodes_per_rack
    metrics: dict[str, Any] = _Progress()
    try:
        procs.start("admission", "services.admission.main", tmp / "admission")
        procs.wait_healthy("admission", health_file(tmp / "admission" / "run", "admission"))
        async with PodwayClient(nats.url, timeout_s=120) as client:
            watch = BusWatch()
            await watch.subscribe(client)
            await client.apply([GPU_CLASS, *([claim_template(args.gpus_per_pod)] if args.claims else [])])
            started = time.monotonic()
            procs.start(
                "node_agent",
                "services.node_agent.main",
                tmp / "node_agent",
                PODWAY_CLUSTER_BLOCKS=str(args.blocks),
                PODWAY_CLUSTER_RACKS_PER_BLOCK=str(args.racks_per_block),
                PODWAY_CLUSTER_NODES_PER_RACK=str(args.nodes_per_rack),
                PODWAY_CLUSTER_GPUS_PER_NODE=str(args.gpus_per_node),
            )
            procs.wait_healthy("node_agent", health_file(tmp / "node_agent" / "run", "node_agent"))
            metrics["nodes_registered_s"] = round(time.monotonic() - started, 2)
            if args.claims:
                beacon = health_file(tmp / "dra_allocator" / "run", "dra_allocator")
                procs.start("dra_allocator", "services.dra_allocator.main", tmp / "dra_allocator")
                await until_leader(beacon)

            # 1. Throughput: gangs wait for their Workload (PreEnqueue) until the scheduler has seen them all,
            #    then the Workload is applied and every gang is ready at once.
            beacon_a = health_file(tmp / "scheduler-a" / "run", process_name("scheduler", "a"))
            procs.start("scheduler-a", "services.scheduler.main", tmp / "scheduler-a", PODWAY_INSTANCE="a")
            await until_leader(beacon_a)
            backlog = list(names("tput", args.throughput_gangs))
            started = time.monotonic()
            pods_only, groups_only = slice(1, None), slice(0, 1)
            await admit(
                client, watch, backlog, args, workload=HELD, run_seconds=args.run_seconds, part=pods_only
            )
            metrics["backlog_admitted_s"] = round(time.monotonic() - started, 2)
            backlog_pods = len(backlog) * args.gang_size
            released = time.time()
            await client.apply([workload_manifest(HELD, args.gang_size, args.topology_key)])
            await admit(
                client, watch, backlog, args, workload=HELD, run_seconds=args.run_seconds, part=groups_only
            )
            await wait_bound(watch, backlog_pods, timeout_s=300)
            first, last = watch.bound_times[0][0], watch.bound_times[-1][0]
            throughput = (backlog_pods - watch.bound_times[0][1]) / max(last - first, 1e-6)
            metrics["pods_per_second"] = round(throughput, 1)
            metrics["throughput_pods"] = backlog_pods
            metrics["release_to_all_bound_s"] = round(last - released, 2)
            if args.claims:
                allocation = sorted(watch.allocation_s)
                metrics["throughput_allocation_ms_p50"] = round(percentile(allocation, 0.5) * 1000, 1)
                metrics["throughput_allocation_ms_p99"] = round(percentile(allocation, 0.99) * 1000, 1)
            await client.apply([workload_manifest(SHARED, args.gang_size, args.topology_key)])
            # Gangs whose pods run until the end keep their room.
            held = 0 if args.run_seconds else len(backlog)
            if args.run_seconds:
                await wait_empty(watch, watch.bound_pods, timeout_s=300)
            else:
                await watch.until(lambda: watch.running >= backlog_pods, timeout_s=300)

            # 2. Apply to bound: the client applies gangs as fast as admission takes them; their pods run and
            #    finish while later gangs arrive.
            if args.apply_gangs:
                if not args.run_seconds and held + args.apply_gangs > gang_room(args) - TAKEOVER_GANGS:
                    raise SystemExit("--apply-gangs with pods that never finish needs more than the fleet")
                applied = list(names("apply", args.apply_gangs))
                expected = watch.bound_pods + len(applied) * args.gang_size
                cpu_before, host_before = procs.cpu_seconds(), host_cpu_seconds()
                window_started = time.monotonic()
                await admit(client, watch, applied, args, workload=SHARED, run_seconds=args.run_seconds)
                await wait_bound(watch, expected, timeout_s=300)
                cpu_after, host_after = procs.cpu_seconds(), host_cpu_seconds()
                window = time.monotonic() - window_started
                for reading, start, end in zip(("busy", "steal"), host_before, host_after, strict=True):
                    metrics[f"apply_host_{reading}_cores"] = round((end - start) / window, 2)
                measured = watch.gangs("apply-")
                sent = min(watch.applied_at[name] for name in applied)
                done = max(watch.bound_at[uid] for uid in measured)
                pods = sum(watch.pods_of.get(uid, 0) for uid in measured)
                metrics["apply_to_bound_pods_per_second"] = round(pods / max(done - sent, 1e-6), 1)
                metrics["apply_to_bound_pods"] = pods
                spent = apply_to_bound(watch, measured)
                metrics["apply_to_bound_ms_p50"] = round(statistics.median(spent), 1)
                metrics["apply_to_bound_ms_p99"] = round(percentile(spent, 0.99), 1)
                spent_by = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
                metrics["apply_cpu_ms_per_pod"] = round(sum(spent_by.values()) * 1000 / max(pods, 1), 3)
                for name, seconds in spent_by.items():
                    metrics[f"apply_cpu_ms_per_pod_{name.replace('-', '_')}"] = round(
                        seconds * 1000 / max(pods, 1), 3
                    )
                if args.run_seconds:
                    await wait_empty(watch, watch.bound_pods, timeout_s=300)
                else:
                    held += len(applied)

            # 3. Latency at half the target rate, with a standby waiting.
            procs.start("scheduler-b", "services.scheduler.main", tmp / "scheduler-b", PODWAY_INSTANCE="b")
            procs.wait_healthy(
                "scheduler-b", health_file(tmp / "scheduler-b" / "run", process_name("scheduler", "b"))
            )
            rate = args.latency_rate or throughput / 2
            # The fleet must keep room for the takeover phase's gangs (pods run until the end).
            room = gang_room(args) - held
            cpu_before, host_before = procs.cpu_seconds(), host_cpu_seconds()
            window_started = time.monotonic()
            run_s = args.latency_run_seconds
            if run_s:  # pods finish: the room bounds how many run at once, not how many are admitted
                running_at_once = int(rate * (run_s + 2) / args.gang_size)
                if running_at_once > room - TAKEOVER_GANGS:
                    raise SystemExit(
                        f"--latency-run-seconds {run_s} at {rate} pods/s needs more than the fleet"
                    )
                room = 1_000_000
            bound_before = watch.bound_pods
            gangs = await paced(
                client,
                watch,
                args,
                "lat",
                rate,
                args.latency_seconds,
                room - TAKEOVER_GANGS,
                run_seconds=run_s,
            )
            await wait_bound(watch, bound_before + len(gangs) * args.gang_size, timeout_s=120)
            cpu_after, host_after = procs.cpu_seconds(), host_cpu_seconds()
            window = time.monotonic() - window_started
            for reading, start, end in zip(("busy", "steal"), host_before, host_after, strict=True):
                metrics[f"latency_host_{reading}_cores"] = round((end - start) / window, 2)
            for name, seconds in cpu_after.items():
                spent_s = seconds - cpu_before.get(name, 0.0)
                metrics[f"latency_cpu_ms_per_pod_{name.replace('-', '_')}"] = round(
                    spent_s * 1000 / max(len(gangs) * args.gang_size, 1), 3
                )
            measured = watch.gangs("lat-")
            admitted = [watch.admitted_at[uid] for uid in measured]
            recent = per_pod(watch, measured, lambda uid: watch.bound_at[uid] - watch.admitted_at[uid])
            metrics["latency_rate_pods_per_second"] = round(rate, 1)
            metrics["latency_admitted_pods_per_second"] = round(
                (len(admitted) - 1) * args.gang_size / max(max(admitted) - min(admitted), 1e-6), 1
            )
            metrics["latency_pods"] = len(recent)
            metrics["admitted_to_bound_ms_p50"] = round(statistics.median(recent), 1)
            metrics["admitted_to_bound_ms_p99"] = round(percentile(recent, 0.99), 1)
            metrics["admitted_to_bound_ms_max"] = round(max(recent), 1)
            from_apply = apply_to_bound(watch, measured)
            metrics["latency_apply_to_bound_ms_p50"] = round(statistics.median(from_apply), 1)
            metrics["latency_apply_to_bound_ms_p99"] = round(percentile(from_apply, 0.99), 1)
            metrics |= latency_stages(watch, measured)

            # 4. Takeover: kill the active scheduler; gangs keep arriving.
            epoch = int(beacon_detail(beacon_a).get("epoch") or 1)
            killed_at = time.time()
            procs.running["scheduler-a"].send_signal(signal.SIGKILL)
            after = asyncio.create_task(
                paced(client, watch, args, "takeover", args.gang_size * 4, 2.0, TAKEOVER_GANGS)
            )
            await watch.until(
                lambda: any(e > epoch for _, _, e in watch.bound_times), args.lease_seconds * 10 + 30
            )
            taken = next((t for t, _, e in watch.bound_times if e > epoch), None)
            await after
            if taken is None:
                raise RuntimeError("the standby never bound a gang after the leader was killed")
            metrics["lease_takeover_ms"] = round((taken - killed_at) * 1000, 1)
            if args.claims:
                allocation = sorted(watch.allocation_s)
                metrics["allocations"] = len(allocation)
                metrics["allocation_ms_p50"] = round(percentile(allocation, 0.5) * 1000, 1)
                metrics["allocation_ms_p99"] = round(percentile(allocation, 0.99) * 1000, 1)
    finally:
        procs.stop_all()
        nats.stop()
        await drop_postgres(args.database_url, dropped)
    metrics["nodes"] = nodes
    return dict(metrics)


class _Progress(dict[str, Any]):
    """Metrics that are also printed to stderr as they are measured (a long run shows where it is)."""

    def __setitem__(self, key: str, value: Any) -> None:
        print(f"scheduler-e2e: {key} = {value}", file=sys.stderr, flush=True)
        super().__setitem__(key, value)


def run(args: argparse.Namespace) -> dict[str, Any]:
    resolve_case(args)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="podway-bench-sched-") as tmp:
        metrics = asyncio.run(_run(args, Path(tmp)))
    load_after = os.getloadavg()[0]
    params = {
        "nodes": args.blocks * args.racks_per_block * args.nodes_per_rack,
        "gpus_per_node": args.gpus_per_node,
        "case": args.case,
        "claims": args.claims,
        "gang_size": args.gang_size,
        "gpus_per_pod": args.gpus_per_pod,
        "topology_key": args.topology_key,
        "run_seconds": args.run_seconds,
        "fleet_room_gangs": gang_room(args),
        "fleet_pods_per_second_ceiling": (
            round(gang_room(args) * args.gang_size / args.run_seconds, 1) if args.run_seconds else None
        ),
        "throughput_gangs": args.throughput_gangs,
        "apply_gangs": args.apply_gangs,
        "latency_rate": args.latency_rate,
        "latency_seconds": args.latency_seconds,
        "latency_run_seconds": args.latency_run_seconds,
        "lease_seconds": args.lease_seconds,
        "database": "postgres",
        "nats_servers": args.nats_cluster or 1,
        "stream_replicas": args.nats_cluster or 1,
        # Other processes on the host take CPU from the five processes measured here.
        "host_cpus": os.cpu_count(),
        "scheduling_core": scheduling_core(),
        "host_load_avg_1m_before": round(load_before, 2),
        "host_load_avg_1m_after": round(load_after, 2),
    }
    return {"name": "scheduler-e2e", "params": params, "metrics": metrics}


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.scheduler_e2e [options]`, the same as `podway bench scheduler-e2e`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["scheduler-e2e", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
