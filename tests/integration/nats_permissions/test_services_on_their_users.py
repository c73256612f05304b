"""The services on the deployed NATS config, each connected as its own user: a gang is admitted, bound and run,
a Job submitted as an event is admitted, the router answers a request and works a queued one, and the server
refuses nothing any of them does."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from libs.client.client import PodwayClient
from libs.client.commands.router import RouterClient, user_call
from libs.emulators import RunningEmulators, serve
from libs.router import ManualClock
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.llm_router.app import RouterService
from services.llm_router.settings import RouterSettings
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.preemptor.app import PreemptorService
from services.scheduler.app import SchedulerService
from tests.conftest import SQLITE_ONLY, FakeClock
from tests.integration.nats_permissions.conftest import SecuredNats, refusals
from tests.integration.router_service.conftest import GEMINI_FIRST, policy_document, write_policy
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually

# What is checked here is NATS, not the database: one database is enough.
pytestmark = SQLITE_ONLY


@pytest.fixture
async def emulators() -> AsyncIterator[RunningEmulators]:
    running = await serve()
    yield running
    await running.close()


def as_user(secured: SecuredNats, user: str, database_url: str, data_dir: Path) -> dict[str, Any]:
    """Settings fields for a process connecting as `user`, its credentials given the way a deployment does
    (PODWAY_NATS_USER / PODWAY_NATS_PASSWORD)."""
    return {
        "nats_url": secured.server.url,
        "nats_user": user,
        "nats_password": secured.passwords[user],
        "database_url": database_url,
        "data_dir": data_dir / user,
        # Long enough that a renewal held up by the load on a busy host (SQLite serialises writers) does not
        # cost the leader its term mid-test: leases are not what this test is about.
        "lease_seconds": 30,
    }


def four_nodes() -> list[dict[str, Any]]:
    """The first four nodes of cluster-small.yaml and their GPUs: room for what the test runs."""
    docs = NodeAgentSettings(cluster_file=CLUSTER_SMALL).cluster_manifests()
    nodes = [d["metadata"]["name"] for d in docs if d["kind"] == "Node"][:4]
    return [d for d in docs if d["metadata"]["name"] in nodes or d.get("spec", {}).get("nodeName") in nodes]


def connected_users(secured: SecuredNats) -> dict[str, str]:
    """Connection name -> the NATS user it authenticated as, from the server's monitoring endpoint."""
    url = f"http://127.0.0.1:{secured.server.monitor_port}/connz?auth=true"
    with urllib.request.urlopen(url, timeout=5) as response:
        connections = json.load(response)["connections"]
    return {c["name"]: c.get("authorized_user") for c in connections}


async def test_each_service_runs_on_its_own_user_and_nothing_it_does_is_refused(
    secured_nats: SecuredNats, database_url: str, emulators: RunningEmulators, tmp_path: Path, refusal_log
):
    settings = {
        user: as_user(secured_nats, user, database_url, tmp_path)
        for user in ("admission", "scheduler", "preemptor", "node_agent", "llm_router")
    }
    admission = AdmissionService(PodwaySettings(**settings["admission"]))
    agent = NodeAgentService(
        NodeAgentSettings(**settings["node_agent"]), clock=FakeClock(), manifests=four_nodes()
    )
    scheduler = SchedulerService(PodwaySettings(**settings["scheduler"]))
    preemptor = PreemptorService(PodwaySettings(**settings["preemptor"]))
    policy = write_policy(tmp_path / "policy.yaml", policy_document(emulators, GEMINI_FIRST))
    router = RouterService(
        RouterSettings(**settings["llm_router"], router_policy=policy, metrics_port=-1, router_http_port=-1),
        clock=ManualClock(wall_start=time.time()),
    )
    await admission.start()
    try:
        async with PodwayClient(secured_nats.url("client"), timeout_s=30) as client:
            await client.apply(example("01-priorityclasses.yaml") + example("02-dra.yaml"))
            await agent.start()
            await scheduler.start()
            await preemptor.start()
            await router.start()

            # A gang applied through admission is bound by the scheduler and run by the node agent.
            await client.apply(gang("on-own-users", 4, gpus=2))
            pods = await eventually(
                lambda: client.get("Pod", namespace=NAMESPACE),
                lambda pods: (
                    len(pods) == 4 and all(p.get("status", {}).get("phase") == "Running" for p in pods)
                ),
                timeout_s=30,
            )
            assert [p.get("status", {}).get("phase") for p in pods] == ["Running"] * 4
            story = [e["type"] for e in (await client.events(podgroup=f"{NAMESPACE}/on-own-users")).events]
            assert {"podgroup.admitted", "pods.bound", "podgroup.scheduled", "pods.running"} <= set(story)

            # A Job published as job.submitted is consumed by admission's durable and expanded.
            (job,) = example("05-indexed-job.yaml")
            await client.submit_job(job)
            groups = await eventually(
                lambda: client.get("PodGroup", namespace="ml"),
                lambda groups: "finetune-worker-0" in {g["metadata"]["name"] for g in groups},
            )
            assert "finetune-worker-0" in {g["metadata"]["name"] for g in groups}

            # A high-priority gang that needs every GPU preempts what runs: the preemptor's events, its
            # evictions and the admission of the preempted Job's fresh pods go through on their users.
            urgent = gang("urgent", 4, gpus=8)
            for manifest in urgent:
                if manifest["kind"] == "Workload":
                    manifest["spec"]["podGroupTemplates"][0]["priorityClassName"] = "high-priority"
                else:
                    manifest["spec"]["priorityClassName"] = "high-priority"
            await client.apply(urgent)
            story = await eventually(
                lambda: client.events(podgroup=f"{NAMESPACE}/urgent"),
                lambda reply: "pods.bound" in [e["type"] for e in reply.events],
                timeout_s=60,
            )
            assert {"preemption.victims_selected", "podgroup.nominated", "pods.bound"} <= {
                e["type"] for e in story.events
            }

            # The router answers over request/reply and works an item from the work queue.
            router_client = RouterClient(client, timeout_s=10)
            answer = await router_client.infer(user_call("search-answer", "What is a gang?", max_tokens=16))
            assert answer.text
            queued = await router_client.submit(user_call("search-answer", "And a PodGroup?", max_tokens=16))
            outcome = await eventually(
                lambda: client.events(correlation_id=queued.request_id),
                lambda reply: "inference.completed" in [e["type"] for e in reply.events],
            )
            assert "inference.completed" in [e["type"] for e in outcome.events]

            connected = connected_users(secured_nats)
            expected = {
                "admission-0": "admission",
                "scheduler-0": "scheduler",
                "scheduler-0-events": "scheduler",
                "preemptor-0": "preemptor",
                "preemptor-0-events": "preemptor",
                "node-agent-0": "node_agent",
                "llm_router-0": "llm_router",
                "podway-client": "client",
            }
            assert {name: connected.get(name) for name in expected} == expected
    finally:
        await router.stop()
        await preemptor.stop()
        await scheduler.stop()
        await agent.stop()
        await admission.stop()
    assert refusals(refusal_log) == set()
