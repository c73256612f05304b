"""A seeded chaos run: `podway up` (every service, the router on its emulators) on a private PostgreSQL cluster,
a mixed load of gang Jobs (rack-constrained, high-priority ones that must preempt, DRA claims) and inference
requests (sync and queued), while every service is killed with SIGKILL, each leased service is paused past its
lease, a node running pods is taken away until it is lost and then brought back, the embedded nats-server is
killed (or, with `--nats-cluster 3`, a server of a 3-node JetStream cluster holding every stream on all three
is killed and restarted) and PostgreSQL crashes and comes back. With `--postgres-failover` the cluster is a
primary and a synchronous standby (reached through a multi-host URL), and the primary also dies for good while
its standby is promoted. Afterwards every Job must have reached a decision, every accepted queued request
exactly one outcome, and `podway check` must find nothing.

`make soak` runs the full size (`python -m tests.chaos.harness --jobs 2000 --requests 5000`; `make soak
SOAK_NATS_CLUSTER=3` on the cluster); CI runs a smoke (tests/chaos/test_chaos_smoke.py)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml

from libs.api.annotations import run_seconds
from libs.client.audit_gaps import audit_gaps
from libs.client.client import PodwayClient
from libs.client.commands.router import RouterClient, user_call
from libs.core.invariants import check
from libs.db.engine import create_engine
from libs.db.run_records import load_records
from libs.db.schema import objects
from libs.messaging.rpc import RpcError
from tests.integration.pg_failover.postgres_pair import PostgresPair
from tests.integration.reliability.private_postgres import PrivatePostgres
from tests.nats_cluster import NatsCluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deploy" / "examples"
SERVICES = ("admission", "scheduler", "preemptor", "dra_allocator", "node_agent", "llm_router")
LEASED = ("scheduler", "preemptor", "dra_allocator")
LEASE_S = 3.0
NODE_HEALTH = {
    "PODWAY_NODE_HEARTBEAT_SECONDS": "1",
    "PODWAY_NODE_MONITOR_GRACE_SECONDS": "15",
    "PODWAY_NODE_EVICTION_SECONDS": "6",
}
"""Short node health timings: a node taken away is NotReady after 15 s of silence and lost 6 s later (a
restarted node agent beats within seconds; PostgreSQL's crash holds beats for a few)."""
NODE_LOST_AFTER_S = 15 + 6
LOSE_PATIENCE_S = 60.0
"""How long the node-loss fault looks for a node running pods before it is skipped."""
FAULTS = (
    *(f"kill:{s}" for s in SERVICES),
    *(f"pause:{s}" for s in LEASED),
    "lose:node",
    "kill:nats-server",
    "crash:postgres",
)
POSTGRES_FAILOVER = "failover:postgres"
"""With `ChaosPlan.postgres_failover` (`--postgres-failover`): the stack runs on a primary and a synchronous
standby, and the primary also dies for good while its standby is promoted (`PostgresFailover`)."""

NATS_NODE_DOWN_S = 5.0
"""How long a killed server of the NATS cluster stays down before it is started again (same store)."""


def faults_for(plan: ChaosPlan) -> tuple[str, ...]:
    """Every fault kind; on a NATS cluster a server of it is killed and restarted instead of the one server;
    with `postgres_failover`, the failover too."""
    faults = FAULTS
    if plan.nats_cluster:
        faults = tuple("kill:nats-node" if fault == "kill:nats-server" else fault for fault in faults)
    return (*faults, POSTGRES_FAILOVER) if plan.postgres_failover else faults


@dataclass(frozen=True)
class ChaosPlan:
    seed: int = 7
    jobs: int = 40
    requests: int = 120
    fault_window_s: float = 45.0
    deadline_s: float = 240.0
    fault_rounds: int = 1
    """How many times each fault kind strikes, at seeded moments inside the window."""
    postgres_failover: bool = False
    nats_cluster: int = 0
    """Servers of the JetStream cluster the stack runs on, every stream on all of them; 0: the embedded one."""

    @property
    def faults(self) -> tuple[str, ...]:
        return faults_for(self)


@dataclass
class ChaosReport:
    seed: int
    jobs: int = 0
    pods: int = 0
    jobs_decided: int = 0
    jobs_preempted: int = 0
    requests: int = 0
    requests_queued: int = 0
    requests_failed: int = 0
    requests_without_outcome: int = 0
    audit_events_lost: int = 0
    faults_injected: list[str] = field(default_factory=list)
    nodes_lost: list[str] = field(default_factory=list)
    node_lost_events: int = 0
    pods_failed_node_lost: int = 0
    invariants_violated: int = 0
    violations: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list, repr=False)
    """Sync requests answered: each should have its audit row (a router crash may lose its flush window)."""
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return (
            self.invariants_violated == 0
            and self.jobs_decided == self.jobs
            and self.requests_without_outcome == 0
        )


