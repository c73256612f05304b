"""`podway bench kube-api`: the Kubernetes REST API as clients reach it, over HTTPS with the admin bearer token
and the CA of the kubeconfig `podway-api-server` writes, in front of admission and a node agent, every
service its own process on an embedded nats-server and PostgreSQL (a fresh database; `--database sqlite`
for a file).

Stored first, unmeasured: a generated fleet (default 1,000 nodes of 8 GPUs, registered by the node agent)
and `--pods` pods (10,000) spread over `--namespaces` namespaces, applied through admission in bulk. No
scheduler runs, so every pod stays Pending (a pending pod is read with its reason for waiting, which costs
admission more than a bound one). The API server starts last, so that its change feed starts at the stored
fleet rather than reading it back (the node agent registers its 1,000 nodes and their ResourceSlices in one
revision, which the feed reads in pages); before it listens it decodes the stored pods for its lists, as
kube-apiserver fills its watch cache before it serves (0.5 s of the unmeasured setup).

1. List: `kubectl get pods -A` as kubectl asks it (a Table, `limit=--page-size` pages following
   `continue`), `--lists` times one after the other; `list_ms_*` time each whole paginated list, every
   page decoded. `list_json_ms_*` do the same for objects (`-o json`, what informers read).
2. Watch: `--watchers` watch streams on every namespace's pods from the list's resourceVersion, while one
   writer creates and merge-patches pods at `--watch-rate` per second for `--watch-seconds`;
   `watch_ms_*` run, for each write and each watcher, from the write's HTTP response (the change was
   committed) to the first event showing the object at that resourceVersion or later (a watch shows each
   object's latest state: a write superseded before the feed read it arrives as its successor, counted in
   `watch_events_superseded`).
3. Writes: `--clients` clients create and merge-patch pods (in turn) at `--write-rate` requests per second
   in all, open loop: each request has its time fixed in advance and `write_ms_*` run from that time to
   its response, so a slow answer delays and charges the requests queued behind it. Each client's
   connection is opened before the clock starts (clients keep theirs alive). `write_ms_max_by_second`: the
   longest wait of each second's requests, which tells a stall (one bad second) from a run that fell
   behind (every second after one). Meanwhile a thread makes a 4 kB write durable every 10 ms in the
   bench's temporary directory (`write_disk_sync_ms_*`): every commit waits for the disk as long, when the
   database's is the same disk (on a VM's virtual disk, an `fdatasync` now and then takes 40-60 ms, and
   every write in flight waits with it).

The bench's own collector is kept off the phases it times (what it holds is frozen before each): a pause of
the clients' process would be timed as the server's.

Beside each figure, the issue's target and kube-apiserver's SLO (`slo`). CPU seconds per process during each
phase (`*_cpu_s_*`) say where the time goes; the bench process (the clients) shares the host. The host's
busy CPU seconds in each phase and those the hypervisor gave to other machines (`*_host_busy_cpu_s`,
`*_host_stolen_cpu_s`) tell a slow host from slow code.

Left out: the scheduler and the pods' binding and running (no write comes from them meanwhile), pods of
realistic size (these carry one container and no managedFields history, about 1 kB), kubectl's own
rendering, watches while writes are measured, and more than one API server or admission replica.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from bench.admission import DEFAULT_PG
from bench.backends import backends
from bench.measure import DiskSyncProbe, host_cpu_seconds, percentile
from bench.scheduler_e2e import Processes
from libs.client.client import PodwayClient
from libs.runtime.health import health_file
from libs.runtime.memory import freeze_long_lived, tune_collector

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
"""What `kubectl get` asks for."""
MERGE_PATCH = "application/merge-patch+json"
SETUP_BATCH = 500
"""Pods per apply while storing the fleet's pods."""
WRITE_GRACE_S = 10.0
"""How long after the write phase's last scheduled request its clients may still send."""
WATCH_GRACE_S = 30.0
"""How long after the last watched write the watchers may take to show it; what is missing then is missed."""

