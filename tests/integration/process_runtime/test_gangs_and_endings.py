"""Real gangs and real endings: a gang that rendezvouses over TCP, a failing index retried under the Job's
backoffLimit, deletion with a grace period the process observes, SIGKILL at the grace period, an agent
restart that finds its processes again."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from libs.api.manifests import load_documents
from libs.runtime.pod_logs import log_file, read_run
from tests.integration.process_runtime.conftest import (
    NAMESPACE,
    ProcessStack,
    get_pod,
    phase,
    pod,
    python,
    start_agent,
)
from tests.support import eventually

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "examples" / "10-process-gang.yaml"


def allreduce_job() -> dict[str, Any]:
    (job,) = load_documents(EXAMPLE.read_text())
    job["spec"]["template"]["spec"]["containers"][0]["command"][0] = sys.executable
    return job


async def job_pods(stack: ProcessStack, name: str) -> list[dict[str, Any]]:
    pods = await stack.client.get("Pod", namespace=NAMESPACE)
    return [
        p for p in pods if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == name
    ]


async def job_status(stack: ProcessStack, name: str) -> dict[str, Any]:
    (job,) = await stack.client.get("Job", name, NAMESPACE)
    return dict(job.get("status") or {})


def finished(status: dict[str, Any]) -> bool:
    return any(c["type"] in ("Complete", "Failed") for c in status.get("conditions") or [])


async def test_a_gang_starts_together_and_all_reduces_over_tcp(process_stack: ProcessStack):
    await process_stack.client.apply([allreduce_job()])

    status = await eventually(lambda: job_status(process_stack, "allreduce"), finished, timeout_s=30)

    assert [c["type"] for c in status["conditions"]] == ["Complete"]
    pods = await job_pods(process_stack, "allreduce")
    assert len({p["status"]["podIP"] for p in pods}) == 4
    lines = sorted(
        read_run(log_file(Path(p["status"]["podwayRuntime"]["logDir"]), "worker", previous=False)).strip()  # type: ignore[arg-type]
        for p in pods
    )
    master = next(p["status"]["podIP"] for p in pods if p["metadata"]["name"].endswith("-0"))
    assert lines == [f"rank {r}/4 at {master}: all-reduce sum = 10" for r in range(4)]


async def test_a_failing_index_is_retried_under_the_jobs_backoff_limit(process_stack: ProcessStack):
    marker = process_stack.work / "index-1-failed-once"
    script = (
        "import os, pathlib, sys\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if os.environ['JOB_COMPLETION_INDEX'] == '1' and not marker.exists():\n"
        "    marker.touch(); sys.exit(7)\n"
    )
    job = allreduce_job()
    job["metadata"]["name"] = "retried"
    job["spec"].update(parallelism=2, completions=2)
    job["spec"]["template"]["spec"]["containers"][0]["command"] = python(script)

    await process_stack.client.apply([job])
    status = await eventually(lambda: job_status(process_stack, "retried"), finished, timeout_s=30)

    assert [c["type"] for c in status["conditions"]] == ["Complete"]
    assert (status["succeeded"], status["failed"]) == (2, 1)
    assert marker.exists()


async def test_a_pod_failure_policy_ignores_one_exit_code_and_fails_the_job_on_another(
    process_stack: ProcessStack,
):
    """Index 1 exits 3 once (ignored: run again, not counted), then 42 (FailJob); backoffLimit 0 would have
    failed the Job at the first failure had it counted."""
    marker = process_stack.work / "index-1-exited-3"
    script = (
        "import os, pathlib, sys\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if os.environ['JOB_COMPLETION_INDEX'] != '1': sys.exit(0)\n"
        "if not marker.exists(): marker.touch(); sys.exit(3)\n"
        "sys.exit(42)\n"
    )
    job = allreduce_job()
    job["metadata"]["name"] = "policed"
    job["spec"].update(parallelism=2, completions=2, completionMode="Indexed", backoffLimit=0)
    job["spec"]["podFailurePolicy"] = {
        "rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "worker", "operator": "In", "values": [42]},
            },
        ]
    }
    job["spec"]["template"]["spec"]["containers"][0]["command"] = python(script)

    await process_stack.client.apply([job])
    status = await eventually(lambda: job_status(process_stack, "policed"), finished, timeout_s=30)

    (failed,) = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "PodFailurePolicy"
    assert failed["message"].startswith("Container worker for pod ml/policed-")
    assert failed["message"].endswith("failed with exit code 42 matching FailJob rule at index 1")
    assert marker.exists()
    assert status["failed"] == 1  # the exit 42 counted, the exit 3 not


async def test_a_deleted_pod_sees_sigterm_and_its_room_is_released_only_after_it_exits(
    process_stack: ProcessStack,
):
    marker = process_stack.work / "terminated"
    script = (
        "import pathlib, signal, sys, time\n"
        "def stop(*_):\n"
        "    time.sleep(0.3)\n"
        f"    pathlib.Path({str(marker)!r}).write_text('graceful'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(0.05)\n"
    )
    await process_stack.client.apply([pod("graceful", python(script), grace_s=10)])
    await eventually(lambda: get_pod(process_stack, "graceful"), lambda p: phase(p) == "Running")
    await eventually(lambda: _log_of(process_stack, "graceful"), lambda text: "ready" in text)

    await process_stack.client.delete("Pod", "graceful", NAMESPACE)
    gone = await eventually(lambda: get_pod(process_stack, "graceful"), lambda p: p is None)

    assert gone is None
    assert marker.read_text() == "graceful"


async def test_a_process_ignoring_sigterm_is_killed_at_the_grace_period(process_stack: ProcessStack):
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    await process_stack.client.apply([pod("stubborn", python(script), grace_s=1)])
    await eventually(lambda: _log_of(process_stack, "stubborn"), lambda text: "ready" in text)

    asked = time.monotonic()
    await process_stack.client.delete("Pod", "stubborn", NAMESPACE)
    gone = await eventually(lambda: get_pod(process_stack, "stubborn"), lambda p: p is None, interval_s=0.02)
    waited = time.monotonic() - asked

    assert gone is None
    assert 1.0 <= waited < 4.0


async def test_a_deletes_grace_period_overrides_the_pods_own(process_stack: ProcessStack):
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(3600)"
    await process_stack.client.apply([pod("hasty", python(script), grace_s=3600)])
    await eventually(lambda: _log_of(process_stack, "hasty"), lambda text: "ready" in text)

    await process_stack.client.delete("Pod", "hasty", NAMESPACE, grace_seconds=2)
    marked = await get_pod(process_stack, "hasty")
    # Its own hour would outlast the wait below: it goes because the delete gave it two seconds.
    gone = await eventually(lambda: get_pod(process_stack, "hasty"), lambda p: p is None, timeout_s=30)

    assert marked is not None
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 2
    assert "deletionTimestamp" in marked["metadata"]
    assert gone is None


async def test_an_agent_restarted_mid_termination_keeps_the_grace_period_the_delete_gave(
    process_stack: ProcessStack,
):
    stack = process_stack
    await stack.agent.stop()
    settings = stack.agent_settings.model_copy(update={"keep_pods_on_stop": True})
    stack.agent = await start_agent(settings)
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(3600)"
    await stack.client.apply([pod("interrupted", python(script), grace_s=3600)])
    await eventually(lambda: _log_of(stack, "interrupted"), lambda text: "ready" in text)
    runtime = stack.agent.runtime
    assert runtime is not None
    (running,) = [p for p in runtime.pods.values() if p.name == "interrupted"]

    await stack.client.delete("Pod", "interrupted", NAMESPACE, grace_seconds=5)
    # The agent took the delete (SIGTERM sent, the grace period running), then goes before it is up.
    assert await eventually(lambda: _stopping(running), bool) is True
    await stack.agent.stop()
    stack.agent = await start_agent(settings)

    # Its own hour would outlast the wait: the restarted agent read the delete's five seconds from the pod.
    gone = await eventually(lambda: get_pod(stack, "interrupted"), lambda p: p is None, timeout_s=30)
    assert gone is None


async def _stopping(running: Any) -> bool:
    return bool(running.stopping.is_set())


async def test_a_restarted_agent_finds_its_running_processes_and_reports_lost_ones(
    process_stack: ProcessStack,
):
    stack = process_stack
    await stack.agent.stop()
    settings = stack.agent_settings.model_copy(update={"keep_pods_on_stop": True})
    stack.agent = await start_agent(settings)
    forever = python("import time; print('up', flush=True); time.sleep(60)")
    await stack.client.apply([pod("survivor", forever), pod("victim", forever)])
    for name in ("survivor", "victim"):
        await eventually(lambda name=name: _log_of(stack, name), lambda text: "up" in text)
    assert stack.agent.runtime is not None
    victim = next(p for p in stack.agent.runtime.pods.values() if p.name == "victim")
    victim_group = victim.groups["main"]

    await stack.agent.stop()
    import os
    import signal

    os.killpg(victim_group, signal.SIGKILL)
    stack.agent = await start_agent(settings)

    lost = await eventually(lambda: get_pod(stack, "victim"), lambda p: phase(p) == "Failed")
    assert lost["status"]["reason"] == "ContainerStatusUnknown"  # type: ignore[index]
    assert phase(await get_pod(stack, "survivor")) == "Running"
    assert "survivor" in {p.name for p in stack.agent.runtime.pods.values()}  # type: ignore[union-attr]
    await stack.client.delete("Pod", "survivor", NAMESPACE)
    assert await eventually(lambda: get_pod(stack, "survivor"), lambda p: p is None) is None
    await asyncio.sleep(0)


async def _log_of(stack: ProcessStack, name: str) -> str:
    found = await get_pod(stack, name)
    runtime = ((found or {}).get("status") or {}).get("podwayRuntime")
    if not runtime:
        return ""
    path = log_file(Path(runtime["logDir"]), "main", previous=False)
    return read_run(path) if path is not None else ""
