"""`podway check` over a real run: gangs bound, run and finished through the services on NATS and PostgreSQL
leave no violation; the same database with one audit row removed, or one hold left on an ended pod, does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from libs.client.check import violations
from libs.client.client import PodwayClient
from libs.db.engine import create_engine
from libs.db.schema import events, objects, pod_bindings
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.nats_permissions.test_services_on_their_users import four_nodes
from tests.integration.scheduler.conftest import example
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


async def _run_gangs(nats_url: str, database_url: str, tmp_path: Path) -> None:
    fields = {"nats_url": nats_url, "database_url": database_url, "lease_seconds": 5}
    admission = AdmissionService(PodwaySettings(**fields, data_dir=tmp_path / "admission"))
    scheduler = SchedulerService(PodwaySettings(**fields, data_dir=tmp_path / "scheduler"))
    agent = NodeAgentService(
        NodeAgentSettings(**fields, data_dir=tmp_path / "agent"), clock=FakeClock(), manifests=four_nodes()
    )
    await admission.start()
    try:
        async with PodwayClient(nats_url, timeout_s=30) as client:
            await client.apply(example("01-priorityclasses.yaml") + example("02-dra.yaml"))
            await agent.start()
            await scheduler.start()
            await client.apply(gang("checked-a", 4, gpus=1) + gang("checked-b", 2, gpus=2))
            await eventually(
                lambda: client.get("Pod", namespace=NAMESPACE),
                lambda pods: (
                    len(pods) == 6 and all(p.get("status", {}).get("phase") == "Running" for p in pods)
                ),
                timeout_s=30,
            )
    finally:
        await scheduler.stop()
        await agent.stop()
        await admission.stop()


async def _podway(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, in its own process."""
    command = [sys.executable, "-m", "libs.client.cli", *argv]
    return await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=120)


async def _execute(database_url: str, statement: sa.Executable) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(statement)
    finally:
        await engine.dispose()


async def test_a_real_run_is_clean_and_tampering_is_found(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    await _run_gangs(nats_url, database_url, tmp_path)
    assert await violations(database_url) == []

    # The CLI verb, run as a user runs it, agrees.
    clean = await _podway("check", "--database-url", database_url)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "0 violations" in clean.stdout

    await _execute(database_url, sa.delete(events).where(events.c.type == "pods.running"))
    found = {v.invariant for v in await violations(database_url)}
    assert found == {"running-has-event"}

    await _execute(
        database_url,
        sa.update(objects)
        .where(objects.c.kind == "Pod", objects.c.name.like("checked-b-%"))
        .values(status={"phase": "Succeeded"}),
    )
    found = {v.invariant for v in await violations(database_url)}
    assert "hold-ends-with-pod" in found

    await _execute(database_url, sa.delete(pod_bindings))
    broken = await _podway("check", "--database-url", database_url, "-o", "json")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert '"violations": ' in broken.stdout
