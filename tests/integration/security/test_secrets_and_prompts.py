"""Secrets stay secret and prompts stay private: with the database password, every NATS user's password and a
router API key set, and a gang, a rejected manifest, a sync and an async inference run through the services,
none of the secrets appears in any log line or any table, and neither does the prompt text."""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from libs.client.client import PodwayClient
from libs.client.commands.router import RouterClient, user_call
from libs.db.engine import create_engine
from libs.db.schema import metadata
from libs.emulators import RunningEmulators, serve
from libs.router import ManualClock
from libs.runtime.logging import JsonFormatter
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.llm_router.app import RouterService
from services.llm_router.settings import RouterSettings
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.nats_permissions.conftest import SecuredNats
from tests.integration.nats_permissions.test_services_on_their_users import as_user, four_nodes
from tests.integration.router_service.conftest import GEMINI_FIRST, policy_document, write_policy
from tests.integration.scheduler.conftest import example
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


@pytest.fixture
async def emulators():  # type: ignore[no-untyped-def]
    running = await serve()
    yield running
    await running.close()


class Everything(logging.Handler):
    """Every record of every logger, rendered as the services' JSON log lines are."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.formatter_ = JsonFormatter("test")

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.formatter_.format(record))


@pytest.fixture
def every_log_line() -> Any:
    handler = Everything()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


async def _every_row(database_url: str) -> str:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = [
                repr(row)
                for table in metadata.sorted_tables
                for row in (await connection.execute(sa.select(table))).all()
            ]
    finally:
        await engine.dispose()
    return "\n".join(rows)


async def test_no_secret_and_no_prompt_is_written_anywhere(
    secured_nats: SecuredNats,
    database_url: str,
    emulators: RunningEmulators,
    tmp_path: Path,
    every_log_line: Everything,
) -> None:
    db_password = f"dbpw{secrets.token_hex(8)}"
    with_password = make_url(database_url).set(password=db_password).render_as_string(hide_password=False)
    api_key = f"sk-{secrets.token_hex(12)}"
    prompt = f"the launch codes are {secrets.token_hex(8)}"
    users = ("admission", "scheduler", "node_agent", "llm_router")
    fields = {user: as_user(secured_nats, user, with_password, tmp_path) for user in users}
    document = policy_document(emulators, GEMINI_FIRST)
    document["api_keys"] = {api_key: {"features": ["search-answer"]}}
    policy = write_policy(tmp_path / "policy.yaml", document)
    admission = AdmissionService(PodwaySettings(**fields["admission"]))
    scheduler = SchedulerService(PodwaySettings(**fields["scheduler"]))
    agent = NodeAgentService(
        NodeAgentSettings(**fields["node_agent"]), clock=FakeClock(), manifests=four_nodes()
    )
    router = RouterService(
        RouterSettings(**fields["llm_router"], router_policy=policy, metrics_port=-1, router_http_port=-1),
        clock=ManualClock(wall_start=time.time()),
    )
    await admission.start()
    try:
        async with PodwayClient(secured_nats.url("client"), timeout_s=30) as client:
            await client.apply(example("01-priorityclasses.yaml") + example("02-dra.yaml"))
            await agent.start()
            await scheduler.start()
            await router.start()
            await client.apply(gang("keeps-secrets", 2, gpus=1))
            rejected = await client.apply(
                [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"}}]
            )
            assert rejected.results[0].outcome == "rejected"
            await eventually(
                lambda: client.get("Pod", namespace=NAMESPACE),
                lambda pods: (
                    len(pods) == 2 and all(p.get("status", {}).get("phase") == "Running" for p in pods)
                ),
                timeout_s=30,
            )
            calls = RouterClient(client, timeout_s=10)
            answer = await calls.infer(user_call("search-answer", prompt, max_tokens=16))
            assert answer.text
            queued = await calls.submit(user_call("search-answer", prompt, max_tokens=16))
            await eventually(
                lambda: client.events(correlation_id=queued.request_id),
                lambda reply: "inference.completed" in [e["type"] for e in reply.events],
            )
            await router.flush_audit()
    finally:
        await router.stop()
        await scheduler.stop()
        await agent.stop()
        await admission.stop()

    logs = "\n".join(every_log_line.lines)
    rows = await _every_row(with_password)
    assert "inference.completed" in rows  # the tables were read and hold the run's story
    assert "pods.bound" in rows
    assert '"logger": "services.admission.app"' in logs  # the services' logging was captured
    secret_values = {"database password": db_password, "api key": api_key} | {
        f"NATS password of {user}": password for user, password in secured_nats.passwords.items()
    }
    for what, value in secret_values.items():
        assert value not in logs, f"the {what} is in a log line"
        assert value not in rows, f"the {what} is in the database"
    assert prompt not in rows, "the prompt text was persisted"
    assert prompt not in logs, "the prompt text was logged"
