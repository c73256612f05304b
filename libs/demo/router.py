"""The LLM router's part of `podway demo`: every routing capability shown against the local emulators, each
step checked.

How the demo wires it (libs/demo/run.py):

    plan = prepare_router_demo(data_dir)                    # free emulator ports, the demo policy file
    settings = PodwaySettings(data_dir=data_dir, router_policy=plan.policy_path, ...)
    stack = Stack(settings, services=("admission", "llm_router"), prepare=..., extra_specs=[plan.emulators_spec])
    ... stack.start(); stack.wait_ready()
    endpoints = await plan.endpoints(settings.run_dir)      # waits for the emulators and the router's HTTP front
    await router_steps(demo, nats_url=info.nats_url, emulator_control=endpoints)

The demo policy is the example policy (`deploy/router/policy.yaml`) with the emulators' URLs filled in, two
features whose model order is fixed (`demo-gemini-first`, `demo-claude-first`) and short breaker timings, so
that a breaker opens, probes, ramps and closes in about two seconds. The router service runs as a supervised
process of the stack, like every other service: this module (a library) never imports a service.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import yaml

from libs.client.commands.router import RouterClient, user_call
from libs.client.describe import event_line
from libs.demo.steps import Demo, check
from libs.events.inference import FeedbackReport, InferenceAnswer
from libs.router.example_policy import CLAUDE_HAIKU_PT_ARN, GEMINI_FLASH, example_policy_document
from libs.runtime.supervisor import ServiceSpec

API_KEY = "team-search"
DEMO_CONSECUTIVE_FAILURES = 3
DEMO_BREAKER: dict[str, Any] = {
    "consecutive_failures": DEMO_CONSECUTIVE_FAILURES,
    "open_s": 0.5,
    "open_s_max": 4,
    "ramp": [0.25, 0.5, 1.0],
    "ramp_step_s": 0.3,
    "ramp_min_requests": 2,
}
STORY_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class RouterEndpoints:
    """Where the demo reaches the emulators' control endpoints and the router's OpenAI-compatible front."""

    bedrock_url: str
    vertex_url: str
    openai_url: str


def demo_policy_document(bedrock_url: str, vertex_url: str) -> dict[str, Any]:
    """The example policy on these emulators, with the demo's fixed-order features and quick breakers."""
    document = example_policy_document(bedrock_url, vertex_url)
    for name, models in (
        ("demo-gemini-first", ["gemini-flash", "claude-haiku"]),
        ("demo-claude-first", ["claude-haiku", "gemini-flash"]),
    ):
        document["features"][name] = {
            "latency": "sync",
            "deadline_ms": 8000,
            "first_byte_timeout_ms": 1500,
            "routes": [{"weight": 1, "models": models}],
        }
    document["breaker"].update(DEMO_BREAKER)
    return document


def write_demo_policy(data_dir: Path, bedrock_url: str, vertex_url: str) -> Path:
    """Write the demo policy into `data_dir`; returns its path."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "router-policy.yaml"
    path.write_text(yaml.safe_dump(demo_policy_document(bedrock_url, vertex_url), sort_keys=False))
    return path


@dataclass(frozen=True)
class RouterDemoPlan:
    """The emulators as a supervised process and the policy the router service is started with."""

    policy_path: Path
    bedrock_url: str
    vertex_url: str
    emulators_spec: ServiceSpec

    async def endpoints(
        self, run_dir: Path, *, instance: str = "0", timeout_s: float = 30.0
    ) -> RouterEndpoints:
        """Wait until both emulators answer and the router has published its HTTP front; return the URLs."""
        deadline = time.monotonic() + timeout_s
        run_file = run_dir / f"llm_router-{instance}.json"
        async with aiohttp.ClientSession() as http:
            while True:
                openai_url = _published_http_url(run_file)
                ready = [f"{self.bedrock_url}/__emulator/counters", f"{self.vertex_url}/__emulator/counters"]
                if openai_url and all(
                    [await _answers(http, url) for url in [*ready, f"{openai_url}/metrics"]]
                ):
                    return RouterEndpoints(self.bedrock_url, self.vertex_url, openai_url)
                if time.monotonic() > deadline:
                    raise TimeoutError("the emulators or the router's HTTP front did not come up")
                await asyncio.sleep(0.1)


def prepare_router_demo(data_dir: Path, *, bedrock_port: int = 0, vertex_port: int = 0) -> RouterDemoPlan:
    """Choose the emulators' ports, write the demo policy into `data_dir`, and describe the emulators process."""
    bedrock_port = bedrock_port or _free_port()
    vertex_port = vertex_port or _free_port()
    bedrock_url, vertex_url = f"http://127.0.0.1:{bedrock_port}", f"http://127.0.0.1:{vertex_port}"
    policy_path = write_demo_policy(data_dir, bedrock_url, vertex_url)
    argv = [
        sys.executable,
        "-m",
        "libs.emulators",
        "--bedrock-port",
        str(bedrock_port),
        "--vertex-port",
        str(vertex_port),
    ]
    return RouterDemoPlan(
        policy_path, bedrock_url, vertex_url, ServiceSpec(name="emulators", argv=argv, beats=False)
    )


