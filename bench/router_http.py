"""The router as users reach it: open-loop load through the OpenAI-compatible HTTP front, against the raw
emulator call measured the same way in the same run.

Topology (what `podway up` runs): the emulators in a child process answering at once; the router service in
`--processes` processes (default one per CPU) sharing one listening socket held by the stack, each on the
embedded nats-server and the SQLite audit log, auditing and counting metrics as in production; this process
is the client. All of them share the machine's cores.

For each rate and each path (Bedrock through Claude Haiku on-demand, Vertex through Gemini Flash on-demand)
the client offers `--duration` seconds of requests (at least `--min-requests`) open-loop (a request is sent
at its time whatever is outstanding; none is held back) straight to the emulator (the request the SDK sends,
as bare HTTP) and as many through the front (an OpenAI chat completion with a bearer key and
`model: feature:<name>`), alternating the two in one-second windows so that both meet the same swings of
the host's speed. Latency is
measured from the moment each request is sent to its whole answer. `added_ms_pXX` is the front's percentile
minus the raw call's at the same rate and path. `router_cpu_ms_per_request` is the CPU the router processes
used (all of it: HTTP, policy, SDK call, audit, metrics, NATS) over the requests they answered;
`emulator_cpu_ms_per_request`, what the emulators' process used per raw call at the same rate, is a floor
for comparison: one HTTP server doing next to nothing per request on the same host.
`max_rate_added_p99_under_5ms` is the highest rate at which both paths added under 5 ms at p99 with no errors.
SSE (measured first, at light load): one streamed request at a time, time to the first byte of the body,
straight from the emulator and through the front in turn. Breakers are held closed, so that a rate the host cannot
carry (the router's own backlog looks like slow deployments) does not fail the phases after it.

`--fleet`: the fleet under one shared budget instead. `--processes` router processes (4 by default; try 8)
share the feature `bench-vertex`'s `--fleet-budget` tokens per minute through the ledger (NATS KV token
buckets with leased grants); the client offers `--fleet-rate` requests a second, open loop, for
`--fleet-duration` seconds, far above what the budget admits, and adds up the tokens of the answers (the usage
each reports; 429s spend nothing). One process holding the whole budget, starting full, may spend
`budget x (1 + T/60)` over T seconds: `overshoot_fraction_of_minute` is what the fleet answered beyond that,
as a fraction of one minute's budget (target <= 5 % with 8 processes). It leaves out the key's budgets (none
is set) and a process dying with its grant (tests/integration/router_service/test_fleet_budget.py).

What it leaves out: network between hosts (everything is on 127.0.0.1), real provider latency (the emulators
answer at zero latency, which is the hard case for overhead), PT capacity (on-demand deployments only, as in
the LiteLLM comparison), and TLS.

    python -m bench.router_http -o json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import psutil
import yaml

from bench.measure import cpu_seconds, percentile_or_none
from bench.router import NO_BREAKER, _emulators, _round
from libs.router.example_policy import CLAUDE_HAIKU_OD, GEMINI_FLASH, example_policy_document
from libs.runtime.settings import PodwaySettings
from libs.runtime.stack import Stack

PROMPT = "Summarise the incident timeline for the on-call channel in two sentences."
PATHS = ("bedrock", "vertex")
FEATURES = {"bedrock": "bench-bedrock", "vertex": "bench-vertex"}
API_KEY = "bench-key"
ADDED_P99_TARGET_MS = 5.0
REQUEST_TIMEOUT_S = 10.0
WINDOW_S = 1.0
"""Raw and front calls alternate in windows this long: the host's speed swings by tens of percent over
seconds, and measured one after the other the two could see different hosts."""
READY_TIMEOUT_S = 300.0  # router processes import both cloud SDKs; a busy 2-core host takes a while


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument(
        "--rates", default="100,300,500,1000", help="offered requests per second, comma-separated"
    )
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of load per rate, path and side")
    parser.add_argument(
        "--min-requests",
        type=int,
        default=1000,
        help="requests per rate, path and side at least (a low rate runs longer than --duration)",
    )
    parser.add_argument("--processes", type=int, default=0, help="router processes; 0 = one per CPU")
    parser.add_argument(
        "--event-loop", choices=("uvloop", "asyncio"), default="uvloop", help="the router's event loop"
    )
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="seconds of load at 100 req/s before measuring"
    )
    parser.add_argument("--sse-requests", type=int, default=200, help="streamed requests per path and side")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="measure the overshoot of a fleet under one shared budget instead",
    )
    parser.add_argument("--fleet-budget", type=int, default=30_000, help="--fleet: tokens per minute")
    parser.add_argument(
        "--fleet-rate", type=float, default=200.0, help="--fleet: offered requests per second"
    )
    parser.add_argument("--fleet-duration", type=float, default=30.0, help="--fleet: seconds of load")
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="give both features and the API key budgets and a request rate, shared by the router processes "
        "through the ledger (large enough never to refuse: what they cost, not what they refuse)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the emulators and the front, measure, stop; returns `{"name", "params", "metrics"}`."""
    if args.fleet:
        return run_fleet(args)
    rates = [float(r) for r in args.rates.split(",")]
    load_before = os.getloadavg()[0]
    with (
        _emulators() as urls,
        tempfile.TemporaryDirectory(prefix="podway-bench-router-http-") as tmp,
        router_front(
            urls, Path(tmp), args.processes, event_loop=args.event_loop, budgets=args.budgets
        ) as front,
    ):
        metrics = asyncio.run(_measure(args, rates, urls, front))
    params = {
        "rates": rates,
        "duration_s": args.duration,
        "min_requests": args.min_requests,
        "router_processes": front.processes,
        "router_event_loop": args.event_loop,
        "warmup_s": args.warmup,
        "sse_requests": args.sse_requests,
        "max_tokens": args.max_tokens,
        "budgets": BUDGETS if args.budgets else None,
        "client": "aiohttp, open loop, one process, pooled keep-alive connections",
        "paths": "bedrock: claude-haiku on-demand (Converse); vertex: gemini-flash on-demand (generateContent)",
        "emulator_latency_ms": 0,
        "audit": "embedded nats-server, SQLite audit log, group commit every 50 ms",
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
    }
    return {"name": "router-http", "params": params, "metrics": metrics}


