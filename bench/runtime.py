"""`podway bench runtime`: the process runtime through the real stack. Admission, the scheduler and one
process-runtime node agent, each its own process, on an embedded nats-server and a fresh SQLite file
(`--database postgres`: a fresh database beside PODWAY_BENCH_DATABASE_URL's); the agent registers this host,
the only node.

Every pod runs one container, `bash -c 'echo $EPOCHREALTIME'`: the first thing the process does is read the
wall clock (microseconds), about a millisecond after its exec, and its log keeps the reading. That is its
start, read back as `podway logs` reads it. (The start time in /proc/PID/stat is coarser: clock ticks, 10 ms
here, counted from boot.) A pod's bound time is the binding's own: `pods.bound`'s `occurred_at`, stamped by
the scheduler in the transaction that commits the binding, a few milliseconds before the commit (the
figures err high). Its created time is `pod.admitted`'s, admission's commit.

1. Bound to started: `--pods` standalone pods applied at `--rate` pods/s (open loop), each running to its
   end; per pod, from its binding to its process's start. Target p99 <= 100 ms. Beside it, created to
   started, what kubelet's pod-startup SLO measures (p99 <= 5 s without image pulls; kubelet's figure runs
   to the watch seeing the pod Running, ours to the process's first instruction).
2. Gang start skew: `--gangs` gangs of `--gang-size` pods (a v1alpha2 Workload, a PodGroup with minCount the
   size), applied one after the other, each once the one before has ended; per gang, from its first process
   start to its last. Target p99 <= 200 ms.
3. Churn: `--short-pods` pods, `--in-flight` applies at a time, each running to its end. Then no process may
   be left below the agent, no pod file, pipe or pidfd open in it, and no more descriptors outside its
   database and bus pools than before the phase (a pool may keep one more connection after a busier phase:
   that is its growth, bounded by its size, not a pod's leak).

Left out: image pulls (none: the command runs on the host), init containers, restarts, programs slower to
start than bash, the agent's Running status write (measured is the process's start, not its report),
GPUs and their devices, pod resource limits (no cgroup or rlimit set up per container), several hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import psutil

from bench.admission import DEFAULT_PG
from bench.backends import backends
from bench.measure import cpu_seconds, percentile
from bench.scheduler_e2e import Processes, until_leader
from libs.client.client import PodwayClient
from libs.runtime.health import health_file
from libs.runtime.pod_logs import log_file, read_run

SINGLE, GANGS, SHORT = "bench-single", "bench-gangs", "bench-short"
"""A namespace per phase: each phase lists only its own pods."""
NODE = "bench-host"
CONTAINER = "main"
KUBELET_POD_STARTUP_SLO_MS = 5000.0
"""Kubernetes' pod-startup SLO: p99 <= 5 s from creation to running, image pulls excluded."""
TARGETS_MS = {"bound_to_started": 100.0, "gang_start_skew": 200.0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pods", type=int, default=200, help="phase 1: pods, one at a time")
    parser.add_argument("--rate", type=float, default=20.0, help="phase 1: pods/s applied (open loop)")
    parser.add_argument("--gangs", type=int, default=20, help="phase 2: gangs, one after the other")
    parser.add_argument("--gang-size", type=int, default=32)
    parser.add_argument("--short-pods", type=int, default=500, help="phase 3: pods through the agent")
    parser.add_argument("--in-flight", type=int, default=16, help="phase 3: applies at a time")
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--database-url", default=os.environ.get("PODWAY_BENCH_DATABASE_URL", DEFAULT_PG))


# -- what the pods are -------------------------------------------------------------------------------------


def pod(name: str, namespace: str, bash: str, group: str | None = None) -> dict[str, Any]:
    """A pod whose process prints its start (the wall clock, microseconds) and ends."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": CONTAINER,
                "image": "bash:5",
                "command": [bash, "-c", "echo $EPOCHREALTIME"],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }
        ],
    }
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def gang(name: str, size: int, bash: str) -> list[dict[str, Any]]:
    """A Workload, its PodGroup (minCount `size`) and `size` pods."""
    policy = {"gang": {"minCount": size}}
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": GANGS},
        "spec": {"podGroupTemplates": [{"name": "worker", "schedulingPolicy": policy}]},
    }
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": f"{name}-0", "namespace": GANGS},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "worker"}},
            "schedulingPolicy": policy,
        },
    }
    return [workload, group, *(pod(f"{name}-0-{i}", GANGS, bash, f"{name}-0") for i in range(size))]


# -- what the bus says -------------------------------------------------------------------------------------


@dataclass
class PodTimes:
    """Per pod uid, when admission stored it and when the scheduler bound it (the events' own times), and
    which pods ended, straight off core NATS."""

    created_at: dict[str, float] = field(default_factory=dict)
    bound_at: dict[str, float] = field(default_factory=dict)
    bound_seen_at: dict[str, float] = field(default_factory=dict)
    """When `pods.bound` reached the benchmark: the scheduler's commit and its relay's publish behind it."""
    succeeded: set[str] = field(default_factory=set)
    """Uids: an event may reach a core-NATS subscriber twice (a relay publishes again when unsure)."""
    failed: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def subscribe(self, client: PodwayClient) -> None:
        nc = client.broker.connection
        await nc.subscribe("podway.events.pod.admitted", cb=self._on_admitted)
        await nc.subscribe("podway.events.pods.bound", cb=self._on_bound)
        await nc.subscribe("podway.events.pods.succeeded", cb=self._on_succeeded)
        await nc.subscribe("podway.events.pods.failed", cb=self._on_failed)

    async def until_ended(self, succeeded: int, timeout_s: float) -> None:
        """Until `succeeded` pods have succeeded in all; a failed pod fails the benchmark."""
        deadline = time.monotonic() + timeout_s
        while len(self.succeeded) < succeeded and not self.failed and time.monotonic() < deadline:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), deadline - time.monotonic())
        if self.failed:
            raise RuntimeError(f"pods failed: {self.failed[:5]}")
        if len(self.succeeded) < succeeded:
            raise RuntimeError(
                f"only {len(self.succeeded)} of {succeeded} pods succeeded in {timeout_s:.0f} s"
            )

    async def _on_admitted(self, msg: Any) -> None:
        envelope = orjson.loads(msg.data)
        self.created_at[envelope["payload"]["uid"]] = occurred(envelope)

    async def _on_bound(self, msg: Any) -> None:
        seen = time.time()
        envelope = orjson.loads(msg.data)
        for placement in envelope["payload"]["pods"]:
            self.bound_at[placement["pod_uid"]] = occurred(envelope)
            self.bound_seen_at.setdefault(placement["pod_uid"], seen)

    async def _on_succeeded(self, msg: Any) -> None:
        self.succeeded.update(p["uid"] for p in orjson.loads(msg.data)["payload"]["pods"])
        self.changed.set()

    async def _on_failed(self, msg: Any) -> None:
        payload = orjson.loads(msg.data)["payload"]
        self.failed += [f"{p['name']}: {payload.get('reason')}" for p in payload["pods"]]
        self.changed.set()


def occurred(envelope: dict[str, Any]) -> float:
    return datetime.fromisoformat(envelope["occurred_at"].replace("Z", "+00:00")).timestamp()


async def process_starts(client: PodwayClient, namespace: str) -> dict[str, tuple[str, float]]:
    """Per pod uid of the namespace: its name and its process's start, read from its log as `podway logs`
    reads it (the directory its agent recorded in its status)."""
    starts = {}
    for found in await client.get("Pod", namespace=namespace):
        name = found["metadata"]["name"]
        path = log_file(Path(found["status"]["podwayRuntime"]["logDir"]), CONTAINER, previous=False)
        if path is None:
            raise RuntimeError(f"pod {name} has no log")
        # bash writes $EPOCHREALTIME with the locale's decimal separator
        starts[found["metadata"]["uid"]] = (name, float(read_run(path).strip().replace(",", ".")))
    return starts


def spans_ms(starts: dict[str, tuple[str, float]], since: dict[str, float]) -> list[float]:
    return [(started - since[uid]) * 1000 for uid, (_, started) in starts.items()]


def figures(prefix: str, values: Iterable[float]) -> dict[str, float]:
    measured = list(values)
    return {
        f"{prefix}_ms_p50": round(percentile(measured, 0.50), 1),
        f"{prefix}_ms_p99": round(percentile(measured, 0.99), 1),
        f"{prefix}_ms_max": round(max(measured, default=0.0), 1),
    }


# -- the phases --------------------------------------------------------------------------------------------


async def bound_to_started(
    client: PodwayClient, times: PodTimes, args: argparse.Namespace, bash: str
) -> dict[str, Any]:
    ended = len(times.succeeded)
    started = time.monotonic()
    applies = []
    for index in range(args.pods):
        delay = started + index / args.rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        applies.append(asyncio.create_task(client.apply([pod(f"single-{index:05d}", SINGLE, bash)])))
    await asyncio.gather(*applies)
    await times.until_ended(ended + args.pods, timeout_s=120)
    starts = await process_starts(client, SINGLE)
    return {
        "pods": len(starts),
        **figures("bound_to_started", spans_ms(starts, times.bound_at)),
        **figures("created_to_started", spans_ms(starts, times.created_at)),
        "kubelet_slo_created_to_started_ms_p99": KUBELET_POD_STARTUP_SLO_MS,
        # Where bound to started goes: the binding's commit and publish, then the agent's part.
        **figures(
            "stage_bound_to_published", [(times.bound_seen_at[u] - times.bound_at[u]) * 1000 for u in starts]
        ),
        **figures("stage_published_to_started", spans_ms(starts, times.bound_seen_at)),
    }


async def gang_skew(
    client: PodwayClient, times: PodTimes, args: argparse.Namespace, bash: str
) -> dict[str, Any]:
    for index in range(args.gangs):
        ended = len(times.succeeded)
        await client.apply(gang(f"gang-{index:03d}", args.gang_size, bash))
        await times.until_ended(ended + args.gang_size, timeout_s=120)
    starts = await process_starts(client, GANGS)
    by_gang: dict[str, list[float]] = {}
    for name, started in starts.values():
        by_gang.setdefault(name.rsplit("-", 1)[0], []).append(started)
    return {
        "gangs": len(by_gang),
        **figures("gang_start_skew", ((max(s) - min(s)) * 1000 for s in by_gang.values())),
        **figures("gang_bound_to_started", spans_ms(starts, times.bound_at)),
    }


async def churn(
    client: PodwayClient, times: PodTimes, args: argparse.Namespace, bash: str, agent: AgentProcess
) -> dict[str, Any]:
    fds_before, cpu_before = agent.descriptors(), cpu_seconds(agent.process)
    semaphore = asyncio.Semaphore(args.in_flight)

    async def one(index: int) -> None:
        async with semaphore:
            await client.apply([pod(f"short-{index:05d}", SHORT, bash)])

    ended, started = len(times.succeeded), time.monotonic()
    await asyncio.gather(*(one(index) for index in range(args.short_pods)))
    await times.until_ended(ended + args.short_pods, timeout_s=300)
    took = time.monotonic() - started
    fds_after = await agent.settled_descriptors(fds_before)
    return {
        "short_pods": args.short_pods,
        "short_pods_per_second": round(args.short_pods / took, 1),
        "short_pod_agent_cpu_ms": round(
            (cpu_seconds(agent.process) - cpu_before) * 1000 / args.short_pods, 2
        ),
        # Every pod has ended and been recorded, so its process was reaped: anything still below the agent
        # (a zombie included) is a leak.
        "leaked_processes": len(agent.process.children(recursive=True)),
        "agent_fds_before": fds_before.total,
        "agent_fds_after": fds_after.total,
        "agent_fds_outside_pools_before": fds_before.outside_pools,
        "agent_fds_outside_pools_after": fds_after.outside_pools,
        "agent_pod_fds_open": fds_after.pods,
    }


@dataclass(frozen=True)
class Descriptors:
    """The agent's open descriptors: its pools' (database connections, sockets: a pool opens one more when
    busier, up to its size, and keeps it), the ones a pod's life opens (its files, a pipe, a pidfd), others."""

    pools: int
    pods: int
    others: int

    @property
    def total(self) -> int:
        return self.pools + self.pods + self.others

    @property
    def outside_pools(self) -> int:
        return self.pods + self.others


@dataclass(frozen=True)
class AgentProcess:
    process: psutil.Process
    pods_dir: Path
    database_file: Path | None

    def descriptors(self) -> Descriptors:
        pools = pods = others = 0
        pooled = ("socket:", str(self.database_file)) if self.database_file else ("socket:",)
        for fd in Path(f"/proc/{self.process.pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith(pooled):
                    pools += 1
                elif target.startswith((str(self.pods_dir), "pipe:", "anon_inode:[pidfd]")):
                    pods += 1
                else:
                    others += 1
        return Descriptors(pools, pods, others)

    async def settled_descriptors(self, before: Descriptors, within_s: float = 5.0) -> Descriptors:
        """The descriptors once those outside the pools are back to `before` (one held for a moment is not a
        leak), or after `within_s`."""
        deadline = time.monotonic() + within_s
        # Another process's descriptors raise no event when they close: poll.
        while (now := self.descriptors()).outside_pools > before.outside_pools:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        return now


# -- the stack ---------------------------------------------------------------------------------------------


async def _run(args: argparse.Namespace, tmp: Path, bash: str) -> dict[str, Any]:
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
            agent = start_services(procs, tmp, database_file(stack.database_url))
            await until_leader(health_file(tmp / "scheduler" / "run", "scheduler"))
            async with PodwayClient(stack.nats_url, timeout_s=120) as client:
                await until_registered(client)
                times = PodTimes()
                await times.subscribe(client)
                metrics = await bound_to_started(client, times, args, bash)
                metrics |= await gang_skew(client, times, args, bash)
                metrics |= await churn(client, times, args, bash, agent)
        finally:
            procs.stop_all()
    return metrics


def database_file(url: str) -> Path | None:
    """The SQLite file of `url`; None for PostgreSQL, whose connections are sockets."""
    from sqlalchemy.engine import make_url

    return Path(make_url(url).database or "") if url.startswith("sqlite") else None


def start_services(procs: Processes, tmp: Path, database: Path | None) -> AgentProcess:
    """Admission, the process-runtime agent (this host, node `NODE`) and the scheduler; returns the agent."""
    procs.start("admission", "services.admission.main", tmp / "admission")
    procs.wait_healthy("admission", health_file(tmp / "admission" / "run", "admission"))
    agent = procs.start(
        "node_agent",
        "services.node_agent.main",
        tmp / "node_agent",
        PODWAY_RUNTIME="process",
        PODWAY_NODE_NAME=NODE,
    )
    procs.wait_healthy("node_agent", health_file(tmp / "node_agent" / "run", "node_agent"))
    procs.start("scheduler", "services.scheduler.main", tmp / "scheduler")
    return AgentProcess(psutil.Process(agent.pid), tmp / "node_agent" / "pods", database)


async def until_registered(client: PodwayClient, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await client.get("Node", NODE):
        if time.monotonic() > deadline:
            raise RuntimeError(f"node {NODE} was not registered in {timeout_s:.0f} s")
        await asyncio.sleep(0.1)


def verdicts(metrics: dict[str, Any]) -> dict[str, bool]:
    return {
        "bound_to_started_target_met": metrics["bound_to_started_ms_p99"] <= TARGETS_MS["bound_to_started"],
        "gang_start_skew_target_met": metrics["gang_start_skew_ms_p99"] <= TARGETS_MS["gang_start_skew"],
        "no_leaks": (
            metrics["leaked_processes"] == 0
            and metrics["agent_pod_fds_open"] == 0
            and metrics["agent_fds_outside_pools_after"] <= metrics["agent_fds_outside_pools_before"]
        ),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    bash = shutil.which("bash")
    if bash is None:
        raise SystemExit("podway bench runtime needs bash on this host (its pods run it)")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="podway-bench-runtime-") as tmp:
        metrics = asyncio.run(_run(args, Path(tmp), bash))
    params = {
        "pods": args.pods,
        "rate": args.rate,
        "gangs": args.gangs,
        "gang_size": args.gang_size,
        "short_pods": args.short_pods,
        "in_flight": args.in_flight,
        "database": args.database,
        "command": "bash -c 'echo $EPOCHREALTIME'",
        "targets_ms_p99": TARGETS_MS,
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
        "host_load_avg_1m_after": round(os.getloadavg()[0], 2),
    }
    return {"name": "runtime", "params": params, "metrics": {**metrics, **verdicts(metrics)}}


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.runtime [options]`, the same as `podway bench runtime`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["runtime", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
