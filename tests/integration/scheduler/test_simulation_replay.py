"""One implementation, two clocks: a small trace replayed by the simulator on its virtual clock and applied to
the running services (admission, scheduler and node agent on a nats-server and PostgreSQL) binds the same
pods to the same nodes.

Everything is submitted before the scheduler starts, so that both see the whole queue at once; each job has
a priority of its own, so that the queue order does not hang on creation times (admission stamps its own).
Pods run far longer than the test, so no completion frees room on either side.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient
from libs.core.placement import PodDemand
from libs.core.scheduling import RACK_KEY
from libs.core.simulation.replay import (
    ReplayJob,
    TimedPod,
    job_manifests,
    priority_class_manifests,
    replay,
    stored,
    synthesise_jobs,
)
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.scheduler.conftest import CLUSTER_SMALL, EXAMPLES
from tests.support import eventually

pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

NAMESPACE = "trace"
RUN_S = 1e9


def trace_jobs() -> list[ReplayJob]:
    """Gangs and single pods cut from a small trace (seeded), and a gang no rack can hold."""
    shapes = [(1, 8_000, 32_768), (2, 16_000, 65_536), (4, 24_000, 131_072), (8, 48_000, 262_144)]
    pods = []
    for index in range(40):
        gpus, cpu, memory = shapes[index % 4 if index % 5 else 0]
        pods.append(TimedPod(PodDemand(f"trace-{index:03d}", cpu, memory, gpus, 1000), index * 10.0, RUN_S))
    pods += [TimedPod(PodDemand(f"cpu-{index}", 2_000, 4_096), 5.0 + index, RUN_S) for index in range(4)]
    wide = tuple(PodDemand(f"wide-{index}", 1_000, 1_024, 8, 1000) for index in range(9))
    jobs = [*synthesise_jobs(pods, seed=42), ReplayJob("gang-wide", 500.0, RUN_S, wide, 0, RACK_KEY)]
    # Distinct priorities, most important first in arrival order; every job at time 0.
    return [
        dataclasses.replace(job, arrival=0.0, run_seconds=RUN_S, priority=1_000 - position)
        for position, job in enumerate(jobs)
    ]


def simulated(jobs: list[ReplayJob]) -> dict[str, str]:
    cluster = [
        stored(doc)
        for doc in load_documents((EXAMPLES / "02-dra.yaml").read_text())
        + load_documents(CLUSTER_SMALL.read_text())
    ]
    return replay(cluster, jobs).bound


async def bound_by_services(client: PodwayClient) -> dict[str, str]:
    bound: dict[str, str] = {}
    seq = 0
    while True:
        page = await client.events(after_seq=seq)
        if not page.events:
            return bound
        for event in page.events:
            if event["type"] == "pods.bound":
                for placement in event["payload"]["pods"]:
                    bound[placement["pod"]] = placement["node"]
        seq = page.last_seq


async def test_the_simulator_binds_what_the_services_bind_for_the_same_trace(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    jobs = trace_jobs()
    expected = simulated(jobs)
    assert len(expected) == sum(len(job.pods) for job in jobs) - 9  # all but the wide gang
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=5
    )
    admission = AdmissionService(settings)
    agent = NodeAgentService(
        NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL), clock=FakeClock()
    )
    scheduler = SchedulerService(settings)
    await admission.start()
    try:
        async with PodwayClient(nats_url, timeout_s=30) as client:
            await client.apply(load_documents((EXAMPLES / "02-dra.yaml").read_text()))
            await client.apply(priority_class_manifests(jobs))
            await agent.start()
            await eventually(lambda: client.get("Node"), lambda nodes: len(nodes) == 64, timeout_s=30)
            manifests: list[dict[str, Any]] = [m for job in jobs for m in job_manifests(job, NAMESPACE)]
            reply = await client.apply(manifests)
            assert [r.message for r in reply.results if r.outcome == "rejected"] == []
            await scheduler.start()
            try:
                got = await eventually(
                    lambda: bound_by_services(client), lambda found: len(found) >= len(expected), timeout_s=60
                )
            finally:
                await scheduler.stop()
    finally:
        await agent.stop()
        await admission.stop()
    assert got == expected