TARGETS_MS = {"list": 500.0, "watch": 50.0, "write": 50.0}
"""The issue's p99 targets."""
KUBE_SLO_MS = {"list": 30_000.0, "write": 1_000.0}
"""kube-apiserver's SLOs (p99 over 5 minutes): mutating calls 1 s; cluster-scoped lists 30 s at 5,000
nodes. It sets none for watch latency."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--racks-per-block", type=int, default=10)
    parser.add_argument("--nodes-per-rack", type=int, default=20, help="default fleet: 1,000 nodes")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pods", type=int, default=10_000, help="pods stored before measuring")
    parser.add_argument("--namespaces", type=int, default=10, help="the stored pods are spread over these")
    parser.add_argument("--page-size", type=int, default=500, help="kubectl's default --chunk-size")
    parser.add_argument("--lists", type=int, default=20, help="whole paginated lists timed")
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--watch-rate", type=float, default=20.0, help="writes/s while watched")
    parser.add_argument("--watch-seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--write-rate", type=float, default=500.0, help="requests/s offered, all clients")
    parser.add_argument("--write-seconds", type=float, default=10.0)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--database-url", default=os.environ.get("PODWAY_BENCH_DATABASE_URL", DEFAULT_PG))


def pod_manifest(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "bench"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/app:v1",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ]
        },
    }


def namespace_of(args: argparse.Namespace, index: int) -> str:
    return f"bench-{index % args.namespaces}"


# -- the API as a client reaches it ---------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """The API server's URL, the admin token and the CA, as the kubeconfig names them."""

    url: str
    token: str
    ca: Path

    @classmethod
    def of(cls, data_dir: Path) -> Endpoint:
        config = yaml.safe_load((data_dir / "kubeconfig").read_text())
        return cls(
            url=config["clusters"][0]["cluster"]["server"],
            token=config["users"][0]["user"]["token"],
            ca=data_dir / "pki" / "ca.crt",
        )

    def session(self, connections: int) -> aiohttp.ClientSession:
        context = ssl.create_default_context(cafile=str(self.ca))
        return aiohttp.ClientSession(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}", "User-Agent": "podway-bench/1"},
            connector=aiohttp.TCPConnector(ssl=context, limit=connections),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        )


async def read_json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    body = await response.read()
    if response.status >= 300:
        raise RuntimeError(f"{response.method} {response.url.path}: {response.status} {body[:300]!r}")
    found: dict[str, Any] = orjson.loads(body)
    return found


async def list_pods(http: aiohttp.ClientSession, page_size: int, accept: str) -> tuple[int, str]:
    """Every pod, page after page as kubectl reads them: (how many, the first page's resourceVersion)."""
    query = {"limit": str(page_size)}
    count, revision = 0, ""
    while True:
        async with http.get("/api/v1/pods", params=query, headers={"Accept": accept}) as response:
            page = await read_json(response)
        count += len(page.get("rows") or page.get("items") or [])
        revision = revision or page["metadata"]["resourceVersion"]
        token = page["metadata"].get("continue")
        if not token:
            return count, revision
        query = {"limit": str(page_size), "continue": token}


async def create_pod(http: aiohttp.ClientSession, name: str, namespace: str) -> dict[str, Any]:
    async with http.post(f"/api/v1/namespaces/{namespace}/pods", json=pod_manifest(name, namespace)) as done:
        return await read_json(done)


async def patch_pod(http: aiohttp.ClientSession, name: str, namespace: str, step: int) -> dict[str, Any]:
    body = orjson.dumps({"metadata": {"labels": {"step": str(step)}}})
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    async with http.patch(path, data=body, headers={"Content-Type": MERGE_PATCH}) as done:
        return await read_json(done)


def summary(prefix: str, latencies_ms: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_ms_p50": round(percentile(latencies_ms, 0.5), 1),
        f"{prefix}_ms_p99": round(percentile(latencies_ms, 0.99), 1),
        f"{prefix}_ms_max": round(max(latencies_ms, default=0.0), 1),
    }


# -- the phases -------------------------------------------------------------------------------------------


async def measure_lists(http: aiohttp.ClientSession, args: argparse.Namespace) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for prefix, accept, times in (("list", TABLE_ACCEPT, args.lists), ("list_json", "application/json", 3)):
        spent: list[float] = []
        for _ in range(times):
            started = time.perf_counter()
            count, _ = await list_pods(http, args.page_size, accept)
            spent.append((time.perf_counter() - started) * 1000)
            if count < args.pods:
                raise RuntimeError(f"a paginated list ({prefix}) returned {count} of {args.pods} pods")
        metrics |= summary(prefix, spent)
        metrics[f"{prefix}_ms_mean"] = round(statistics.fmean(spent), 1)
        # The first list after the start: it finds the pods decoded at start when nothing changed since.
        metrics[f"{prefix}_ms_first"] = round(spent[0], 1)
    metrics["list_repetitions"] = args.lists
    return metrics