def run_fleet(args: argparse.Namespace) -> dict[str, Any]:
    """`--fleet`: the overshoot of `--processes` router processes under one shared budget."""
    processes = args.processes or 4
    load_before = os.getloadavg()[0]
    with (
        _emulators() as urls,
        tempfile.TemporaryDirectory(prefix="podway-bench-router-fleet-") as tmp,
        router_front(
            urls,
            Path(tmp),
            processes,
            event_loop=args.event_loop,
            fleet_budget=args.fleet_budget,
        ) as front,
    ):
        metrics = asyncio.run(_measure_fleet(args, front))
    params = {
        "fleet": True,
        "router_processes": front.processes,
        "feature_tokens_per_minute": args.fleet_budget,
        "offered_rps": args.fleet_rate,
        "duration_s": args.fleet_duration,
        "max_tokens": args.max_tokens,
        "router_event_loop": args.event_loop,
        "ledger": "embedded nats-server, KV bucket podway_router_ledger, leased grants",
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
    }
    return {"name": "router-http", "params": params, "metrics": metrics}


@dataclass
class FleetRun:
    """Tokens answered, requests refused and failed over one open-loop run against a budget."""

    answered: int = 0
    tokens: int = 0
    refused: int = 0
    errors: int = 0
    first_sent: float = 0.0
    last_answered: float = 0.0


async def _measure_fleet(args: argparse.Namespace, front: Front) -> dict[str, Any]:
    call = front_call(front.url, "vertex", args.max_tokens)
    run = FleetRun()
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)

    async def one(http: aiohttp.ClientSession) -> None:
        try:
            async with http.post(call.url, data=call.body, headers=call.headers, timeout=timeout) as response:
                body = await response.read()
        except (aiohttp.ClientError, TimeoutError):
            run.errors += 1
            return
        if response.status == 429:
            run.refused += 1
        elif response.status != 200:
            run.errors += 1
        else:
            run.answered += 1
            run.tokens += json.loads(body)["usage"]["total_tokens"]
            run.last_answered = time.perf_counter()

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        deadline = time.monotonic() + 60.0
        while not run.answered:  # the providers open lazily; this first answer's tokens count too
            await one(http)
            if time.monotonic() > deadline:
                raise RuntimeError("the front never answered")
        tasks: set[asyncio.Task[None]] = set()
        run.first_sent = start = time.perf_counter()
        for i in range(max(1, int(args.fleet_rate * args.fleet_duration))):
            delay = start + i / args.fleet_rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(one(http))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.gather(*list(tasks))
    return fleet_figures(run, args.fleet_budget)


