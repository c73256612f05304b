"""Router benchmark: in-process added latency at a fixed request rate against the emulators, failover dispatch
time, and failed sync requests while one cloud is fully down.

The emulators run in a child process (`python -m libs.emulators`) so that they do not share the router's CPU;
the router, the real SDK clients and the load generator share one event loop, as in the service. Most of the
CPU per request is the SDKs' (botocore, google-api-core and protobuf's JSON mapping, ~0.6-0.8 ms per call), so
`router_cpu_ms_per_request` says which rate one process can sustain; when the process is CPU-bound (and the host
shared), OS preemption shows in the tail of `added_ms`, so the same figure is also taken with one request in
flight. The load generator offers `--rate` open-loop but keeps at most `--max-in-flight` requests outstanding
(like wrk's connections), so a CPU-bound process reports the rate it reached instead of queueing into
first-byte timeouts that would trip every breaker. `requests_per_second` is the answered requests over the time
from the first offer to the last answer.

The last phase goes through NATS: the router service (`services.llm_router`) runs in its own process on an
embedded nats-server and a SQLite file, and this process calls `podway.rpc.router.infer` one request at a time.
`nats_added_ms` is the end-to-end time at the caller minus the provider-call time the reply reports, i.e. the
router's own time plus the NATS round trip and both sides' encoding.

    python -m bench.router -o json
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import yaml

from bench.measure import cpu_seconds, percentile_or_none
from libs.client.client import PodwayClient
from libs.client.commands.router import RouterClient
from libs.core.routing import RoutingPolicy, parse_policy
from libs.db.migrate import upgrade
from libs.events.inference import ChatMessage, InferenceCall
from libs.messaging.broker import provision_streams
from libs.messaging.rpc import RpcError
from libs.providers import Message, Provider, close_providers, open_providers
from libs.router import EventBuffer, InferRequest, InferResult, Router, RoutingError, new_request_id
from libs.router.example_policy import example_policy_document
from libs.runtime.nats_server import EmbeddedNatsServer

PROMPT = (Message("user", "Summarise the incident timeline for the on-call channel in two sentences."),)
NO_BREAKER = {"consecutive_failures": 1_000_000, "min_requests": 1_000_000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument("--rate", type=float, default=500.0, help="requests per second offered")
    parser.add_argument(
        "--duration", type=float, default=6.0, help="seconds of load for the added-latency phase"
    )
    parser.add_argument("--max-in-flight", type=int, default=32, help="most requests outstanding at once")
    parser.add_argument("--outage-requests", type=int, default=1000, help="requests in each outage phase")
    parser.add_argument("--warmup", type=int, default=300, help="requests before measuring")
    parser.add_argument("--serial-requests", type=int, default=1000, help="requests sent one at a time")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--nats-requests", type=int, default=500, help="requests sent one at a time over NATS"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every phase and return `{"name", "params", "metrics"}`."""
    load_before = os.getloadavg()[0]
    with _emulators() as urls:
        metrics = asyncio.run(_run(args, urls))
        with (
            tempfile.TemporaryDirectory(prefix="podway-bench-router-") as tmp,
            _router_service(urls, Path(tmp)) as (nats_url, service),
        ):
            metrics |= asyncio.run(_nats_phase(args, nats_url, service))
    params = {
        "rate": args.rate,
        "duration_s": args.duration,
        "max_in_flight": args.max_in_flight,
        "outage_requests": args.outage_requests,
        "warmup": args.warmup,
        "serial_requests": args.serial_requests,
        "max_tokens": args.max_tokens,
        "nats_requests": args.nats_requests,
        "nats": "router service in a child process, embedded nats-server, SQLite audit log, one request in flight",
        "emulator_latency_ms": 0,
        "emulators": "child process",
        "policy": "deploy/router/policy.yaml example (90/10 gemini-flash/claude-haiku)",
        # Other processes on the host preempt the router and show in the tail of added_ms.
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
    }
    return {"name": "router", "params": params, "metrics": metrics}


async def _run(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, Any]:
    policy = _policy(urls)
    providers = await open_providers(policy.providers)
    try:
        return await _phases(args, urls, policy, providers)
    finally:
        await close_providers(providers)