@dataclass(eq=False)
class Watcher:
    """One watch stream: when each object's revisions arrived, in arrival order."""

    seen: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, http: aiohttp.ClientSession, since: str, seconds: float) -> None:
        query = {"watch": "true", "resourceVersion": since, "timeoutSeconds": str(int(seconds) + 90)}
        async with http.get("/api/v1/pods", params=query) as response:
            if response.status != 200:
                raise RuntimeError(f"watch: {response.status} {await response.text()}")
            self.ready.set()
            async for line in response.content:
                arrived = time.perf_counter()
                metadata = orjson.loads(line)["object"]["metadata"]
                revision = int(metadata["resourceVersion"])
                self.seen.setdefault(metadata.get("name"), []).append((revision, arrived))

    def delivered(self, name: str, revision: int) -> tuple[float, bool] | None:
        """When the watch first showed `name` at `revision` or later, and whether it was that very revision.
        A watch shows each object's latest state: a write superseded before the feed read it arrives as the
        state that superseded it."""
        for seen, arrived in self.seen.get(name, ()):
            if seen >= revision:
                return arrived, seen == revision
        return None


async def measure_watches(
    endpoint: Endpoint, http: aiohttp.ClientSession, args: argparse.Namespace
) -> dict[str, Any]:
    _, since = await list_pods(http, args.page_size, "application/json")
    watchers = [Watcher() for _ in range(args.watchers)]
    async with endpoint.session(args.watchers) as streams:
        tasks = [asyncio.create_task(w.run(streams, since, args.watch_seconds)) for w in watchers]
        await asyncio.wait_for(asyncio.gather(*(w.ready.wait() for w in watchers)), 60)
        await asyncio.sleep(0.5)  # each stream's subscription follows its response's headers
        committed = await _watched_writes(http, args)
        await _all_delivered(watchers, committed, WATCH_GRACE_S)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    deliveries = [(w.delivered(name, rv), at) for w in watchers for (name, rv), at in committed.items()]
    latencies = [(found[0] - at) * 1000 for found, at in deliveries if found]
    return {
        **summary("watch", latencies),
        "watch_events": len(latencies),
        "watch_events_missed": len(deliveries) - len(latencies),
        "watch_events_superseded": sum(1 for found, _ in deliveries if found and not found[1]),
        "watch_writes": len(committed),
    }


async def _all_delivered(
    watchers: list[Watcher], committed: dict[tuple[str, int], float], grace_s: float
) -> None:
    """Returns once every watcher showed every write, or after `grace_s` (what is missing then is missed)."""
    deadline = time.perf_counter() + grace_s
    while time.perf_counter() < deadline:
        if all(w.delivered(name, rv) for w in watchers for name, rv in committed):
            return
        await asyncio.sleep(0.02)


async def _watched_writes(
    http: aiohttp.ClientSession, args: argparse.Namespace
) -> dict[tuple[str, int], float]:
    """Creates and patches in turn at the watch rate: when each write's response returned, by the (name,
    resourceVersion) its event will carry."""
    committed: dict[tuple[str, int], float] = {}
    created: list[str] = []
    started = time.perf_counter()
    for step in range(int(args.watch_rate * args.watch_seconds)):
        await _until(started + step / args.watch_rate)
        if step % 2 == 0 or not created:
            created.append(f"watched-{step}")
            written = await create_pod(http, created[-1], "bench-watch")
        else:
            written = await patch_pod(http, created[-1], "bench-watch", step)
        metadata = written["metadata"]
        committed[(metadata["name"], int(metadata["resourceVersion"]))] = time.perf_counter()
    return committed


