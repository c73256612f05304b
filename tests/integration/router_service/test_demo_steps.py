"""The router's `podway demo` steps pass against the real services, emulators and audit log."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from libs.client.client import PodwayClient
from libs.demo.router import RouterEndpoints, prepare_router_demo, router_steps, write_demo_policy
from libs.demo.steps import Demo
from libs.emulators import serve
from libs.router import read_policy_file
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.llm_router.app import RouterService
from services.llm_router.settings import RouterSettings
from tests.conftest import SQLITE_ONLY


@contextlib.asynccontextmanager
async def running_router_demo(
    *, nats_url: str, database_url: str, data_dir: Path
) -> AsyncIterator[RouterEndpoints]:
    """The emulators and the router service in this process, on the demo policy (the demo itself supervises
    them as processes)."""
    emulators = await serve()
    policy_path = write_demo_policy(data_dir, emulators.bedrock_url, emulators.vertex_url)
    settings = RouterSettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        router_policy=policy_path,
        metrics_port=-1,
    )
    service = RouterService(settings)
    try:
        await service.start()
        assert service.http_url is not None
        yield RouterEndpoints(emulators.bedrock_url, emulators.vertex_url, service.http_url)
    finally:
        await service.stop()
        await emulators.close()


@SQLITE_ONLY
async def test_every_router_demo_step_passes(nats_url: str, database_url: str, tmp_path: Path):
    admission = AdmissionService(
        PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path)
    )
    await admission.start()
    lines: list[str] = []
    try:
        async with (
            running_router_demo(nats_url=nats_url, database_url=database_url, data_dir=tmp_path) as endpoints,
            PodwayClient(nats_url, timeout_s=20) as client,
        ):
            demo = Demo(client, out=lines.append)
            await router_steps(demo, nats_url=nats_url, emulator_control=endpoints)
    finally:
        await admission.stop()
    assert len(demo.passed) == 8, "\n".join(lines)


def test_the_demo_plan_runs_the_emulators_beside_a_valid_policy(tmp_path: Path):
    plan = prepare_router_demo(tmp_path, bedrock_port=4101, vertex_port=4102)
    policy = read_policy_file(plan.policy_path)
    assert policy.providers["bedrock"].endpoint_url == plan.bedrock_url == "http://127.0.0.1:4101"
    assert policy.providers["vertex"].api_endpoint == "http://127.0.0.1:4102"
    assert policy.breaker.open_s < 1
    assert plan.emulators_spec.argv[-4:] == ["--bedrock-port", "4101", "--vertex-port", "4102"]
    assert plan.emulators_spec.beats is False
