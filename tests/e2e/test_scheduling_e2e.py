"""The scheduling stack as it is deployed: `podway-admission`, `podway-node-agent --cluster ...` and
`podway-scheduler` as processes on an embedded nats-server and SQLite; a gang applied with the client runs
and finishes, and its story is complete."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient
from libs.db import migrate
from libs.messaging.broker import provision_streams
from libs.runtime.health import health_file, last_beat
from libs.runtime.nats_server import EmbeddedNatsServer
from tests.support import eventually

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deploy" / "examples"

GANG = """
apiVersion: scheduling.k8s.io/v1alpha2
kind: Workload
metadata: {name: e2e, namespace: ml}
spec:
  podGroupTemplates:
  - name: worker
    schedulingPolicy: {gang: {minCount: 4}}
    schedulingConstraints: {topology: [{key: topology.example.com/rack}]}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: e2e-worker-0, namespace: ml}
spec:
  podGroupTemplateRef: {workload: {workloadName: e2e, podGroupTemplateName: worker}}
  schedulingPolicy: {gang: {minCount: 4}}
"""


def pod(index: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"e2e-worker-0-{index}",
            "namespace": "ml",
            "annotations": {"podway.io/run-seconds": "2"},
        },
        "spec": {
            "schedulingGroup": {"podGroupName": "e2e-worker-0"},
            "containers": [
                {
                    "name": "t",
                    "image": "trainer:v1",
                    "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "4"}},
                }
            ],
        },
    }


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[str]:
    """The three services as their console entry points would run them; yields the NATS URL."""
    nats = EmbeddedNatsServer(data_dir=tmp_path / "nats").start()
    asyncio.run(provision_streams(nats.url))
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'podway.db'}"
    asyncio.run(migrate.upgrade(database_url))
    env = {
        **os.environ,
        "PODWAY_NATS_URL": nats.url,
        "PODWAY_DATABASE_URL": database_url,
        "PODWAY_DATA_DIR": str(tmp_path),
        "PODWAY_LOG_LEVEL": "WARNING",
        "PODWAY_TIME_COMPRESSION": "4",
    }
    commands = {
        "admission": ["-m", "services.admission.main"],
        "node_agent": ["-m", "services.node_agent.main", "--cluster", str(EXAMPLES / "cluster-small.yaml")],
        "scheduler": ["-m", "services.scheduler.main"],
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, argv in commands.items():
            procs.append(subprocess.Popen([sys.executable, *argv], env=env, cwd=ROOT))
            deadline = time.monotonic() + 60
            while last_beat(health_file(tmp_path / "run", name)) is None:
                assert procs[-1].poll() is None, f"{name} exited with {procs[-1].returncode}"
                assert time.monotonic() < deadline, f"{name} did not become healthy"
                time.sleep(0.05)
        yield nats.url
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        nats.stop()


def test_a_gang_applied_to_the_deployed_stack_runs_in_one_rack_and_finishes(stack: str):
    async def scenario() -> None:
        async with PodwayClient(stack, timeout_s=30) as client:
            await client.apply(load_documents((EXAMPLES / "02-dra.yaml").read_text()))
            await client.apply(load_documents(GANG) + [pod(i) for i in range(4)])
            pods = await eventually(
                lambda: client.get("Pod", namespace="ml"),
                lambda pods: {p.get("status", {}).get("phase") for p in pods} == {"Succeeded"},
                timeout_s=30,
            )
            assert len({p["spec"]["nodeName"].rsplit("-n", 1)[0] for p in pods}) == 1
            story = [e["type"] for e in (await client.events(podgroup="ml/e2e-worker-0")).events]
            expected = ["podgroup.cycle.started", "podgroup.cycle.placed", "pods.bound", "podgroup.scheduled"]
            assert [t for t in story if t in expected] == expected
            assert story.index("pods.running") < story.index("pods.succeeded")

    asyncio.run(scenario())