async def _phases(
    args: argparse.Namespace, urls: dict[str, str], policy: RoutingPolicy, providers: dict[str, Provider]
) -> dict[str, Any]:
    events = EventBuffer()
    router = Router(policy, providers, event_sink=events)
    load = functools.partial(
        _load, router, rate=args.rate, max_tokens=args.max_tokens, max_in_flight=args.max_in_flight
    )
    await load(args.warmup)
    gc.collect()
    # Long-lived objects (SDK models, policy) leave the collector's view, as a service does after start-up.
    gc.freeze()

    # 0. One request at a time: the router's added time when the process is not CPU-bound.
    serial, _ = await _load(
        router, args.serial_requests, rate=1e9, max_tokens=args.max_tokens, max_in_flight=1
    )
    added_serial = sorted(r.added_ms for r in serial)

    # 1. Added latency at the offered rate, every cloud healthy, zero emulator latency.
    started, cpu_started = time.perf_counter(), time.process_time()
    results, failures = await load(int(args.rate * args.duration))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    added = sorted(r.added_ms for r in results)
    latency = sorted(r.latency_ms for r in results)

    # 2. Failover dispatch: Bedrock down, breakers held closed so that every request fails over.
    router.reload(_policy(urls, claude_first=True, breaker=NO_BREAKER))
    await _control(urls["bedrock"], "outage", {})
    failover_results, failover_failures = await load(args.outage_requests)
    gaps = sorted(
        a.dispatch_gap_ms for r in failover_results for a in r.attempts if a.dispatch_gap_ms is not None
    )

    # 3. The same outage with the real breaker: it opens and traffic moves to Vertex without errors.
    router.reload(_policy(urls, claude_first=True))
    outage_results, outage_failures = await load(args.outage_requests)
    await _control(urls["bedrock"], "outage/clear", {})
    bedrock_attempts = sum(1 for r in outage_results for a in r.attempts if a.provider == "bedrock")
    gc.unfreeze()

    return {
        "requests": len(results) + failures,
        "failed_requests": failures,
        "requests_per_second": round(len(results) / elapsed, 1),
        "router_cpu_ms_per_request": round(cpu * 1000 / max(len(results) + failures, 1), 3),
        "added_ms_p50": _round(percentile_or_none(added, 0.50)),
        "added_ms_p99": _round(percentile_or_none(added, 0.99)),
        "added_ms_max": _round(added[-1] if added else None),
        "added_ms_p50_one_in_flight": _round(percentile_or_none(added_serial, 0.50)),
        "added_ms_p99_one_in_flight": _round(percentile_or_none(added_serial, 0.99)),
        "latency_ms_p50": _round(percentile_or_none(latency, 0.50)),
        "latency_ms_p99": _round(percentile_or_none(latency, 0.99)),
        "failover_dispatch_ms_p50": _round(percentile_or_none(gaps, 0.50)),
        "failover_dispatch_ms_p99": _round(percentile_or_none(gaps, 0.99)),
        "failovers_measured": len(gaps),
        "failed_sync_requests_during_outage": failover_failures + outage_failures,
        "bedrock_attempts_during_outage_with_breaker": bedrock_attempts,
        "events_buffered": len(events),
    }


async def _nats_phase(args: argparse.Namespace, nats_url: str, service: psutil.Process) -> dict[str, Any]:
    """Serial requests through `podway.rpc.router.infer`: end to end at the caller minus the provider time."""
    async with PodwayClient(nats_url, name="bench-router") as client:
        router = RouterClient(client, timeout_s=30)
        call = InferenceCall(
            feature="search-answer",
            messages=[ChatMessage(role=m.role, content=m.content) for m in PROMPT],
            max_tokens=args.max_tokens,
        )
        await _first_answer(router, call)
        for _ in range(args.warmup):
            await router.infer(call.model_copy(update={"request_id": new_request_id()}))
        added: list[float] = []
        service_cpu, caller_cpu = cpu_seconds(service), time.process_time()
        for _ in range(args.nats_requests):
            started = time.perf_counter()
            answer = await router.infer(call.model_copy(update={"request_id": new_request_id()}))
            added.append((time.perf_counter() - started) * 1000.0 - answer.provider_ms)
        service_cpu, caller_cpu = cpu_seconds(service) - service_cpu, time.process_time() - caller_cpu
    added.sort()
    per_request_ms = 1000.0 / max(len(added), 1)
    return {
        "nats_added_ms_p50": _round(percentile_or_none(added, 0.50)),
        "nats_added_ms_p99": _round(percentile_or_none(added, 0.99)),
        "nats_requests_measured": len(added),
        # Where the time goes on a shared host: CPU of the service (SDK calls and the audit trail included)
        # and of the caller, per request.
        "nats_service_cpu_ms_per_request": round(service_cpu * per_request_ms, 3),
        "nats_caller_cpu_ms_per_request": round(caller_cpu * per_request_ms, 3),
    }


