"""Podway's router and LiteLLM's Router side by side: the same emulators, the same workload, in one run.

LiteLLM is never a project dependency: this script installs it into its own virtual environment under a cache
directory (`--venv-dir`) together with `aiobotocore[boto3]` (otherwise pip moves botocore past aiobotocore's
pin) and google-auth, then drives it from a worker process running in that environment. Settings follow
LiteLLM's settings for a fair comparison: `LITELLM_LOCAL_MODEL_COST_MAP=True`, `num_retries=0`, `disable_cooldowns=True`; Bedrock through
`bedrock/converse/<model>` with `aws_bedrock_runtime_endpoint`; Vertex through `vertex_ai/gemini-*` with
`api_base` and a throwaway service-account key whose `token_uri` is the emulator's `/token`.

Workload: one request in flight, alternating Bedrock (Claude Haiku on-demand) and Vertex (Gemini Flash
on-demand), the same prompt and `max_tokens`, zero emulator latency. Measured in rounds that alternate Podway
and LiteLLM, so both see the same host load.

Added latency is defined as in docs/router.md for both sides: per request, the end-to-end time at the caller minus the time
inside the provider call. The provider call is the same boundary on both sides, the call from the routing layer
into its per-cloud adapter that turns the request into the cloud's wire format, sends it, and turns the answer
back: Podway's `Provider.stream`, which its router uses for whole answers too (its adapter plus the real
aiobotocore / google-cloud-aiplatform client, the time spent waiting on each chunk), and
LiteLLM's `BedrockConverseLLM` / `VertexLLM` handlers (`completion`, which resolves credentials and the
endpoint, and the `async_completion` it returns, which transforms, signs, sends and parses). Both are timed by
this script from outside, by wrapping them, the same way; the LiteLLM worker fails rather than report a request
whose handler it did not see exactly once. LiteLLM's handlers also log the request (`pre_call`), so that part of
its own overhead is counted as provider time: the comparison errs in LiteLLM's favour.

The previous definition, end to end minus the median of a raw aiohttp call to the same endpoint (which charges
each side's cloud client as well as its routing layer), is still reported as `*_over_raw_http_*` and
`overhead_ratio_over_raw_http`, next to CPU per request, so both readings stay visible.

If LiteLLM cannot be installed (no package index), the script says so and exits non-zero: no figures are made up.

    python -m bench.router_vs_litellm -o json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from bench.litellm_env import LiteLLMUnavailable, ensure_litellm_env
from bench.measure import percentile_or_none
from bench.router import _emulators, _round
from libs.core.routing import RoutingPolicy, parse_policy
from libs.providers import (
    Chunk,
    Completion,
    Message,
    Provider,
    ProviderRequest,
    close_providers,
    open_providers,
)
from libs.router import EventBuffer, InferRequest, Router
from libs.router.example_policy import CLAUDE_HAIKU_OD, GEMINI_FLASH, example_policy_document

PROMPT = "Summarise the incident timeline for the on-call channel in two sentences."
CLOUDS = ("bedrock", "vertex")
FEATURES = {"bedrock": "bench-bedrock", "vertex": "bench-vertex"}
LITELLM_PACKAGES = ("litellm", "aiobotocore[boto3]", "google-auth")


def default_venv_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "podway" / "bench-litellm-venv"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument("--requests", type=int, default=600, help="measured requests per side, both clouds")
    parser.add_argument("--rounds", type=int, default=3, help="alternating Podway / LiteLLM rounds")
    parser.add_argument("--warmup", type=int, default=100, help="requests per side before measuring")
    parser.add_argument("--baseline-requests", type=int, default=200, help="raw HTTP calls per cloud")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--venv-dir", type=Path, default=default_venv_dir(), help="LiteLLM's own virtualenv")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Install LiteLLM if needed, run both sides against one pair of emulators, return the figures."""
    try:
        python, version = ensure_litellm_env(args.venv_dir, LITELLM_PACKAGES, "litellm, google.auth")
    except LiteLLMUnavailable as exc:
        print(f"router-vs-litellm: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    load_before = os.getloadavg()[0]
    with _emulators() as urls:
        sides = asyncio.run(_compare(args, urls, python))
    podway, litellm = sides["podway"], sides["litellm"]
    metrics: dict[str, Any] = {}
    for key, reading in (("", "added_ms"), ("_over_raw_http", "over_raw_ms")):
        podway_p50 = percentile_or_none(sorted(podway[reading]), 0.50)
        litellm_p50 = percentile_or_none(sorted(litellm[reading]), 0.50)
        metrics |= {
            f"podway_added{key}_ms_p50": _round(podway_p50),
            f"podway_added{key}_ms_p99": _round(percentile_or_none(sorted(podway[reading]), 0.99)),
            f"litellm_added{key}_ms_p50": _round(litellm_p50),
            f"litellm_added{key}_ms_p99": _round(percentile_or_none(sorted(litellm[reading]), 0.99)),
            f"overhead_ratio{key}": round(litellm_p50 / podway_p50, 2)
            if podway_p50 and litellm_p50
            else None,
        }
    metrics |= {
        "podway_cpu_ms_per_request": round(podway["cpu_ms_per_request"], 3),
        "litellm_cpu_ms_per_request": round(litellm["cpu_ms_per_request"], 3),
        "podway_router_reported_added_ms_p50": _round(
            percentile_or_none(sorted(podway["reported_added_ms"]), 0.50)
        ),
        "requests_per_side": len(podway["added_ms"]),
        "failed_requests": podway["failed"] + litellm["failed"],
    }
    for cloud in CLOUDS:
        for side, figures in (("podway", podway), ("litellm", litellm)):
            metrics[f"{side}_added_ms_p50_{cloud}"] = _round(
                percentile_or_none(sorted(figures["by_cloud"][cloud]), 0.50)
            )
            metrics[f"{side}_provider_call_ms_p50_{cloud}"] = _round(
                percentile_or_none(sorted(figures["provider_ms"][cloud]), 0.50)
            )
        metrics[f"raw_http_ms_p50_{cloud}"] = _round(podway["baseline_ms"][cloud])
    params = {
        "requests": args.requests,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "baseline_requests": args.baseline_requests,
        "max_tokens": args.max_tokens,
        "in_flight": 1,
        "workload": "alternating Bedrock Claude Haiku OD / Vertex Gemini Flash OD, zero emulator latency",
        "added_definition": "per request, end to end at the caller minus the time inside the provider call "
        "(Podway Provider.complete; LiteLLM BedrockConverseLLM/VertexLLM completion + async_completion)",
        "added_over_raw_http_definition": "end to end at the caller minus the median raw aiohttp call",
        "litellm_version": version,
        "litellm_settings": "num_retries=0, disable_cooldowns=True, LITELLM_LOCAL_MODEL_COST_MAP=True",
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
    }
    return {"name": "router-vs-litellm", "params": params, "metrics": metrics}


# --- LiteLLM's own environment ---------------------------------------------------------------------------


# --- the two sides -----------------------------------------------------------------------------------------


async def _compare(args: argparse.Namespace, urls: dict[str, str], python: Path) -> dict[str, dict[str, Any]]:
    per_round = max(2, args.requests // args.rounds)
    sides: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="podway-litellm-") as tmp:
        worker_path = Path(tmp) / "litellm_worker.py"
        worker_path.write_text(WORKER)
        worker = await asyncio.create_subprocess_exec(
            str(python),
            str(worker_path),
            json.dumps({**urls, "max_tokens": args.max_tokens, "prompt": PROMPT}),
            json.dumps(
                {
                    cloud: [url, body.decode(), headers]
                    for cloud, (url, body, headers) in raw_calls(
                        urls["bedrock"], urls["vertex"], args.max_tokens
                    ).items()
                }
            ),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=os.environ | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
        try:
            litellm = _LiteLLMWorker(worker)
            await litellm.ask({"op": "ready"})
            policy = _policy(urls)
            providers = await open_providers(policy.providers)
            try:
                timed = {name: _TimedProvider(provider) for name, provider in providers.items()}
                router = Router(policy, timed, event_sink=EventBuffer(max_events=1000))
                podway = _PodwaySide(router, timed, args.max_tokens)
                for side in (podway, litellm):
                    await side.run({"op": "warmup", "count": args.warmup})
                    await side.run({"op": "baseline", "count": args.baseline_requests})
                for _ in range(args.rounds):
                    for side in (podway, litellm):
                        await side.run({"op": "measure", "count": per_round})
            finally:
                await close_providers(providers)
            sides = {"podway": podway.summary(), "litellm": await litellm.summary()}
        finally:
            if worker.returncode is None:
                worker.kill()
            await worker.wait()
    return sides


class _Tally:
    """What one side measured: per request, end to end and the time inside the provider call."""

    def __init__(self) -> None:
        self.baseline: dict[str, list[float]] = {cloud: [] for cloud in CLOUDS}
        self.e2e: dict[str, list[float]] = {cloud: [] for cloud in CLOUDS}
        self.provider: dict[str, list[float]] = {cloud: [] for cloud in CLOUDS}
        self.reported_added_ms: list[float] = []
        self.cpu_s = 0.0
        self.failed = 0

    def summary(self) -> dict[str, Any]:
        baseline = {cloud: percentile_or_none(sorted(v), 0.50) or 0.0 for cloud, v in self.baseline.items()}
        by_cloud = {
            cloud: [e - p for e, p in zip(self.e2e[cloud], self.provider[cloud], strict=True)]
            for cloud in CLOUDS
        }
        count = sum(len(v) for v in self.e2e.values())
        return {
            "added_ms": [a for cloud in CLOUDS for a in by_cloud[cloud]],
            "by_cloud": by_cloud,
            "provider_ms": self.provider,
            "over_raw_ms": [e - baseline[cloud] for cloud in CLOUDS for e in self.e2e[cloud]],
            "baseline_ms": baseline,
            "reported_added_ms": self.reported_added_ms,
            "cpu_ms_per_request": self.cpu_s * 1000.0 / max(count, 1),
            "failed": self.failed,
        }


class _TimedProvider:
    """A provider whose calls this script times from outside, as the LiteLLM worker times LiteLLM's handlers."""

    def __init__(self, provider: Provider) -> None:
        self.name = provider.name
        self._provider = provider
        self.inside_s = 0.0

    async def complete(self, request: ProviderRequest) -> Completion:
        started = time.perf_counter()
        try:
            return await self._provider.complete(request)
        finally:
            self.inside_s += time.perf_counter() - started

    async def stream(self, request: ProviderRequest) -> AsyncIterator[Chunk]:
        """The router asks for a whole answer as a stream (docs/router.md): the time spent waiting on it."""
        chunks = self._provider.stream(request)
        try:
            while True:
                started = time.perf_counter()
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                finally:
                    self.inside_s += time.perf_counter() - started
                yield chunk
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    async def aclose(self) -> None:
        await self._provider.aclose()


class _PodwaySide(_Tally):
    def __init__(self, router: Router, providers: dict[str, _TimedProvider], max_tokens: int) -> None:
        super().__init__()
        self._router = router
        self._providers = providers
        self._max_tokens = max_tokens
        self._raw = _RawHttp()

    async def run(self, command: dict[str, Any]) -> None:
        count = command["count"]
        if command["op"] == "baseline":
            self.baseline = await self._raw.measure(self._router.policy, count, self._max_tokens)
            return
        measuring = command["op"] == "measure"
        cpu = time.process_time()
        for i in range(count):
            cloud = CLOUDS[i % 2]
            provider = self._providers[cloud]
            request = InferRequest(FEATURES[cloud], (Message("user", PROMPT),), max_tokens=self._max_tokens)
            provider.inside_s = 0.0
            started = time.perf_counter()
            try:
                result = await self._router.infer(request)
            except Exception:
                self.failed += measuring
                continue
            if measuring:
                self.e2e[cloud].append((time.perf_counter() - started) * 1000.0)
                self.provider[cloud].append(provider.inside_s * 1000.0)
                self.reported_added_ms.append(result.added_ms)
        if measuring:
            self.cpu_s += time.process_time() - cpu


class _RawHttp:
    """The bare HTTP exchange each side's added time is measured against."""

    async def measure(self, policy: RoutingPolicy, count: int, max_tokens: int) -> dict[str, list[float]]:
        bedrock = policy.providers["bedrock"].endpoint_url
        vertex = policy.providers["vertex"].api_endpoint
        assert bedrock is not None
        assert vertex is not None
        calls = raw_calls(bedrock, vertex, max_tokens)
        timings: dict[str, list[float]] = {cloud: [] for cloud in CLOUDS}
        async with aiohttp.ClientSession() as http:
            for i in range(count * 2):
                cloud = CLOUDS[i % 2]
                url, body, headers = calls[cloud]
                started = time.perf_counter()
                async with http.post(url, data=body, headers=headers) as response:
                    await response.read()
                timings[cloud].append((time.perf_counter() - started) * 1000.0)
        return timings


def raw_calls(bedrock: str, vertex: str, max_tokens: int) -> dict[str, tuple[str, bytes, dict[str, str]]]:
    """The same requests as the SDKs send, as bare HTTP (shared with the LiteLLM worker)."""
    from urllib.parse import quote

    converse = {
        "messages": [{"role": "user", "content": [{"text": PROMPT}]}],
        "inferenceConfig": {"maxTokens": max_tokens},
    }
    generate = {
        "contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
        "generationConfig": {"maxOutputTokens": max_tokens},
    }
    model_path = f"projects/acme-ai/locations/us-central1/publishers/google/models/{GEMINI_FLASH}"
    json_type = {"Content-Type": "application/json"}
    return {
        "bedrock": (
            f"{bedrock}/model/{quote(CLAUDE_HAIKU_OD, safe='')}/converse",
            json.dumps(converse).encode(),
            json_type,
        ),
        "vertex": (
            f"{vertex}/v1/{model_path}:generateContent",
            json.dumps(generate).encode(),
            json_type | {"X-Vertex-AI-LLM-Request-Type": "shared"},
        ),
    }


class _LiteLLMWorker:
    """The worker process in LiteLLM's venv, driven one JSON command per line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    async def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(json.dumps(command).encode() + b"\n")
        await self._process.stdin.drain()
        line = await self._process.stdout.readline()
        if not line:
            raise LiteLLMUnavailable("the LiteLLM worker exited; see its stderr above")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise LiteLLMUnavailable(f"the LiteLLM worker failed: {reply['error']}")
        return reply

    async def run(self, command: dict[str, Any]) -> None:
        await self.ask(command)

    async def summary(self) -> dict[str, Any]:
        tally = _Tally()
        reply = await self.ask({"op": "report"})
        tally.baseline = reply["baseline"]
        tally.e2e = reply["e2e"]
        tally.provider = reply["provider"]
        tally.cpu_s = reply["cpu_s"]
        tally.failed = reply["failed"]
        return tally.summary()


def _policy(urls: dict[str, str]) -> RoutingPolicy:
    """On-demand deployments only (LiteLLM has no PT concept), one feature per cloud."""
    document = example_policy_document(urls["bedrock"], urls["vertex"])
    document["deployments"] = {
        name: spec for name, spec in document["deployments"].items() if spec["tier"] == "on_demand"
    }
    document["models"] = {"claude-haiku": ["claude-haiku-od"], "gemini-flash": ["gemini-flash-od"]}
    document["features"] = {
        feature: {"latency": "sync", "deadline_ms": 8000, "routes": [{"weight": 1, "models": [model]}]}
        for feature, model in ((FEATURES["bedrock"], "claude-haiku"), (FEATURES["vertex"], "gemini-flash"))
    }
    document["api_keys"] = {}
    return parse_policy(document)


WORKER = r'''
"""Runs inside LiteLLM's own venv: the same workload through litellm.Router, one JSON command per line."""
import asyncio, json, sys, time

import aiohttp
import litellm
from litellm.llms.bedrock.chat.converse_handler import BedrockConverseLLM
from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import VertexLLM
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CONFIG = json.loads(sys.argv[1])
CLOUDS = ("bedrock", "vertex")
PROMPT = CONFIG["prompt"]
MAX_TOKENS = CONFIG["max_tokens"]


def service_account():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return json.dumps({
        "type": "service_account", "project_id": "acme-ai", "private_key_id": "bench", "private_key": pem,
        "client_email": "bench@acme-ai.iam.gserviceaccount.com", "client_id": "1",
        "token_uri": CONFIG["vertex"] + "/token",
    })


ROUTER = litellm.Router(
    model_list=[
        {"model_name": "bedrock", "litellm_params": {
            "model": "bedrock/converse/anthropic.claude-3-haiku-20240307-v1:0",
            "aws_bedrock_runtime_endpoint": CONFIG["bedrock"], "aws_region_name": "us-east-1",
            "aws_access_key_id": "bench", "aws_secret_access_key": "bench"}},
        {"model_name": "vertex", "litellm_params": {
            "model": "vertex_ai/gemini-2.5-flash", "api_base": CONFIG["vertex"],
            "vertex_project": "acme-ai", "vertex_location": "us-central1",
            "vertex_credentials": service_account()}},
    ],
    num_retries=0,
    disable_cooldowns=True,
)
baseline = {c: [] for c in CLOUDS}
e2e = {c: [] for c in CLOUDS}
provider = {c: [] for c in CLOUDS}
state = {"cpu_s": 0.0, "failed": 0}
inside = {"s": 0.0, "calls": 0}


def timed(method, counts):
    """Time one of LiteLLM's per-cloud handler methods (its provider call), sync or async."""
    if asyncio.iscoroutinefunction(method):
        async def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                inside["s"] += time.perf_counter() - started
                inside["calls"] += counts
    else:
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                inside["s"] += time.perf_counter() - started
    return wrapper


for handler in (BedrockConverseLLM, VertexLLM):
    handler.completion = timed(handler.completion, 0)
    handler.async_completion = timed(handler.async_completion, 1)


async def handle(command, raw_calls):
    op, count = command["op"], command.get("count", 0)
    if op == "baseline":
        async with aiohttp.ClientSession() as http:
            for i in range(count * 2):
                cloud = CLOUDS[i % 2]
                url, body, headers = raw_calls[cloud]
                started = time.perf_counter()
                async with http.post(url, data=body.encode(), headers=headers) as response:
                    await response.read()
                baseline[cloud].append((time.perf_counter() - started) * 1000.0)
        return {"ok": True}
    if op in ("warmup", "measure"):
        cpu = time.process_time()
        for i in range(count):
            cloud = CLOUDS[i % 2]
            inside.update(s=0.0, calls=0)
            started = time.perf_counter()
            try:
                await ROUTER.acompletion(
                    model=cloud, messages=[{"role": "user", "content": PROMPT}], max_tokens=MAX_TOKENS
                )
            except Exception as exc:
                print(f"litellm {cloud}: {exc!r}", file=sys.stderr)
                state["failed"] += op == "measure"
                continue
            ended = time.perf_counter()
            if inside["calls"] != 1:
                raise RuntimeError(f"saw {inside['calls']} calls into LiteLLM's {cloud} handler, not 1")
            if op == "measure":
                e2e[cloud].append((ended - started) * 1000.0)
                provider[cloud].append(inside["s"] * 1000.0)
        if op == "measure":
            state["cpu_s"] += time.process_time() - cpu
        return {"ok": True}
    if op == "report":
        return {"baseline": baseline, "e2e": e2e, "provider": provider, **state}
    return {"ok": True}


async def main():
    loop = asyncio.get_running_loop()
    raw_calls = json.loads(sys.argv[2])
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        try:
            reply = await handle(json.loads(line), raw_calls)
        except Exception as exc:
            reply = {"error": repr(exc)}
        print(json.dumps(reply), flush=True)


asyncio.run(main())
'''


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.router_vs_litellm [options] [-o json|table]`, the same as `podway bench router-vs-litellm`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["router-vs-litellm", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
