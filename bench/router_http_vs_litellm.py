"""Podway's OpenAI-compatible front and LiteLLM's proxy side by side: the same two deployments on the same
emulators, the same open-loop client and rates, the raw emulator call measured in the same run.

LiteLLM's proxy (`litellm[proxy]`) is never a project dependency: it is installed into a virtual environment of
its own under a cache directory (`--venv-dir`) together with `aiobotocore[boto3]` and google-auth, as the SDK
comparison does, and started as `litellm --config`, in one process by default (`--litellm-workers`): with
`--num_workers 2`, LiteLLM 1.108.7's worker processes die at start-up on this machine, so the default compares
Podway as `podway up` deploys it (one router process per CPU) with LiteLLM's proxy as it starts.
Its settings are LiteLLM's for a fair comparison: `LITELLM_LOCAL_MODEL_COST_MAP=True`, `num_retries: 0`, cooldowns off; Bedrock
through `bedrock/converse/<model>` with `aws_bedrock_runtime_endpoint`; Vertex through `vertex_ai/gemini-*`
with `api_base` and a throwaway service-account key whose `token_uri` is the emulator's `/token`. Callers
authenticate with a master key (Podway with a policy API key); neither side has a database for its keys.

For each rate and path the raw call, Podway and LiteLLM each get `--duration` seconds of open-loop load
(bench/router_http.py's client); `added_ms_pXX` is each side's percentile minus the raw call's.
`*_p99_over_50ms_at` is the lowest offered rate at which the side's added p99 passed 50 ms (or it failed
requests); null when it never did at the rates tried.

What it leaves out: what bench/router_http.py leaves out, and LiteLLM's optional parts (its database, spend
tracking, Redis): both sides run bare.

    python -m bench.router_http_vs_litellm -o json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.litellm_env import LiteLLMUnavailable, ensure_litellm_env
from bench.router import _emulators
from bench.router_http import (
    FEATURES,
    PATHS,
    PROMPT,
    Call,
    Run,
    front_call,
    open_loop,
    raw_call,
    router_front,
)
from libs.router.example_policy import CLAUDE_HAIKU_OD, GEMINI_FLASH

LITELLM_PACKAGES = ("litellm[proxy]", "aiobotocore[boto3]", "google-auth")
MASTER_KEY = "sk-podway-bench"
P99_LIMIT_MS = 50.0


def default_venv_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "podway" / "bench-litellm-proxy-venv"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument(
        "--rates", default="100,300,500,1000", help="offered requests per second, comma-separated"
    )
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of load per rate, path and side")
    parser.add_argument("--processes", type=int, default=0, help="Podway router processes; 0 = one per CPU")
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="seconds at 100 req/s per side before measuring"
    )
    parser.add_argument("--litellm-workers", type=int, default=1, help="uvicorn workers of LiteLLM's proxy")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--venv-dir", type=Path, default=default_venv_dir(), help="LiteLLM's own virtualenv")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Install LiteLLM's proxy if needed, run both fronts on one pair of emulators, return the figures."""
    rates = [float(r) for r in args.rates.split(",")]
    try:
        python, version = ensure_litellm_env(args.venv_dir, LITELLM_PACKAGES, "litellm.proxy.proxy_server")
        litellm_bin = python.parent / "litellm"
    except LiteLLMUnavailable as exc:
        print(f"router-http-vs-litellm: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    load_before = os.getloadavg()[0]
    with (
        _emulators() as urls,
        tempfile.TemporaryDirectory(prefix="podway-bench-http-litellm-") as tmp,
        router_front(urls, Path(tmp) / "podway", args.processes) as podway,
        litellm_proxy(litellm_bin, urls, Path(tmp) / "litellm", args.litellm_workers) as litellm_url,
    ):
        metrics = asyncio.run(_measure(args, rates, urls, podway.url, litellm_url))
    params = {
        "rates": rates,
        "duration_s": args.duration,
        "podway_router_processes": podway.processes,
        "litellm_workers": args.litellm_workers,
        "warmup_s": args.warmup,
        "max_tokens": args.max_tokens,
        "client": "aiohttp, open loop, one process, pooled keep-alive connections",
        "paths": "bedrock: claude-haiku on-demand (Converse); vertex: gemini-flash on-demand (generateContent)",
        "emulator_latency_ms": 0,
        "litellm_version": version,
        "litellm_settings": "num_retries 0, cooldowns off, no database, LITELLM_LOCAL_MODEL_COST_MAP=True",
        "podway": "router processes on one socket, embedded nats-server, SQLite audit log",
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
    }
    return {"name": "router-http-vs-litellm", "params": params, "metrics": metrics}


# --- LiteLLM's proxy -----------------------------------------------------------------------------------------


def _service_account(token_uri: str) -> dict[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return {
        "type": "service_account",
        "project_id": "acme-ai",
        "private_key_id": "bench",
        "private_key": pem,
        "client_email": "bench@acme-ai.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }


def litellm_config(urls: dict[str, str], credentials_path: Path) -> dict[str, Any]:
    """The two deployments of the Podway side, as LiteLLM's proxy names them (one model name per path)."""
    return {
        "model_list": [
            {
                "model_name": FEATURES["bedrock"],
                "litellm_params": {
                    "model": f"bedrock/converse/{CLAUDE_HAIKU_OD}",
                    "aws_bedrock_runtime_endpoint": urls["bedrock"],
                    "aws_region_name": "us-east-1",
                    "aws_access_key_id": "bench",
                    "aws_secret_access_key": "bench",
                },
            },
            {
                "model_name": FEATURES["vertex"],
                "litellm_params": {
                    "model": f"vertex_ai/{GEMINI_FLASH}",
                    "api_base": urls["vertex"],
                    "vertex_project": "acme-ai",
                    "vertex_location": "us-central1",
                    "vertex_credentials": str(credentials_path),
                },
            },
        ],
        "litellm_settings": {"num_retries": 0, "request_timeout": 30, "drop_params": True},
        "router_settings": {"disable_cooldowns": True},
        "general_settings": {"master_key": MASTER_KEY},
    }


@contextmanager
def litellm_proxy(litellm_bin: Path, urls: dict[str, str], work_dir: Path, workers: int) -> Iterator[str]:
    """LiteLLM's proxy on a free port with `workers` uvicorn workers; yields its URL."""
    work_dir.mkdir(parents=True, exist_ok=True)
    credentials = work_dir / "service-account.json"
    credentials.write_text(json.dumps(_service_account(f"{urls['vertex']}/token")))
    config = work_dir / "config.yaml"
    config.write_text(yaml.safe_dump(litellm_config(urls, credentials)))
    port = _free_port()
    env = os.environ | {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "PYTHONUNBUFFERED": "1",
    }
    with (work_dir / "litellm.log").open("wb") as log:
        process = subprocess.Popen(
            [str(litellm_bin), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
            + (["--num_workers", str(workers)] if workers > 1 else []),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, work_dir / "litellm.log")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LiteLLMUnavailable(f"LiteLLM's proxy exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise LiteLLMUnavailable(f"LiteLLM's proxy did not listen in time: {log.read_text()[-2000:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def litellm_call(url: str, path: str, max_tokens: int) -> Call:
    """The same chat completion as the Podway side's, to LiteLLM's proxy (the model name is the path's)."""
    body = {
        "model": FEATURES[path],
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
    }
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {MASTER_KEY}"}
    return Call(f"{url}/v1/chat/completions", json.dumps(body).encode(), headers)


# --- measuring -----------------------------------------------------------------------------------------------


async def _ready(http: aiohttp.ClientSession, call: Call, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        detail = ""
        try:
            async with http.post(call.url, data=call.body, headers=call.headers) as response:
                if response.status == 200:
                    return
                detail = (await response.text())[:500]
        except aiohttp.ClientError as exc:
            detail = repr(exc)
        if time.monotonic() > deadline:
            raise LiteLLMUnavailable(f"{call.url} never answered: {detail}")
        await asyncio.sleep(0.5)


async def _measure(
    args: argparse.Namespace, rates: list[float], urls: dict[str, str], podway_url: str, litellm_url: str
) -> dict[str, Any]:
    def podway(path: str) -> Call:
        return front_call(podway_url, path, args.max_tokens)

    def litellm(path: str) -> Call:
        return litellm_call(litellm_url, path, args.max_tokens)

    sides: dict[str, Callable[[str], Call]] = {"podway": podway, "litellm": litellm}
    metrics: dict[str, Any] = {}
    over_limit_at: dict[str, float | None] = dict.fromkeys(sides)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for path in PATHS:
            for call_of in sides.values():
                await _ready(http, call_of(path))
                await open_loop(http, call_of(path), 100, args.warmup)
        for rate in rates:
            key = f"{int(rate)}rps"
            for path in PATHS:
                raw = await open_loop(http, raw_call(urls, path, args.max_tokens), rate, args.duration)
                for side, call_of in sides.items():
                    through = await open_loop(http, call_of(path), rate, args.duration)
                    figures = _added(raw, through)
                    metrics |= {f"{side}_{path}_{key}_{name}": value for name, value in figures.items()}
                    p99 = figures["added_ms_p99"]
                    if over_limit_at[side] is None and (through.errors or p99 is None or p99 > P99_LIMIT_MS):
                        over_limit_at[side] = rate
                metrics[f"raw_{path}_{key}_ms_p50"] = _round(raw.percentile(0.5))
                metrics[f"raw_{path}_{key}_ms_p99"] = _round(raw.percentile(0.99))
    for side, over_at in over_limit_at.items():
        metrics[f"{side}_p99_over_50ms_at"] = over_at
    for key in [f"{int(r)}rps" for r in rates]:
        ratios = []
        for path in PATHS:
            ours, theirs = (
                metrics[f"podway_{path}_{key}_added_ms_p99"],
                metrics[f"litellm_{path}_{key}_added_ms_p99"],
            )
            if ours and theirs and ours > 0:
                ratios.append(theirs / ours)
        metrics[f"added_p99_ratio_{key}"] = round(min(ratios), 1) if ratios else None
    return metrics


def _added(raw: Run, through: Run) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, fraction in (("p50", 0.50), ("p99", 0.99)):
        raw_ms, side_ms = raw.percentile(fraction), through.percentile(fraction)
        figures[f"added_ms_{name}"] = (
            _round(side_ms - raw_ms) if raw_ms is not None and side_ms is not None else None
        )
    figures["errors"] = through.errors
    figures["answered_per_s"] = (
        round(len(through.latencies_ms) / through.elapsed_s, 1) if through.elapsed_s else None
    )
    return figures


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.router_http_vs_litellm [options]`, the same as `podway bench router-http-vs-litellm`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["router-http-vs-litellm", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