def fleet_figures(run: FleetRun, budget: int) -> dict[str, Any]:
    """What the fleet answered against what one bucket of `budget` tokens a minute, full at the start, allows
    over the same window."""
    window_s = max(run.last_answered - run.first_sent, 0.0)
    ideal = budget * (1.0 + window_s / 60.0)
    return {
        "answered": run.answered,
        "refused_429": run.refused,
        "errors": run.errors,
        "answered_tokens": run.tokens,
        "window_s": round(window_s, 2),
        "one_bucket_ideal_tokens": round(ideal),
        "spent_fraction_of_ideal": round(run.tokens / ideal, 4),
        "overshoot_fraction_of_minute": round(max(run.tokens - ideal, 0.0) / budget, 4),
    }


# --- the front -----------------------------------------------------------------------------------------------


@dataclass
class Front:
    """A running front: its URL and its router processes."""

    url: str
    processes: int
    pids: list[int] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        used = 0.0
        for pid in self.pids:
            with suppress(psutil.Error):
                used += cpu_seconds(psutil.Process(pid))
        return used


# Tight enough that each router process tops its leases up every few seconds at 500 req/s, never refused.
BUDGETS = {"feature_tokens_per_minute": 20_000_000, "key_tokens_per_minute": 40_000_000, "key_rpm": 2_000_000}


def bench_policy_document(urls: dict[str, str], *, budgets: bool = False) -> dict[str, Any]:
    """On-demand deployments only, one feature per cloud, one API key for both (with `budgets`, each feature
    and the key under BUDGETS)."""
    document = example_policy_document(urls["bedrock"], urls["vertex"])
    document["deployments"] = {
        name: spec for name, spec in document["deployments"].items() if spec["tier"] == "on_demand"
    }
    document["models"] = {"claude-haiku": ["claude-haiku-od"], "gemini-flash": ["gemini-flash-od"]}
    document["features"] = {
        FEATURES[path]: {"latency": "sync", "deadline_ms": 8000, "routes": [{"weight": 1, "models": [model]}]}
        for path, model in (("bedrock", "claude-haiku"), ("vertex", "gemini-flash"))
    }
    document["api_keys"] = {API_KEY: {"features": list(FEATURES.values())}}
    if budgets:
        for feature in document["features"].values():
            feature["budget"] = {"tokens_per_minute": BUDGETS["feature_tokens_per_minute"]}
        document["api_keys"][API_KEY] |= {
            "budget": {"tokens_per_minute": BUDGETS["key_tokens_per_minute"]},
            "rate_limit": {"requests_per_minute": BUDGETS["key_rpm"]},
        }
    # A rate the host cannot carry makes the router's own backlog look like slow deployments; breakers held
    # closed keep one saturated rate from failing the next phases.
    document["breaker"].update(NO_BREAKER)
    return document


@contextmanager
def router_front(
    urls: dict[str, str],
    data_dir: Path,
    processes: int,
    *,
    event_loop: str = "uvloop",
    budgets: bool = False,
    fleet_budget: int | None = None,
) -> Iterator[Front]:
    """The router service as `podway up` runs it (shared socket, `processes` processes on `event_loop`) on a
    fresh data dir."""
    from libs.client.commands.stack import prepare_stack

    data_dir.mkdir(parents=True, exist_ok=True)
    policy = data_dir / "policy.yaml"
    document = bench_policy_document(urls, budgets=budgets)
    if fleet_budget is not None:
        document["features"][FEATURES["vertex"]]["budget"] = {"tokens_per_minute": fleet_budget}
    policy.write_text(yaml.safe_dump(document, sort_keys=False))
    settings = PodwaySettings(
        data_dir=data_dir,
        router_policy=policy,
        router_http_address="127.0.0.1:0",
        router_processes=processes,
        log_level="WARNING",
    )
    stack = Stack(settings, services=("llm_router",), prepare=prepare_stack)
    try:
        with _environment(PODWAY_ROUTER_EVENT_LOOP=event_loop):  # the router processes inherit it
            info = stack.start()
        if not stack.wait_ready(timeout_s=READY_TIMEOUT_S):
            logs = "\n".join(p.read_text()[-1500:] for p in sorted((data_dir / "logs").glob("*.log")))
            raise RuntimeError(f"the router did not become healthy:\n{logs}")
        assert info.router_url is not None
        pids = [pid for pid in info.services.values() if pid is not None]
        yield Front(info.router_url, len(pids), pids)
    finally:
        stack.stop()


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# --- requests ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One kind of request: where it goes and what it carries."""

    url: str
    body: bytes
    headers: dict[str, str]