async def measure_writes(endpoint: Endpoint, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    per_client = int(args.write_rate * args.write_seconds) // args.clients
    results: list[tuple[float, float, str]] = []  # (scheduled, answered or the deadline, outcome)

    async def client(index: int, http: aiohttp.ClientSession) -> None:
        name = ""
        for step in range(per_client):
            scheduled = started + (index + step * args.clients) / args.write_rate
            if time.perf_counter() > deadline:
                results.append((scheduled, deadline, "unsent"))
                continue
            await _until(scheduled)
            namespace = namespace_of(args, index)
            outcome = "ok"
            try:
                if step % 2 == 0:
                    name = f"written-{index}-{step}"
                    await create_pod(http, name, namespace)
                else:
                    await patch_pod(http, name, namespace, step)
            except RuntimeError:
                outcome = "error"
            results.append((scheduled, time.perf_counter(), outcome))

    async with endpoint.session(args.clients) as http:
        await connect(http, args.clients)
        started = time.perf_counter() + 0.2
        deadline = started + args.write_seconds + WRITE_GRACE_S
        with DiskSyncProbe(tmp) as disk:
            await asyncio.gather(*(client(i, http) for i in range(args.clients)))
    answered = [at for _, at, outcome in results if outcome != "unsent"]
    return {
        # Requests never sent count from their time to the deadline: the least they would have waited.
        **summary("write", [(at - scheduled) * 1000 for scheduled, at, _ in results]),
        "write_requests": len(results),
        "write_errors": sum(1 for *_, outcome in results if outcome == "error"),
        "write_unsent": len(results) - len(answered),
        "write_offered_per_second": args.write_rate,
        "write_achieved_per_second": round(
            len(answered) / (max(answered, default=started) - started or 1), 1
        ),
        "write_ms_max_by_second": worst_by_second([(s - started, at - s) for s, at, _ in results]),
        **disk.summary("write"),
    }


def worst_by_second(latencies: list[tuple[float, float]]) -> list[float]:
    """The longest wait of the requests due in each second (from their due time, in seconds): a stall of
    the host shows as one bad second, a run that fell behind as every second after it."""
    worst: dict[int, float] = {}
    for due, waited in latencies:
        second = max(0, int(due))
        worst[second] = max(worst.get(second, 0.0), waited * 1000)
    return [round(worst.get(second, 0.0), 1) for second in range(max(worst, default=-1) + 1)]


async def connect(http: aiohttp.ClientSession, connections: int) -> None:
    """Open every connection before the clock starts, as clients keep theirs alive: a TLS handshake is not a
    write's latency."""

    async def one() -> None:
        async with http.get("/version") as response:
            await response.read()

    await asyncio.gather(*(one() for _ in range(connections)))


async def _until(moment: float) -> None:
    delay = moment - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


# -- the stack --------------------------------------------------------------------------------------------


async def store_pods(client: PodwayClient, args: argparse.Namespace) -> None:
    """The fleet's pods, created through admission in bulk (four applies in flight)."""
    semaphore = asyncio.Semaphore(4)

    async def batch(first: int) -> None:
        last = min(first + SETUP_BATCH, args.pods)
        manifests = [pod_manifest(f"pod-{i:05d}", namespace_of(args, i)) for i in range(first, last)]
        async with semaphore:
            reply = await client.apply(manifests, create_only=True)
        refused = [r for r in reply.results if r.outcome != "created"]
        if refused:
            raise RuntimeError(f"storing pods: {refused[0]}")

    await asyncio.gather(*(batch(first) for first in range(0, args.pods, SETUP_BATCH)))


async def wait_for_nodes(http: aiohttp.ClientSession, expected: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        async with http.get("/api/v1/nodes") as response:
            registered = len((await read_json(response))["items"])
        if registered >= expected:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{registered} of {expected} nodes registered")
        await asyncio.sleep(0.5)


class Phases:
    """CPU seconds each process spends in each phase."""

    def __init__(self, procs: Processes) -> None:
        self.procs = procs
        self.metrics: dict[str, Any] = {}

    async def run(self, name: str, phase: Callable[[], Any]) -> None:
        # The clients' own collections would be timed as the server's latency: what the bench holds so far
        # (the fleet stored, the lists read) is put out of the collector's reach first.
        gc.collect()
        freeze_long_lived()
        before, host_before = self.procs.cpu_seconds(), host_cpu_seconds()
        self.metrics |= await phase()
        after, host_after = self.procs.cpu_seconds(), host_cpu_seconds()
        for process, seconds in after.items():
            self.metrics[f"{name}_cpu_s_{process}"] = round(seconds - before.get(process, 0.0), 2)
        # The host's CPU busy in all (what else runs counts) and the time the hypervisor gave elsewhere.
        self.metrics[f"{name}_host_busy_cpu_s"] = round(host_after[0] - host_before[0], 2)
        self.metrics[f"{name}_host_stolen_cpu_s"] = round(host_after[1] - host_before[1], 2)


async def _run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    async with backends(args.database, args.database_url, tmp) as stack:
        env = {
            **os.environ,
            "PODWAY_NATS_URL": stack.nats_url,
            "PODWAY_DATABASE_URL": stack.database_url,
            "PODWAY_LOG_LEVEL": "WARNING",
            "PODWAY_METRICS_PORT": "0",
            "PODWAY_API_PORT": "0",
        }
        procs = Processes(env, tmp, nats_pids=[stack.nats_pid] if stack.nats_pid else [])
        try:
            return await _measure(args, procs, stack.nats_url, tmp)
        finally:
            procs.stop_all()


async def _measure(args: argparse.Namespace, procs: Processes, nats_url: str, tmp: Path) -> dict[str, Any]:
    started = time.perf_counter()
    _start(procs, tmp, "admission")
    _start(procs, tmp, "node_agent", **cluster_env(args))
    async with PodwayClient(nats_url, timeout_s=120) as client:
        await store_pods(client, args)
    # Last: its change feed starts after the revisions stored by then (see the module's docstring).
    _start(procs, tmp, "api_server")
    endpoint = Endpoint.of(tmp / "api_server")
    phases = Phases(procs)
    async with endpoint.session(4) as http:
        await wait_for_nodes(http, nodes_of(args))
        phases.metrics["setup_s"] = round(time.perf_counter() - started, 1)
        await phases.run("list", lambda: measure_lists(http, args))
        await phases.run("watch", lambda: measure_watches(endpoint, http, args))
    await phases.run("write", lambda: measure_writes(endpoint, args, tmp))
    return phases.metrics


def _start(procs: Processes, tmp: Path, name: str, **env: str) -> None:
    procs.start(name, f"services.{name}.main", tmp / name, **env)
    procs.wait_healthy(name, health_file(tmp / name / "run", name))


def cluster_env(args: argparse.Namespace) -> dict[str, str]:
    return {
        "PODWAY_CLUSTER_BLOCKS": str(args.blocks),
        "PODWAY_CLUSTER_RACKS_PER_BLOCK": str(args.racks_per_block),
        "PODWAY_CLUSTER_NODES_PER_RACK": str(args.nodes_per_rack),
        "PODWAY_CLUSTER_GPUS_PER_NODE": str(args.gpus_per_node),
    }


def nodes_of(args: argparse.Namespace) -> int:
    return int(args.blocks * args.racks_per_block * args.nodes_per_rack)


def slo(metrics: dict[str, Any]) -> dict[str, Any]:
    """Each p99 beside the issue's target and kube-apiserver's SLO."""
    found = {}
    for name, target in TARGETS_MS.items():
        p99 = metrics[f"{name}_ms_p99"]
        measured = metrics.get(f"{name}_events", 1) > 0
        found[name] = {
            "p99_ms": p99 if measured else None,
            "target_p99_ms": target,
            "meets_target": measured and p99 <= target,
            "kube_apiserver_slo_p99_ms": KUBE_SLO_MS.get(name),
        }
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    tune_collector()  # as every service runs
    with tempfile.TemporaryDirectory(prefix="podway-bench-kube-api-") as tmp:
        metrics = asyncio.run(_run(args, Path(tmp)))
    params = {
        "nodes": nodes_of(args),
        "pods": args.pods,
        "namespaces": args.namespaces,
        "page_size": args.page_size,
        "lists": args.lists,
        "watchers": args.watchers,
        "watch_rate": args.watch_rate,
        "watch_seconds": args.watch_seconds,
        "clients": args.clients,
        "write_rate": args.write_rate,
        "write_seconds": args.write_seconds,
        "database": args.database,
        "host_cpus": os.cpu_count(),
        # Other processes on the host take CPU from the ones measured here.
        "host_load_avg_1m_before": round(load_before, 2),
        "host_load_avg_1m_after": round(os.getloadavg()[0], 2),
    }
    return {"name": "kube-api", "params": params, "metrics": metrics, "slo": slo(metrics)}


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.kube_api [options]`, the same as `podway bench kube-api`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["kube-api", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
