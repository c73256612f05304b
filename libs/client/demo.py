"""`podway demo`: the whole stack on embedded defaults, every capability shown end to end, each step checked."""

from __future__ import annotations

import asyncio
import copy
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from libs.api.manifests import load_documents, validate_document
from libs.client.client import PodwayClient
from libs.client.describe import event_line
from libs.client.output import render
from libs.runtime.settings import PodwaySettings
from libs.runtime.stack import DEFAULT_SERVICES, Stack

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


class StepFailed(AssertionError):
    """A demo check did not hold."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


@dataclass
class Demo:
    client: PodwayClient
    out: Callable[[str], None] = print
    passed: list[str] = field(default_factory=list)

    async def step(self, title: str, run: Callable[[], Awaitable[None]]) -> None:
        self.out(f"\n== {len(self.passed) + 1}. {title}")
        started = time.perf_counter()
        await run()
        self.passed.append(title)
        self.out(f"   ok ({(time.perf_counter() - started) * 1000:.0f} ms)")


def example(name: str) -> list[dict[str, Any]]:
    return load_documents((EXAMPLES / name).read_text())


async def wait_for(
    probe: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], timeout_s: float = 20
) -> Any:
    deadline = time.monotonic() + timeout_s
    value = await probe()
    while not done(value) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        value = await probe()
    return value


async def admission_steps(demo: Demo) -> None:
    client, out = demo.client, demo.out

    async def validate_offline() -> None:
        bad = validate_document(example("invalid/bad-workload.yaml")[0])
        out(bad.message)
        check(not bad.ok and len(bad.errors) == 5, "the invalid Workload must report its five errors at once")

    async def apply_examples() -> None:
        docs = [
            d
            for name in ("01-priorityclasses.yaml", "02-dra.yaml", "03-gang-workload.yaml")
            for d in example(name)
        ]
        reply = await client.apply(docs)
        for result in reply.results:
            out(f"   {result.kind}/{result.name}: {result.outcome}")
        # The node agent installed the DeviceClasses of its drivers already, as a DRA driver does.
        check(
            all(
                r.outcome == "created" or (r.kind, r.outcome) == ("DeviceClass", "unchanged")
                for r in reply.results
            ),
            "every example object must be created (DeviceClasses may exist already)",
        )
        groups = await client.get("PodGroup", "llm-train-worker-0", "ml")
        check(groups[0]["spec"]["priority"] == 1000, "priority must be resolved from the PriorityClass")

    async def convert_v135() -> None:
        reply = await client.apply(example("04-v135-workload.yaml"))
        for warning in dict.fromkeys(reply.warnings):
            out(f"   warning: {warning}")
        check(bool(reply.warnings), "a v1.35 manifest must be answered with a warning")
        pods = await client.get("Pod", namespace="ml")
        legacy = [p for p in pods if p["metadata"]["name"].startswith("legacy-train")]
        check(
            {p["spec"]["schedulingGroup"]["podGroupName"] for p in legacy} == {"legacy-train-workers"},
            "workloadRef must become schedulingGroup naming the implied PodGroup",
        )

    async def submit_job() -> None:
        (job,) = example("05-indexed-job.yaml")
        request_id = await client.submit_job(job)
        out(f"   published job.submitted (request {request_id})")
        pods = await wait_for(
            lambda: client.get("Pod", namespace="ml"),
            lambda items: sum(p["metadata"]["name"].startswith("finetune-worker-0-") for p in items) == 8,
        )
        gang = sorted(p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith("finetune-"))
        out(f"   pods: {', '.join(gang)}")
        check(len(gang) == 8, "the Indexed Job must expand into 8 gang pods")
        workloads = await client.get("Workload", "finetune", "ml")
        template = workloads[0]["spec"]["podGroupTemplates"][0]
        check(template["schedulingPolicy"]["gang"]["minCount"] == 8, "minCount must equal parallelism")

    async def reject_invalid() -> None:
        reply = await client.apply(example("invalid/bad-workload.yaml"))
        out(reply.results[0].message)
        check(reply.results[0].outcome == "rejected", "the invalid manifest must be rejected")
        story = await client.events(correlation_id=reply.request_id)
        check(
            [e["type"] for e in story.events] == ["object.rejected"], "the rejection must be in the audit log"
        )

    async def reject_immutable_change() -> None:
        doc = copy.deepcopy(next(d for d in example("03-gang-workload.yaml") if d["kind"] == "Workload"))
        doc["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 2
        reply = await client.apply([doc])
        out(reply.results[0].message)
        check("field is immutable" in reply.results[0].message, "a Workload spec change must be refused")

    async def show_story() -> None:
        story = await client.events(podgroup="ml/finetune-worker-0")
        for event in story.events:
            out("   " + event_line(event))
        types = [e["type"] for e in story.events]
        check(
            types.count("pod.admitted") == 8 and "podgroup.admitted" in types,
            "the PodGroup story is incomplete",
        )
        out(render("PodGroup", await client.get("PodGroup", namespace="ml"), "table"))

    async def apply_again() -> None:
        reply = await client.apply(example("03-gang-workload.yaml"))
        check({r.outcome for r in reply.results} == {"unchanged"}, "re-applying must change nothing")
        out(f"   {len(reply.results)} objects unchanged")

    await demo.step(
        "Validate offline: every error of a manifest at once, in the API server's words", validate_offline
    )
    await demo.step("Apply PriorityClasses, DeviceClasses, claim templates and a v1.36 gang", apply_examples)
    await demo.step("Apply a v1.35 manifest: converted to v1alpha2 with a warning", convert_v135)
    await demo.step("Submit an Indexed Job as an event: Workload + PodGroup + 8 Pods", submit_job)
    await demo.step("Reject an invalid manifest; the rejection is audited", reject_invalid)
    await demo.step("Refuse a change to an immutable Workload", reject_immutable_change)
    await demo.step("Tell one PodGroup's story from the audit log", show_story)
    await demo.step("Apply again: nothing changes", apply_again)


async def run_demo(data_dir: Path, out: Callable[[str], None] = print, report: Path | None = None) -> int:
    from libs.client.demo_router import prepare_router_demo

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
                await dra_demo_steps(demo)
                await preemption_steps(demo)
                await router_demo_steps(demo, plan, settings, info.nats_url)
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


async def scheduling_steps(demo: Demo) -> None:
    from libs.client.demo_scheduling import scheduling_steps as steps

    await steps(demo)


async def dra_demo_steps(demo: Demo) -> None:
    from libs.client.demo_dra import dra_steps

    await dra_steps(demo)


async def preemption_steps(demo: Demo) -> None:
    from libs.client.demo_preemption import preemption_steps as steps

    await steps(demo)


async def router_demo_steps(demo: Demo, plan: Any, settings: PodwaySettings, nats_url: str) -> None:
    from libs.client.demo_router import router_steps

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