def raw_call(urls: dict[str, str], path: str, max_tokens: int, *, stream: bool = False) -> Call:
    """The request the SDK sends to the emulator, as bare HTTP."""
    json_type = {"Content-Type": "application/json"}
    if path == "bedrock":
        body = {
            "messages": [{"role": "user", "content": [{"text": PROMPT}]}],
            "inferenceConfig": {"maxTokens": max_tokens},
            "requestMetadata": {"feature": FEATURES[path]},
        }
        operation = "converse-stream" if stream else "converse"
        url = f"{urls['bedrock']}/model/{quote(CLAUDE_HAIKU_OD, safe='')}/{operation}"
        return Call(url, json.dumps(body).encode(), json_type)
    body = {
        "contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
        "generationConfig": {"maxOutputTokens": max_tokens},
        "labels": {"feature": FEATURES[path]},
    }
    model = f"projects/acme-ai/locations/us-central1/publishers/google/models/{GEMINI_FLASH}"
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    url = f"{urls['vertex']}/v1/{model}:{method}"
    return Call(url, json.dumps(body).encode(), json_type | {"X-Vertex-AI-LLM-Request-Type": "shared"})


def front_call(front_url: str, path: str, max_tokens: int, *, stream: bool = False) -> Call:
    """An OpenAI chat completion through the front."""
    body = {
        "model": f"feature:{FEATURES[path]}",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "stream": stream,
    }
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
    return Call(f"{front_url}/v1/chat/completions", json.dumps(body).encode(), headers)


@dataclass
class Run:
    """What one open-loop run measured."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    elapsed_s: float = 0.0

    def percentile(self, fraction: float) -> float | None:
        return percentile_or_none(self.latencies_ms, fraction)

    def add(self, other: Run) -> None:
        """Take in another run of the same call (one window of an interleaved measurement)."""
        self.latencies_ms += other.latencies_ms
        self.errors += other.errors
        self.elapsed_s += other.elapsed_s


async def open_loop(http: aiohttp.ClientSession, call: Call, rate: float, duration_s: float) -> Run:
    """Offer `rate * duration_s` requests at `rate` per second, each sent at its time; wait for all."""
    run = Run()
    count = max(1, int(rate * duration_s))
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)

    async def one() -> None:
        sent = time.perf_counter()
        try:
            async with http.post(call.url, data=call.body, headers=call.headers, timeout=timeout) as response:
                await response.read()
                if response.status != 200:
                    run.errors += 1
                    return
        except (aiohttp.ClientError, TimeoutError):
            run.errors += 1
            return
        run.latencies_ms.append((time.perf_counter() - sent) * 1000.0)

    tasks: set[asyncio.Task[None]] = set()
    start = time.perf_counter()
    for i in range(count):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(one())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    while tasks:
        await asyncio.gather(*list(tasks))
    run.elapsed_s = time.perf_counter() - start
    return run


async def first_byte_ms(http: aiohttp.ClientSession, call: Call, count: int) -> list[float]:
    """One streamed request at a time: milliseconds to the first byte of the body."""
    timings: list[float] = []
    for _ in range(count):
        sent = time.perf_counter()
        async with http.post(call.url, data=call.body, headers=call.headers) as response:
            if response.status != 200:
                raise RuntimeError(f"{call.url} answered {response.status}: {await response.text()}")
            await response.content.readany()
            timings.append((time.perf_counter() - sent) * 1000.0)
            await response.read()
    return timings


# --- measuring -----------------------------------------------------------------------------------------------


async def _measure(
    args: argparse.Namespace, rates: list[float], urls: dict[str, str], front: Front
) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        for path in PATHS:
            await _answered(http, front_call(front.url, path, args.max_tokens))
            await open_loop(http, raw_call(urls, path, args.max_tokens), 100, args.warmup)
            await open_loop(http, front_call(front.url, path, args.max_tokens), 100, args.warmup)
        for path in PATHS:
            raw_ttfb: list[float] = []
            front_ttfb: list[float] = []
            for _ in range(args.sse_requests):  # one of each in turn, as the rates' windows alternate
                raw_ttfb += await first_byte_ms(http, raw_call(urls, path, args.max_tokens, stream=True), 1)
                front_ttfb += await first_byte_ms(
                    http, front_call(front.url, path, args.max_tokens, stream=True), 1
                )
            raw_ttfb.sort()
            front_ttfb.sort()
            raw_p50, front_p50 = percentile_or_none(raw_ttfb, 0.5), percentile_or_none(front_ttfb, 0.5)
            metrics |= {
                f"{path}_sse_ttfb_ms_p50_raw": _round(raw_p50),
                f"{path}_sse_ttfb_ms_p50_front": _round(front_p50),
                f"{path}_sse_ttfb_ms_p99_raw": _round(percentile_or_none(raw_ttfb, 0.99)),
                f"{path}_sse_ttfb_ms_p99_front": _round(percentile_or_none(front_ttfb, 0.99)),
                f"{path}_sse_ttfb_added_ms_p50": _round(front_p50 - raw_p50)
                if front_p50 is not None and raw_p50 is not None
                else None,
            }
        under_target: list[float] = []
        for rate in rates:
            key = f"{int(rate)}rps"
            ok = True
            for path in PATHS:
                seconds = measured_seconds(rate, args.duration, args.min_requests)
                raw, through, emulator_cpu, cpu = await interleaved(
                    http,
                    raw_call(urls, path, args.max_tokens),
                    front_call(front.url, path, args.max_tokens),
                    rate,
                    seconds,
                    front,
                )
                figures = _figures(raw, through, cpu)
                figures["emulator_cpu_ms_per_request"] = (
                    round(emulator_cpu * 1000.0 / len(raw.latencies_ms), 3) if raw.latencies_ms else None
                )
                metrics |= {f"{path}_{key}_{name}": value for name, value in figures.items()}
                added_p99 = figures["added_ms_p99"]
                ok = ok and through.errors == 0 and added_p99 is not None and added_p99 < ADDED_P99_TARGET_MS
            if ok:
                under_target.append(rate)
        metrics["max_rate_added_p99_under_5ms"] = max(under_target) if under_target else None
    return metrics


async def interleaved(
    http: aiohttp.ClientSession, raw_call: Call, front_call: Call, rate: float, seconds: float, front: Front
) -> tuple[Run, Run, float, float]:
    """`seconds` of each call at `rate`, in alternating windows of `WINDOW_S` (raw first), so that both see
    the same swings of the host's speed; returns both runs, the emulators' CPU seconds over the raw windows
    and the router's over the front windows."""
    raw, through = Run(), Run()
    emulator_cpu = router_cpu = 0.0
    windows = max(1, math.ceil(seconds / WINDOW_S))
    for _ in range(windows):
        used = emulators_cpu_seconds()
        raw.add(await open_loop(http, raw_call, rate, seconds / windows))
        emulator_cpu += emulators_cpu_seconds() - used
        used = front.cpu_seconds()
        through.add(await open_loop(http, front_call, rate, seconds / windows))
        router_cpu += front.cpu_seconds() - used
    return raw, through, emulator_cpu, router_cpu


