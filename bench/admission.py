"""`podway bench admission`: PodGroups with their pods admitted through the real stack (NATS + database +
the admission service as its own process), with every event published to JetStream."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.backends import backends
from bench.measure import cpu_seconds
from libs.client.client import PodwayClient
from libs.runtime.health import health_file, last_beat

DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--podgroups", type=int, default=1000, help="PodGroups to admit")
    parser.add_argument("--pods-per-group", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=64, help="applies pipelined at once")
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--database-url", default=os.environ.get("PODWAY_BENCH_DATABASE_URL", DEFAULT_PG))


def gang_manifests(index: int, pods: int) -> list[dict[str, Any]]:
    name = f"train-{index:05d}"
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "worker"}},
            "schedulingPolicy": {"gang": {"minCount": pods}},
        },
    }
    members = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "namespace": "bench"},
            "spec": {
                "schedulingGroup": {"podGroupName": name},
                "containers": [
                    {
                        "name": "trainer",
                        "image": "registry.example.com/trainer:v1",
                        "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}},
                    }
                ],
            },
        }
        for i in range(pods)
    ]
    return [group, *members]


WORKLOAD = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "Workload",
    "metadata": {"name": "train", "namespace": "bench"},
    "spec": {"podGroupTemplates": [{"name": "worker", "schedulingPolicy": {"gang": {"minCount": 8}}}]},
}


async def _stream_count(client: PodwayClient) -> int:
    info = await client.broker.connection.jetstream().stream_info("PODWAY_EVENTS")
    return int(info.state.messages)


async def _wait_for_stream(client: PodwayClient, expected: int, deadline: float) -> int:
    """Poll the stream's message count (a remote state: nothing to await on) until it reaches `expected`."""
    count = await _stream_count(client)
    while count < expected and time.perf_counter() < deadline:
        await asyncio.sleep(0.02)
        count = await _stream_count(client)
    return count


async def _load(client: PodwayClient, args: argparse.Namespace) -> dict[str, Any]:
    await client.apply([WORKLOAD])
    await _wait_for_stream(client, 1, time.perf_counter() + 30)
    semaphore = asyncio.Semaphore(args.in_flight)
    latencies: list[float] = []

    async def one(index: int) -> None:
        async with semaphore:
            started = time.perf_counter()
            reply = await client.apply(gang_manifests(index, args.pods_per_group))
            latencies.append((time.perf_counter() - started) * 1000)
            if any(r.outcome != "created" for r in reply.results):
                raise RuntimeError(f"apply {index} was not created: {reply.results[0]}")

    base = await _stream_count(client)
    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(args.podgroups)))
    admitted_s = time.perf_counter() - started
    expected = base + args.podgroups * (1 + args.pods_per_group)
    published = await _wait_for_stream(client, expected, started + 300) - base
    published_s = time.perf_counter() - started
    latencies.sort()
    return {
        "podgroups_per_second": round(args.podgroups / published_s, 1),
        "objects_per_second": round(args.podgroups * (1 + args.pods_per_group) / published_s, 1),
        "admitted_podgroups_per_second": round(args.podgroups / admitted_s, 1),
        "apply_ms_p50": round(statistics.median(latencies), 2),
        "apply_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1], 2),
        "events_published": published,
        "events_expected": expected - base,
    }


def _start_admission(nats_url: str, database_url: str, data_dir: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PODWAY_NATS_URL": nats_url,
        "PODWAY_DATABASE_URL": database_url,
        "PODWAY_DATA_DIR": str(data_dir),
        "PODWAY_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen([sys.executable, "-m", "services.admission.main"], env=env)
    deadline = time.monotonic() + 60
    while last_beat(health_file(data_dir / "run", "admission")) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the admission service did not start")
        time.sleep(0.05)
    return proc


async def _run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    async with backends(args.database, args.database_url, tmp) as stack:
        proc = _start_admission(stack.nats_url, stack.database_url, tmp)
        try:
            service = psutil.Process(proc.pid)
            cpu_before = cpu_seconds(service)
            async with PodwayClient(stack.nats_url, timeout_s=120) as client:
                metrics = await _load(client, args)
            # Robust to a busy host where the rate is not: what one PodGroup costs the service's one core.
            metrics["service_cpu_ms_per_podgroup"] = round(
                (cpu_seconds(service) - cpu_before) * 1000 / args.podgroups, 3
            )
            return metrics
        finally:
            proc.terminate()
            proc.wait(30)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="podway-bench-") as tmp:
        metrics = asyncio.run(_run(args, Path(tmp)))
    params = {
        "podgroups": args.podgroups,
        "pods_per_group": args.pods_per_group,
        "in_flight": args.in_flight,
        "database": args.database,
        "cpus": os.cpu_count(),
    }
    return {"name": "admission", "params": params, "metrics": metrics}


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.admission [options]`, the same as `podway bench admission`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["admission", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
