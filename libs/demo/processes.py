"""The demo's real gang: a process-runtime agent for this host joins the simulated fleet, its Node labelled
and tainted `podway.io/runtime=process` so that only pods asking for it land there; the all-reduce example
runs on it as four processes that meet over TCP, and each one's log is read back as `podway logs` reads it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from libs.api.jobs import COMPLETION_INDEX, JOB_NAME_LABEL
from libs.cluster.generator import RUNTIME_KEY
from libs.demo.steps import Demo, check, example, wait_for
from libs.runtime.children import stop_with_parent
from libs.runtime.pod_logs import log_file, read_run
from libs.runtime.stack_info import StackInfo

HOST_NODE = "demo-host"
TAINT = f"{RUNTIME_KEY}=process:NoSchedule"
JOB = "allreduce"
NAMESPACE = "ml"
WORLD = 4
AGENT_STOP_S = 20.0


@contextlib.contextmanager
def host_agent(info: StackInfo, data_dir: Path) -> Iterator[None]:
    """`podway agent` for this host beside the stack's simulated fleet, its Node tainted `TAINT`; stopped
    (its pods' processes with it) when the block ends."""
    argv = [sys.executable, "-m", "libs.client.cli", "agent", "--runtime", "process"]
    argv += ["--data-dir", str(data_dir), "--nats-url", info.nats_url, "--database-url", info.database_url]
    argv += ["--node-name", HOST_NODE, "--taint", TAINT]
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"node_agent-{HOST_NODE}.log").open("ab") as log:
        agent = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=stop_with_parent,
        )
    try:
        yield
    finally:
        agent.terminate()
        try:
            agent.wait(AGENT_STOP_S)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()


def allreduce_job() -> dict[str, Any]:
    """Example 10, its command run by this interpreter (the host may have no `python3` on its PATH)."""
    (job,) = example("10-process-gang.yaml")
    job["spec"]["template"]["spec"]["containers"][0]["command"][0] = sys.executable
    return job


def index_of(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["annotations"][COMPLETION_INDEX])


def pod_log(pod: dict[str, Any]) -> str:
    """The output of the pod's worker, read as `podway logs` reads it (its agent's files, on this host)."""
    log_dir = Path(pod["status"]["podwayRuntime"]["logDir"])
    path = log_file(log_dir, "worker", previous=False)
    return read_run(path).strip() if path is not None else ""


def ended(pods: list[dict[str, Any]]) -> bool:
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    return "Failed" in phases or phases.count("Succeeded") == WORLD


async def process_steps(demo: Demo) -> None:
    client, out = demo.client, demo.out

    async def host_joins() -> None:
        found = await wait_for(lambda: client.get("Node", HOST_NODE), bool, timeout_s=60)
        check(bool(found), f"the process-runtime agent did not register node {HOST_NODE}")
        node = found[0]
        labels, taints = node["metadata"]["labels"], node["spec"].get("taints") or []
        allocatable = node["status"]["allocatable"]
        out(
            f"   node {HOST_NODE}: {allocatable['cpu']} CPU, {allocatable['memory']} for pods; taints {taints}"
        )
        check(labels.get(RUNTIME_KEY) == "process", f"the host's Node must be labelled {RUNTIME_KEY}=process")
        check(
            {"key": RUNTIME_KEY, "value": "process", "effect": "NoSchedule"} in taints,
            f"the host's Node must carry the taint {TAINT}",
        )

    async def real_gang() -> None:
        await client.apply([allreduce_job()])

        async def gang() -> list[dict[str, Any]]:
            pods = await client.get("Pod", namespace=NAMESPACE)
            return [p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) == JOB]

        pods = sorted(await wait_for(gang, ended, timeout_s=60), key=index_of)
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        check(phases == ["Succeeded"] * WORLD, f"the four pods must succeed, not {phases}")
        check({p["spec"].get("nodeName") for p in pods} == {HOST_NODE}, f"the gang must run on {HOST_NODE}")
        master = pods[0]["status"]["podIP"]
        for pod in pods:
            line = pod_log(pod)
            out(f"   {pod['metadata']['name']} ({pod['status']['podIP']}): {line}")
            expected = f"rank {index_of(pod)}/{WORLD} at {master}: all-reduce sum = 10"
            check(line == expected, f"{pod['metadata']['name']} must log {expected!r}")
        members = {(NAMESPACE, p["metadata"]["name"]) for p in pods}
        others = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in await client.get("Pod", all_namespaces=True)
            if p["spec"].get("nodeName") == HOST_NODE
            and (p["metadata"]["namespace"], p["metadata"]["name"]) not in members
        ]
        check(not others, f"only the gang may land on the tainted host, not {others}")

    await demo.step(f"A process-runtime agent joins for this host, its Node tainted {TAINT}", host_joins)
    await demo.step(
        "A real gang on this host: four processes meet over TCP and all-reduce their ranks (sum = 10)",
        real_gang,
    )
