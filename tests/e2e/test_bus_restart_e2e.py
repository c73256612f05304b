"""`podway up` as a user runs it, its embedded nats-server killed with SIGKILL mid-run: the supervisor starts
it again on the same port with the same JetStream store, every service reconnects without a restart of its
own, and Jobs applied before and after run to completion."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from libs.runtime.nats_server import _answers

ROOT = Path(__file__).resolve().parents[2]
PODWAY = [sys.executable, "-m", "libs.client.cli"]


def job(name: str) -> str:
    return f"""
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: ml
  annotations: {{podway.io/topology-key: topology.example.com/rack}}
spec:
  completionMode: Indexed
  parallelism: 4
  completions: 4
  template:
    metadata: {{annotations: {{podway.io/run-seconds: "1"}}}}
    spec:
      restartPolicy: Never
      containers:
      - name: trainer
        image: registry.example.com/trainer:v1
        resources: {{requests: {{cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}}}}
"""


def podway(data_dir: Path, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PODWAY, *args, "--data-dir", str(data_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def wait_for(probe: Any, *, timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    value = probe()
    while not value and time.monotonic() < deadline:
        time.sleep(0.5)
        value = probe()
    return value


def stack_info(data_dir: Path) -> dict[str, Any]:
    return json.loads((data_dir / "run" / "stack.json").read_text())


def job_complete(data_dir: Path, name: str) -> bool:
    done = podway(data_dir, "get", "job", name, "-n", "ml", "-o", "json")
    if done.returncode != 0:
        return False
    (item,) = json.loads(done.stdout)["items"]
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


@pytest.fixture
def stack(tmp_path: Path):
    data_dir = tmp_path / "stack"
    up = podway(data_dir, "up", "--detach", "--services", "admission,scheduler,node_agent", timeout_s=180)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield data_dir
    finally:
        podway(data_dir, "down", timeout_s=120)


def test_a_killed_nats_server_is_started_again_and_every_job_runs(stack: Path, tmp_path: Path):
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(job("before"))
    second.write_text(job("after"))
    applied = podway(stack, "apply", "-f", str(first))
    assert applied.returncode == 0, applied.stderr

    info = stack_info(stack)
    port = int(info["nats_url"].rsplit(":", 1)[1])
    os.kill(info["nats_pid"], signal.SIGKILL)
    restarted = wait_for(lambda: stack_info(stack)["nats_pid"] != info["nats_pid"] and _answers(port))
    assert restarted, "the supervisor did not start nats-server again on the same port"

    applied = wait_for(lambda: podway(stack, "apply", "-f", str(second)).returncode == 0)
    assert applied
    assert wait_for(lambda: job_complete(stack, "before") and job_complete(stack, "after"))