async def router_steps(demo: Demo, *, nats_url: str, emulator_control: RouterEndpoints) -> None:
    """The router's demo steps, each checked; `demo.client` must be connected to `nats_url`'s stack."""
    del nats_url  # the demo's client is already connected to it
    router = RouterClient(demo.client, timeout_s=20, overload_retries=3)
    knobs = _EmulatorKnobs(emulator_control)
    out = demo.out
    told: dict[str, str] = {}

    async def story(request_id: str, until: Callable[[list[str]], bool]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + STORY_TIMEOUT_S
        while True:
            events = (await demo.client.events(correlation_id=request_id)).events
            if until([e["type"] for e in events]) or time.monotonic() > deadline:
                return events
            await asyncio.sleep(0.05)

    def show(answer: InferenceAnswer) -> None:
        moves = " -> ".join(f"{a.deployment} ({a.reason})" for a in answer.attempts)
        out(f"   {answer.deployment} on {answer.served_tier}, {answer.latency_ms:.1f} ms; attempts: {moves}")

    async def served_on_pt() -> None:
        answer = await router.infer(user_call("demo-gemini-first", "What is gang scheduling?", max_tokens=32))
        show(answer)
        check(answer.deployment == "gemini-flash-pt", "a healthy sync request must be served on Gemini PT")
        check(answer.served_tier == "provisioned", "the provider must report provisioned throughput")

    async def spill_to_od() -> None:
        await knobs.set(
            "vertex", "capacity", {"model": GEMINI_FLASH, "pool": "provisioned", "concurrency": 0}
        )
        try:
            answer = await router.infer(user_call("demo-gemini-first", "And topology-aware placement?"))
        finally:
            await knobs.set("vertex", "capacity", {"model": GEMINI_FLASH, "pool": "provisioned"})
        show(answer)
        check(answer.served_tier == "on_demand", "with PT exhausted the request must spill to on-demand")
        events = await story(answer.request_id, lambda t: "inference.completed" in t)
        spills = [e for e in events if e["type"] == "router.spillover"]
        check(bool(spills), "the spillover must be in the audit log")
        spill = spills[0]["payload"]
        out(f"   router.spillover {spill['from_deployment']} -> {spill['to_deployment']} ({spill['reason']})")
        check(spill["reason"] == "pt_exhausted", "the spillover must say PT was exhausted")

    async def fail_over_across_clouds() -> None:
        await knobs.set("bedrock", "outage", {})
        try:
            answer = await router.infer(user_call("demo-claude-first", "Summarise the incident."))
        finally:
            await knobs.set("bedrock", "outage/clear", {})
        show(answer)
        check(answer.provider == "vertex", "with Bedrock down the same request must be answered by Vertex")
        events = await story(answer.request_id, lambda t: "inference.completed" in t)
        failovers = [e["payload"] for e in events if e["type"] == "router.failover"]
        for f in failovers:
            out(
                f"   router.failover {f['from_deployment']} -> {f['to_deployment']} ({f['reason']}, {f['code']})"
            )
        check(
            any(f["to_deployment"].startswith("gemini") for f in failovers),
            "the cross-cloud failover must be in the audit log",
        )
        told["failover"] = answer.request_id

    async def breaker_cycle() -> None:
        await knobs.set("bedrock", "outage", {"model": CLAUDE_HAIKU_PT_ARN})
        try:
            for _ in range(DEMO_CONSECUTIVE_FAILURES):
                await router.infer(user_call("demo-claude-first", "ping"))
        finally:
            await knobs.set("bedrock", "outage/clear", {})
        events = await story("claude-haiku-pt", lambda t: "router.breaker.opened" in t)
        check(
            "router.breaker.opened" in [e["type"] for e in events], "the breaker must open after the outage"
        )
        out("   claude-haiku-pt: breaker opened (consecutive failures); traffic spills to on-demand")
        fractions: list[float] = []
        deadline = time.monotonic() + STORY_TIMEOUT_S
        while time.monotonic() < deadline:
            await router.infer(user_call("demo-claude-first", "ping"))
            board = await router.scoreboard()
            state = next(b for b in board.breakers if b.deployment == "claude-haiku-pt")
            if state.state == "half_open" and state.ramp_fraction not in fractions:
                fractions.append(state.ramp_fraction)
                out(f"   claude-haiku-pt: half-open, admitting {state.ramp_fraction:.0%} of its traffic")
            if state.state == "closed":
                break
            await asyncio.sleep(0.05)
        events = await story("claude-haiku-pt", lambda t: "router.breaker.closed" in t)
        types = [e["type"] for e in events]
        out("   " + " -> ".join(t.removeprefix("router.breaker.") for t in types))
        check(
            types == ["router.breaker.opened", "router.breaker.half_opened", "router.breaker.closed"],
            "the breaker must open, half-open after a probe, and close after its ramp",
        )
        check(len(fractions) >= 2, "the half-open breaker must ramp through its steps")

    async def stream() -> None:
        texts: list[str] = []
        end: InferenceAnswer | None = None
        async for item in router.stream(user_call("search-answer", "Stream me an answer.", max_tokens=16)):
            if isinstance(item, str):
                texts.append(item)
            else:
                end = item
        out(f"   {len(texts)} chunks: {''.join(texts)!r}")
        check(end is not None and len(texts) > 1, "a stream must be chunks then one end frame")
        assert end is not None
        show(end)

    async def async_request() -> None:
        queued = await router.submit(user_call("channel-recap", "Recap the channel overnight."))
        out(f"   queued {queued.request_id} on podway.work.inference")
        events = await story(
            queued.request_id, lambda t: "inference.completed" in t or "inference.failed" in t
        )
        types = [e["type"] for e in events]
        check(types[-1:] == ["inference.completed"], f"the queued request must complete, got {types}")
        completed = events[-1]["payload"]
        out(f"   inference.completed on {completed['deployment']} ({completed['served_tier']})")
        check(completed["requested_tier"] == "on_demand", "async work must go straight to on-demand")

    async def openai_front() -> None:
        text, deployment = await _ask_openai(emulator_control.openai_url)
        out(f"   openai client: {text!r} (served by {deployment})")
        check(bool(text), "the OpenAI-compatible front must answer the openai client")

    async def tell_story() -> None:
        request_id = told["failover"]
        events = await story(request_id, lambda t: "inference.completed" in t)
        out(f"   podway events --request {request_id}")
        for event in events:
            out("   " + event_line(event))
        types = [e["type"] for e in events]
        check(types[-1] == "inference.completed" and "router.failover" in types, "the story must be complete")
        causes = [e["causation_id"] for e in events]
        check(
            causes[1:] == [e["event_id"] for e in events[:-1]], "each event must name the one before as cause"
        )
        recorded = await router.feedback(FeedbackReport(request_id=request_id, score=1.0))
        board = await router.scoreboard()
        rows = {(r.feature, r.model): r for r in board.rows}
        row = rows.get(("demo-claude-first", recorded.model or ""))
        check(
            recorded.recorded and row is not None and row.feedback_count >= 1,
            "feedback must reach the scoreboard",
        )

    await demo.step("Router: a sync request is served on provisioned throughput", served_on_pt)
    await demo.step("Router: PT exhaustion spills to on-demand, with a router.spillover event", spill_to_od)
    await demo.step(
        "Router: a Bedrock outage fails over to Vertex within the same request", fail_over_across_clouds
    )
    await demo.step("Router: a breaker opens, probes, ramps and closes", breaker_cycle)
    await demo.step("Router: a streamed answer is chunks then exactly one end", stream)
    await demo.step("Router: an async request through the work queue completes", async_request)
    await demo.step("Router: the OpenAI-compatible front answers the openai client", openai_front)
    await demo.step(
        "Router: one request's story from the audit log; feedback reaches the scoreboard", tell_story
    )


class _EmulatorKnobs:
    def __init__(self, endpoints: RouterEndpoints) -> None:
        self._urls = {"bedrock": endpoints.bedrock_url, "vertex": endpoints.vertex_url}

    async def set(self, cloud: str, knob: str, body: dict[str, Any]) -> None:
        async with aiohttp.ClientSession() as http:
            response = await http.post(f"{self._urls[cloud]}/__emulator/{knob}", json=body)
            if response.status != 200:
                raise RuntimeError(f"emulator knob {knob} refused: {await response.text()}")


async def _ask_openai(openai_url: str) -> tuple[str, str]:
    """Ask through the official openai client when it is installed (it is a dev dependency), else over raw
    HTTP in the same format."""
    messages = [{"role": "user", "content": "Hello from the openai client"}]
    try:
        from openai import AsyncOpenAI
    except ImportError:
        async with aiohttp.ClientSession() as http:
            response = await http.post(
                f"{openai_url}/v1/chat/completions",
                json={"model": "feature:search-answer", "messages": messages},
                headers={"Authorization": f"Bearer {API_KEY}"},
            )
            body = await response.json()
        return body["choices"][0]["message"]["content"], body["podway"]["deployment"]
    async with AsyncOpenAI(base_url=f"{openai_url}/v1", api_key=API_KEY, max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="feature:search-answer", messages=cast(Any, messages), max_tokens=16
        )
    extra = completion.model_extra or {}
    return completion.choices[0].message.content or "", extra.get("podway", {}).get("deployment", "?")


async def _answers(http: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with http.get(url) as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


def _published_http_url(run_file: Path) -> str | None:
    try:
        url = json.loads(run_file.read_text()).get("http_url")
    except (OSError, ValueError):
        return None
    return url if isinstance(url, str) else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