# --- the load ------------------------------------------------------------------------------------------------


def job(
    name: str,
    pods: int,
    gpus: int,
    *,
    seconds: int,
    priority: str = "batch",
    rack: bool = False,
    claim: bool = False,
) -> dict[str, Any]:
    annotations = {"podway.io/topology-key": "topology.example.com/rack"} if rack else {}
    container: dict[str, Any] = {
        "name": "trainer",
        "image": "registry.example.com/trainer:v1",
        "resources": {"requests": {"cpu": "4", "memory": "16Gi"}},
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": priority,
        "containers": [container],
    }
    if claim:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus-same-numa"}]
        container["resources"]["claims"] = [{"name": "gpus"}]
    elif gpus:
        container["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": {
            "completionMode": "Indexed",
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 6,
            "template": {"metadata": {"annotations": {"podway.io/run-seconds": str(seconds)}}, "spec": spec},
        },
    }


def load(plan: ChaosPlan) -> list[dict[str, Any]]:
    """Seven racks' worth of long low-priority gangs first, then high-priority rack gangs that only fit by
    preempting some, then a seeded mix of small gangs (some rack-bound, some with DRA claims)."""
    rng = random.Random(plan.seed)
    fillers = [job(f"filler-{i}", 8, 8, seconds=30, rack=True) for i in range(min(7, plan.jobs // 4))]
    urgent = [job(f"urgent-{i}", 8, 8, seconds=3, priority="high-priority", rack=True) for i in range(2)]
    small = []
    for i in range(max(0, plan.jobs - len(fillers) - len(urgent))):
        shape = rng.random()
        if shape < 0.25:
            small.append(job(f"dra-{i}", rng.choice([1, 2]), 0, seconds=rng.randint(1, 3), claim=True))
        else:
            small.append(
                job(
                    f"small-{i}",
                    rng.choice([1, 2, 4]),
                    rng.choice([1, 2]),
                    seconds=rng.randint(1, 3),
                    rack=shape < 0.6,
                )
            )
    return [*fillers, *urgent, *small]


# --- the stack -----------------------------------------------------------------------------------------------


def podway(data_dir: Path, *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "libs.client.cli", *args, "--data-dir", str(data_dir)]
    env = {**os.environ, "PODWAY_LEASE_SECONDS": str(LEASE_S), **NODE_HEALTH}
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )


def stack_info(data_dir: Path) -> dict[str, Any]:
    info: dict[str, Any] = json.loads((data_dir / "run" / "stack.json").read_text())
    return info


def service_pid(data_dir: Path, service: str) -> int | None:
    pid = stack_info(data_dir)["services"].get(service)
    return int(pid) if pid else None


def start_standbys(data_dir: Path) -> list[subprocess.Popen[bytes]]:
    """A second replica of each leased service, on the stack's bus and database: when the leader is paused
    past its lease the standby takes over, and the paused leader's later writes must be refused."""
    info = stack_info(data_dir)
    env = {
        **os.environ,
        "PODWAY_NATS_URL": info["nats_url"],
        "PODWAY_DATABASE_URL": info["database_url"],
        "PODWAY_DATA_DIR": info["data_dir"],
        "PODWAY_LEASE_SECONDS": str(LEASE_S),
        "PODWAY_INSTANCE": "1",
        **NODE_HEALTH,
    }
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    standbys = []
    for service in LEASED:
        with (logs / f"{service}-standby.log").open("wb") as log:
            command = [sys.executable, "-m", f"services.{service}.main"]
            standbys.append(
                subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
    return standbys


def stop_standbys(standbys: list[subprocess.Popen[bytes]]) -> None:
    for process in standbys:
        process.terminate()
    for process in standbys:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


# --- the faults ----------------------------------------------------------------------------------------------


class Faults:
    def __init__(
        self,
        data_dir: Path,
        postgres: PrivatePostgres | PostgresPair,
        report: ChaosReport,
        client: PodwayClient,
        rng: random.Random,
        cluster: NatsCluster | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.postgres = postgres
        self.report = report
        self.client = client
        self.rng = rng
        self.cluster = cluster

    async def inject(self, fault: str) -> None:
        action, _, target = fault.partition(":")
        if action == "kill" and target == "nats-server":
            _signal(stack_info(self.data_dir)["nats_pid"], signal.SIGKILL)
        elif action == "kill" and target == "nats-node":
            assert self.cluster is not None
            index = self.rng.choice([i for i, node in enumerate(self.cluster.nodes) if node.running])
            self.cluster.kill(index)
            await asyncio.sleep(NATS_NODE_DOWN_S)
            await asyncio.to_thread(self.cluster.restart, index)
        elif action == "kill":
            pid = service_pid(self.data_dir, target)
            if pid is None:
                return
            _signal(pid, signal.SIGKILL)
        elif action == "pause":
            pid = service_pid(self.data_dir, target)
            if pid is None:
                return
            _signal(pid, signal.SIGSTOP)
            await asyncio.sleep(LEASE_S * 2)  # past its lease: a paused leader must not write when it wakes
            # The supervisor may have replaced it meanwhile (its health beats stopped): nothing to wake then.
            _signal(pid, signal.SIGCONT)
        elif action == "lose":
            node = await self._take_busy_node_away()
            if node is None:
                return
            # Past the grace period and the eviction timeout: the node is lost and its pods are failed.
            await asyncio.sleep(NODE_LOST_AFTER_S + 2)
            await self._power(node, "node-up")
            self.report.nodes_lost.append(node)
        elif action == "crash":
            primary = self.postgres.primary if isinstance(self.postgres, PostgresPair) else self.postgres
            await asyncio.to_thread(primary.kill)
            await asyncio.sleep(1.0)
            await asyncio.to_thread(primary.start)
        elif action == "failover" and isinstance(self.postgres, PostgresPair):
            await PostgresFailover(self.postgres).strike()
        self.report.faults_injected.append(fault)

    async def _busy_node(self) -> str | None:
        """The node whose running pod finishes last (seeded choice among ties), if one runs pods long enough to
        be there when the node is lost; None now otherwise."""
        pods = await _retrying(lambda: self.client.get("Pod", all_namespaces=True))
        finishing = {
            p["spec"]["nodeName"]: _finishes_at(p)
            for p in sorted(pods, key=_finishes_at)
            if p.get("spec", {}).get("nodeName") and p.get("status", {}).get("phase") == "Running"
        }
        latest = max(finishing.values(), default=0.0)
        if latest - time.time() <= NODE_LOST_AFTER_S / 2:
            return None
        return str(self.rng.choice(sorted(n for n, at in finishing.items() if at == latest)))

    async def _take_busy_node_away(self) -> str | None:
        """Take away a node that runs pods, within `LOSE_PATIENCE_S`; one whose pods ended meanwhile
        (preempted, finished) is brought back at once and another chosen, so that pods do die with the node.
        None when no node ran pods long enough meanwhile (late in a long run: the fault is skipped)."""
        deadline = time.monotonic() + LOSE_PATIENCE_S
        while time.monotonic() < deadline:
            node = await self._busy_node()
            if node is None:
                await asyncio.sleep(1.0)
                continue
            answer = await self._power(node, "node-down")
            died = re.search(r"(\d+) pod\(s\) died", answer)
            if died is None or int(died.group(1)) > 0:
                return node
            await self._power(node, "node-up")
        return None

    async def _power(self, node: str, verb: str) -> str:
        """`podway cluster node-down|node-up NODE`, as an operator runs it; again while the agent restarts.
        Returns what it printed."""
        for _ in range(30):
            done = await asyncio.to_thread(podway, self.data_dir, "cluster", verb, node)
            if done.returncode == 0:
                return done.stdout
            await asyncio.sleep(1.0)
        raise RuntimeError(f"podway cluster {verb} {node} kept failing: {done.stdout}{done.stderr}")

    async def run(self, plan: ChaosPlan) -> None:
        rng = self.rng
        strikes = [fault for _ in range(plan.fault_rounds) for fault in plan.faults]
        # A node is taken away in the first half of the window, while the long gangs still run on it.
        schedule = sorted(
            (rng.uniform(*_strike_window(fault, plan.fault_window_s)), fault) for fault in strikes
        )
        started = time.monotonic()
        for at, fault in schedule:
            await asyncio.sleep(max(0.0, at - (time.monotonic() - started)))
            await self.inject(fault)


class PostgresFailover:
    """The primary dies (SIGKILL to all its processes) and its synchronous standby is promoted, as a failover
    manager would; the stack finds the new primary through its multi-host URL. A while later the dead one
    comes back as the new primary's standby, so that the next failover has a standby to promote."""

    REJOIN_AFTER_S = 2.0
    """How long the new primary runs alone (asynchronously: it has no standby to wait for)."""

    def __init__(self, pair: PostgresPair) -> None:
        self.pair = pair

    async def strike(self) -> None:
        await asyncio.to_thread(self.pair.fail_over)
        await asyncio.sleep(self.REJOIN_AFTER_S)
        await asyncio.to_thread(self.pair.rejoin)


def _strike_window(fault: str, window_s: float) -> tuple[float, float]:
    """When a fault may strike: a node is taken away in the first half of the window, while the long gangs
    still run on it; PostgreSQL fails over in the second half, so that its promotion and the rejoining
    standby (seconds) do not hold back the node loss."""
    if fault == "lose:node":
        return 3.0, window_s / 2
    if fault == POSTGRES_FAILOVER:
        return window_s / 2, window_s
    return 3.0, window_s


# --- the run -------------------------------------------------------------------------------------------------


async def _retrying(action: Callable[[], Any], *, attempts: int = 60) -> Any:
    for attempt in range(attempts):
        try:
            return await action()
        except (RpcError, OSError, TimeoutError):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    return None


async def _apply(client: PodwayClient, manifests: list[dict[str, Any]], attempts: int = 60) -> None:
    """Apply, again and again for what the server failed to write (its database or bus was down): a caller
    told `Internal error occurred` retries, as kubectl users do."""
    for _ in range(attempts):
        reply = await _retrying(lambda pending=manifests: client.apply(pending))  # type: ignore[misc]
        failed = {(r.kind, r.name) for r in reply.results if r.message.startswith("Internal error occurred")}
        manifests = [m for m in manifests if (m["kind"], m["metadata"]["name"]) in failed]
        if not manifests:
            return
        await asyncio.sleep(1.0)
    raise RuntimeError(f"{len(manifests)} manifests were never written")


async def _apply_load(client: PodwayClient, jobs: list[dict[str, Any]]) -> None:
    """The fillers first, and once they run the rest, so that the high-priority gangs find the racks full."""
    fillers = [j for j in jobs if j["metadata"]["name"].startswith("filler-")]
    rest = [j for j in jobs if j not in fillers]
    await _apply(client, fillers)
    wanted = sum(j["spec"]["parallelism"] for j in fillers)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            pods = await client.get("Pod", namespace="ml")
        except (RpcError, OSError, TimeoutError):
            pods = []
        running = [
            p
            for p in pods
            if p["metadata"]["name"].startswith("filler-")
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        if len(running) >= wanted:
            break
        await asyncio.sleep(0.5)
    for start in range(0, len(rest), 10):
        batch = rest[start : start + 10]
        await _apply(client, batch)
        await asyncio.sleep(0.5)


async def _ask(client: PodwayClient, plan: ChaosPlan, rng: random.Random, report: ChaosReport) -> list[str]:
    router = RouterClient(client, timeout_s=10)
    queued: list[str] = []
    for i in range(plan.requests):
        call = user_call("search-answer", f"chaos question {i}", max_tokens=16)
        try:
            if rng.random() < 0.5:
                queued.append((await router.submit(call)).request_id)
            else:
                report.answered.append((await router.infer(call)).request_id)
        except Exception:
            report.requests_failed += 1  # refused while the bus or the router was down: the caller knows
        report.requests += 1
        await asyncio.sleep(plan.fault_window_s / max(1, plan.requests))
    report.requests_queued = len(queued)
    return queued


def _decided(job_object: dict[str, Any]) -> bool:
    conditions = (job_object.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


async def _wait_decided(database_url: str, names: set[str], deadline: float) -> int:
    """How many of the Jobs reached a decision, read from the database (a list of thousands of Jobs is more
    than one bus message carries), once all have or at the deadline."""
    decided = 0
    engine = create_engine(database_url)
    try:
        while time.monotonic() < deadline:
            try:
                async with engine.connect() as connection:
                    rows = (
                        await connection.execute(
                            sa.select(objects.c.name, objects.c.status).where(objects.c.kind == "Job")
                        )
                    ).all()
            except (OSError, sa.exc.SQLAlchemyError):
                await asyncio.sleep(1.0)
                continue
            decided = sum(1 for row in rows if row.name in names and _decided({"status": row.status}))
            if decided == len(names):
                return decided
            await asyncio.sleep(1.0)
    finally:
        await engine.dispose()
    return decided


async def _outcomes(client: PodwayClient, request_ids: list[str], deadline: float) -> int:
    missing = set(request_ids)
    while missing and time.monotonic() < deadline:
        for request_id in sorted(missing):
            try:
                story = await client.events(correlation_id=request_id)
            except (RpcError, OSError, TimeoutError):
                break
            if any(e["type"] in ("inference.completed", "inference.failed") for e in story.events):
                missing.discard(request_id)
        await asyncio.sleep(1.0)
    return len(missing)


async def run(plan: ChaosPlan, workdir: Path) -> ChaosReport:
    rng = random.Random(plan.seed)
    report = ChaosReport(seed=plan.seed)
    started = time.monotonic()
    postgres: PrivatePostgres | PostgresPair = await asyncio.to_thread(
        PostgresPair.create if plan.postgres_failover else PrivatePostgres.create
    )
    data_dir = workdir / "stack"
    cluster = None
    bus: list[str] = []
    if plan.nats_cluster:
        cluster = await asyncio.to_thread(NatsCluster(workdir / "nats", size=plan.nats_cluster).start)
        bus = ["--nats-url", cluster.url, "--replicas", str(plan.nats_cluster)]
    try:
        up = await asyncio.to_thread(
            podway,
            data_dir,
            "up",
            "--detach",
            "--database-url",
            postgres.url,
            "--router-processes",
            "1",
            "--router-address",
            "127.0.0.1:0",
            *bus,
        )
        if up.returncode != 0:
            raise RuntimeError(f"podway up failed: {up.stdout}{up.stderr}")
        standbys = start_standbys(data_dir)
        try:
            queued = await _drive(plan, rng, report, data_dir, postgres, started + plan.deadline_s, cluster)
        finally:
            await asyncio.to_thread(stop_standbys, standbys)
        records = await load_records(postgres.url, frozenset(queued))
        found = check(records)
        report.jobs_preempted = sum(1 for e in records.events if e.type == "preemption.victims_selected")
        report.node_lost_events = sum(1 for e in records.events if e.type == "node.lost")
        report.pods_failed_node_lost = sum(
            len(e.payload.get("pods") or []) for e in records.events if e.type == "node.lost"
        )
        report.invariants_violated = len(found)
        report.audit_events_lost = len((await audit_gaps(postgres.url, report.answered)).missing)
        report.violations = [f"{v.invariant} {v.subject}: {v.detail}" for v in found[:20]]
    finally:
        await asyncio.to_thread(podway, data_dir, "down")
        if cluster is not None:
            await asyncio.to_thread(cluster.stop)
        await asyncio.to_thread(postgres.remove)
    report.seconds = round(time.monotonic() - started, 1)
    return report


async def _drive(
    plan: ChaosPlan,
    rng: random.Random,
    report: ChaosReport,
    data_dir: Path,
    postgres: PrivatePostgres | PostgresPair,
    deadline: float,
    cluster: NatsCluster | None = None,
) -> list[str]:
    """Apply the setup and the load, ask the router and inject the faults at once; then wait for every Job's
    decision and every queued request's outcome. Returns the queued requests' ids."""
    jobs = load(plan)
    report.jobs = len(jobs)
    report.pods = sum(j["spec"]["parallelism"] for j in jobs)
    async with PodwayClient(stack_info(data_dir)["nats_url"], timeout_s=20) as client:
        setup = [d for name in ("01-priorityclasses.yaml", "02-dra.yaml") for d in example(name)]
        await _retrying(lambda: client.apply(setup))
        faults = Faults(data_dir, postgres, report, client, random.Random(rng.random()), cluster)
        queued, _, _ = await asyncio.gather(
            _ask(client, plan, rng, report), _apply_load(client, jobs), faults.run(plan)
        )
        names = {j["metadata"]["name"] for j in jobs}
        report.jobs_decided = await _wait_decided(postgres.url, names, deadline)
        report.requests_without_outcome = await _outcomes(client, queued, deadline)
    return queued


def _finishes_at(pod: dict[str, Any]) -> float:
    """When a running simulated pod ends on its own: its start plus its `podway.io/run-seconds`."""
    started = (pod.get("status") or {}).get("startTime")
    seconds = run_seconds((pod.get("metadata") or {}).get("annotations") or {})
    if not started or seconds is None:
        return 0.0
    return datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() + seconds


def example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--fault-window", type=float, default=300.0)
    parser.add_argument("--deadline", type=float, default=1800.0)
    parser.add_argument("--fault-rounds", type=int, default=5)
    parser.add_argument(
        "--nats-cluster",
        type=int,
        default=0,
        help="run on a JetStream cluster of this many servers (every stream on all); 0: one embedded server",
    )
    parser.add_argument("--workdir", type=Path, default=Path(".podway-chaos"))
    parser.add_argument(
        "--postgres-failover",
        action="store_true",
        help="run on a PostgreSQL primary and a synchronous standby, and fail over to it",
    )
    args = parser.parse_args(argv)
    plan = ChaosPlan(
        args.seed,
        args.jobs,
        args.requests,
        args.fault_window,
        args.deadline,
        args.fault_rounds,
        args.postgres_failover,
        args.nats_cluster,
    )
    report = asyncio.run(run(plan, args.workdir))
    figures = {k: v for k, v in asdict(report).items() if k != "answered"}
    print(json.dumps({**figures, "sync_answered": len(report.answered), "clean": report.clean}))
    return 0 if report.clean else 1


def _signal(pid: int, signum: int) -> None:
    """Signal a process that may have ended since it was looked up."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


if __name__ == "__main__":
    sys.exit(main())