def measured_seconds(rate: float, duration_s: float, min_requests: int) -> float:
    """How long to offer `rate`: `duration_s`, or longer if that is fewer than `min_requests` (a p99 of 400
    samples is their fourth-largest: one descheduling of the client decides it)."""
    return max(duration_s, min_requests / rate)


def emulators_cpu_seconds() -> float:
    """CPU used so far by the emulators' process (this process's child running `libs.emulators`)."""
    used = 0.0
    for child in psutil.Process().children(recursive=True):
        with suppress(psutil.Error):
            if "libs.emulators" in child.cmdline():
                used += cpu_seconds(child)
    return used


def _figures(raw: Run, through: Run, cpu_s: float) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, fraction in (("p50", 0.50), ("p99", 0.99)):
        raw_ms, front_ms = raw.percentile(fraction), through.percentile(fraction)
        figures[f"raw_ms_{name}"] = _round(raw_ms)
        figures[f"front_ms_{name}"] = _round(front_ms)
        figures[f"added_ms_{name}"] = (
            _round(front_ms - raw_ms) if raw_ms is not None and front_ms is not None else None
        )
    answered = len(through.latencies_ms)
    figures["errors"] = through.errors
    figures["raw_errors"] = raw.errors
    figures["answered_per_s"] = round(answered / through.elapsed_s, 1) if through.elapsed_s else None
    figures["router_cpu_ms_per_request"] = round(cpu_s * 1000.0 / answered, 3) if answered else None
    return figures


async def _answered(http: aiohttp.ClientSession, call: Call, timeout_s: float = 60.0) -> None:
    """Wait until the front answers (the providers open lazily on a busy host)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            async with http.post(call.url, data=call.body, headers=call.headers) as response:
                if response.status == 200:
                    return
                detail = await response.text()
        except aiohttp.ClientError as exc:
            detail = repr(exc)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the front never answered: {detail}")
        await asyncio.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.router_http [options] [-o json|table]`, the same as `podway bench router-http`."""
    import sys

    from libs.client.bench_cli import main as bench_main

    return bench_main(["router-http", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    import sys

    sys.exit(main())