async def _first_answer(router: RouterClient, call: InferenceCall, timeout_s: float = 60.0) -> None:
    """Wait until the service in the child process answers."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await router.infer(call)
            return
        except RpcError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@contextmanager
def _router_service(urls: dict[str, str], tmp: Path) -> Iterator[tuple[str, psutil.Process]]:
    """The router service in a child process on its own nats-server and SQLite file; yields the NATS URL and
    the process."""
    nats = EmbeddedNatsServer(data_dir=tmp / "nats").start()
    asyncio.run(provision_streams(nats.url))
    database_url = f"sqlite+aiosqlite:///{tmp / 'podway.db'}"
    asyncio.run(upgrade(database_url))
    policy = tmp / "policy.yaml"
    policy.write_text(yaml.safe_dump(example_policy_document(urls["bedrock"], urls["vertex"])))
    env = os.environ | {
        "PODWAY_NATS_URL": nats.url,
        "PODWAY_DATABASE_URL": database_url,
        "PODWAY_DATA_DIR": str(tmp),
        "PODWAY_ROUTER_POLICY": str(policy),
        "PODWAY_ROUTER_HTTP_PORT": "-1",
        "PODWAY_METRICS_PORT": "-1",
        "PODWAY_LOG_LEVEL": "WARNING",
    }
    with (tmp / "llm_router.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.llm_router.main"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        yield nats.url, psutil.Process(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)
        nats.stop()


async def _load(
    router: Router, count: int, *, rate: float, max_tokens: int, max_in_flight: int
) -> tuple[list[InferResult], int]:
    """Offer `count` requests at `rate` per second with at most `max_in_flight` outstanding; returns the
    results and the number that failed."""
    results: list[InferResult] = []
    failures = 0
    errors: list[BaseException] = []
    slots = asyncio.Semaphore(max_in_flight)
    # Only the requests in flight are held: like a real client, the generator lets go of each one when it
    # completes. Holding every task to the end (or gathering them all) would add milliseconds of the
    # generator's own bookkeeping after the last answer to the measured time.
    in_flight: set[asyncio.Task[None]] = set()
    all_done = asyncio.Event()

    async def one() -> None:
        nonlocal failures
        try:
            results.append(await router.infer(InferRequest("search-answer", PROMPT, max_tokens=max_tokens)))
        except RoutingError:
            failures += 1
        except Exception as exc:  # an unexpected error in a request fails the benchmark, below
            errors.append(exc)
        finally:
            slots.release()
            in_flight.discard(asyncio.current_task())
            if not in_flight and offered:
                all_done.set()

    offered = False
    start = time.perf_counter()
    for i in range(count):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await slots.acquire()
        in_flight.add(asyncio.create_task(one()))
    offered = True
    if in_flight:
        await all_done.wait()
    if errors:
        raise errors[0]
    return results, failures


def _policy(
    urls: dict[str, str], *, claude_first: bool = False, breaker: dict[str, Any] | None = None
) -> RoutingPolicy:
    document = example_policy_document(urls["bedrock"], urls["vertex"])
    if claude_first:
        document["features"]["search-answer"]["routes"] = [
            {"weight": 1, "models": ["claude-haiku", "gemini-flash"]}
        ]
    document["breaker"].update(breaker or {})
    return parse_policy(document)


async def _control(base_url: str, knob: str, body: dict[str, Any]) -> None:
    async with aiohttp.ClientSession(base_url) as http:
        response = await http.post(f"/__emulator/{knob}", json=body)
        response.raise_for_status()


@contextmanager
def _emulators() -> Iterator[dict[str, str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "libs.emulators"], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the emulators exited before they were ready")
        yield json.loads(line)
    finally:
        process.terminate()
        process.wait(timeout=10)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.router [options] [-o json|table]`, the same as `podway bench router`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["router", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
