"""Admission, scheduler and a process-runtime node agent in-process on a real nats-server and database: the
agent registers this host and runs pods as real processes (short Python scripts)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from libs.client.client import PodwayClient
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.support import eventually

NODE = "host-0"
NAMESPACE = "ml"


@dataclass
class ProcessStack:
    client: PodwayClient
    scheduler: SchedulerService
    agent: NodeAgentService
    agent_settings: NodeAgentSettings
    work: Path


def python(script: str) -> list[str]:
    """A container command running `script` with this interpreter, unbuffered."""
    return [sys.executable, "-u", "-c", script]


def pod(name: str, command: list[str], *, grace_s: int | None = None, **spec: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "python:3.12",
        "command": command,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }
    container.update(spec.pop("container", {}))
    body: dict[str, Any] = {"restartPolicy": "Never", "containers": [container], **spec}
    if grace_s is not None:
        body["terminationGracePeriodSeconds"] = grace_s
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": body,
    }


async def get_pod(stack: ProcessStack, name: str) -> dict[str, Any] | None:
    found = await stack.client.get("Pod", name, NAMESPACE)
    return found[0] if found else None


def phase(found: dict[str, Any] | None) -> str | None:
    return None if found is None else (found.get("status") or {}).get("phase", "Pending")


async def start_agent(settings: NodeAgentSettings) -> NodeAgentService:
    agent = NodeAgentService(settings)
    await agent.start()
    return agent


@pytest.fixture
async def process_stack(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[ProcessStack]:
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=5
    )
    admission = AdmissionService(settings)
    await admission.start()
    agent_settings = NodeAgentSettings(
        **settings.model_dump(),
        runtime="process",
        node_name=NODE,
        restart_backoff_seconds=0.05,
        restart_backoff_max_seconds=0.2,
    )
    agent = await start_agent(agent_settings)
    scheduler = SchedulerService(settings)
    work = tmp_path / "work"
    work.mkdir()
    async with PodwayClient(nats_url, timeout_s=30) as client:
        await scheduler.start()
        await eventually(lambda: _node_known(scheduler), bool, timeout_s=20)
        stack = ProcessStack(client, scheduler, agent, agent_settings, work)
        try:
            yield stack
        finally:
            await scheduler.stop()
            await stack.agent.stop()
            await admission.stop()


async def _node_known(scheduler: SchedulerService) -> bool:
    world = scheduler.world
    return world is not None and len(world.snapshot) == 1
