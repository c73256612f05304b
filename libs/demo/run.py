"""`podway demo`: the whole stack on embedded defaults, every capability shown end to end, each step checked."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path

from libs.client.client import PodwayClient
from libs.demo.admission import admission_steps
from libs.demo.dra import dra_steps
from libs.demo.kubernetes import kubernetes_steps
from libs.demo.preemption import preemption_steps
from libs.demo.processes import host_agent, process_steps
from libs.demo.quotas import quota_steps
from libs.demo.router import RouterDemoPlan, prepare_router_demo, router_steps
from libs.demo.scheduling import scheduling_steps
from libs.demo.steps import Demo, StepFailed
from libs.runtime.settings import PodwaySettings
from libs.runtime.stack import DEFAULT_SERVICES, Stack


async def run_demo(data_dir: Path, out: Callable[[str], None] = print, report: Path | None = None) -> int:
    # The router runs on the local Bedrock and Vertex emulators; simulated pods run 10x faster than their
    # podway.io/run-seconds, so the demo takes seconds.
    plan = prepare_router_demo(data_dir)
    settings = PodwaySettings(
        data_dir=data_dir,
        log_level="WARNING",
        time_compression=10.0,
        router_policy=plan.policy_path,
        # A free port, so that the demo runs beside a stack; one router process, so that the breaker steps
        # see every request.
        router_http_address="127.0.0.1:0",
        router_processes=1,
    )
    stack = Stack(
        settings,
        services=(*DEFAULT_SERVICES, "llm_router"),
        prepare=_prepare,
        extra_specs=[plan.emulators_spec],
    )
    try:
        info = await asyncio.to_thread(stack.start)
        if not await asyncio.to_thread(stack.wait_ready):
            for name in stack.not_ready():
                log_file = data_dir / "logs" / f"{name}.log"
                tail = log_file.read_text()[-3000:] if log_file.exists() else "(no log)"
                out(f"{name} did not become healthy; the end of its log:\n{tail}")
            return 1
        out(f"Podway demo: nats {info.nats_url}, database {info.database_url}")
        async with PodwayClient(info.nats_url) as client:
            demo = Demo(client, out)
            try:
                await admission_steps(demo)
                await scheduling_steps(demo)
                await dra_steps(demo)
                await preemption_steps(demo)
                await quota_steps(demo)
                await kubernetes_steps(demo, data_dir)
                # The host's agent starts here, so that it has registered by the time its steps come: the
                # router's steps look at no node, and the steps before count the simulated fleet's.
                with host_agent(info, data_dir):
                    await router_demo_steps(demo, plan, settings, info.nats_url)
                    await process_steps(demo)
            except StepFailed as exc:
                out(f"   FAILED: {exc}")
                return 1
        out(f"\nAll {len(demo.passed)} steps passed.")
        if report is not None:
            from libs.client.report import write_report

            written = await write_report(info.database_url, report)
            out(f"Report of the run: {report} ({written.events} events, {len(written.groups)} PodGroups)")
        return 0
    finally:
        stack.stop()
        out("stack stopped")


async def router_demo_steps(
    demo: Demo, plan: RouterDemoPlan, settings: PodwaySettings, nats_url: str
) -> None:
    endpoints = await plan.endpoints(settings.run_dir)
    await router_steps(demo, nats_url=nats_url, emulator_control=endpoints)


def _prepare(database_url: str, nats_url: str) -> None:
    from libs.client.commands.stack import prepare_stack

    prepare_stack(database_url, nats_url)


def main(data_dir: Path | None, report: Path | None = None) -> int:
    """The demo in `data_dir` (default: a temporary dir), writing the run's HTML report to `report` if given."""
    if data_dir is not None:
        return asyncio.run(run_demo(data_dir, report=report))
    with tempfile.TemporaryDirectory(prefix="podway-demo-") as tmp:
        return asyncio.run(run_demo(Path(tmp), report=report))
