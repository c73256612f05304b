"""Routing from evidence: two equivalent deployments, one turns slow mid-run and later recovers; how fast does
the traffic leave it, and come back?

Topology (what `podway up` runs): the emulators in a child process; the router service in `--processes`
processes sharing one listening socket, on the embedded nats-server and the SQLite audit log; this process is
the client, offering `--rate` OpenAI chat completions a second open-loop through the HTTP front for
`--normal-s + --slow-s + --recovered-s` seconds. The feature's model `assistant` is served by two on-demand
deployments the policy declares equivalent: `assistant-bedrock` (Bedrock Converse) and `assistant-vertex`
(Vertex generateContent), both answering with `--ttft-ms` to the first token. After `--normal-s` seconds the
Vertex one's first token comes `--slow-by-ms` later (set on the emulator's control endpoint, as an outage
drill would); after `--slow-s` more it is back to normal.

Reported per second of the run: the share of the answers served by each deployment (by the `podway.deployment`
of each answer, counted in the second it was sent). `moved_90_s`: seconds from the slowdown to the first
second in which at least 90 % of the answers came from the fast deployment (target <= 10 s).
`returned_s`: seconds from the recovery to the first second in which the recovered deployment served at least
`--returned-share` of the answers. Each router process learns from its own answers and from the first bytes and
failures the other processes share every 50 ms.

What it leaves out: network between hosts (everything is on 127.0.0.1), real provider latency distributions
(the emulator's first token comes at a fixed time, plus the slowdown), PT capacity (on-demand only), budgets,
and TLS.

    python -m bench.router_evidence -o json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.router import NO_BREAKER, _emulators
from bench.router_http import PROMPT, READY_TIMEOUT_S, Front
from libs.router.example_policy import CLAUDE_HAIKU_OD, GEMINI_FLASH, example_policy_document
from libs.runtime.settings import PodwaySettings
from libs.runtime.stack import Stack

FEATURE = "assistant"
API_KEY = "bench-key"
FAST, SLOW = "assistant-bedrock", "assistant-vertex"
REQUEST_TIMEOUT_S = 10.0
MOVED_SHARE = 0.9
MOVED_TARGET_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument("--rate", type=float, default=100.0, help="offered requests per second")
    parser.add_argument("--normal-s", type=float, default=10.0, help="seconds before the slowdown")
    parser.add_argument("--slow-s", type=float, default=20.0, help="seconds the Vertex deployment is slow")
    parser.add_argument("--recovered-s", type=float, default=30.0, help="seconds after it recovers")
    parser.add_argument("--ttft-ms", type=float, default=20.0, help="both deployments' time to first token")
    parser.add_argument("--slow-by-ms", type=float, default=200.0, help="added to the slow one's first token")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument(
        "--returned-share", type=float, default=0.25, help="share that counts as the traffic having returned"
    )
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="router processes")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the emulators and the front, run the drill, stop; returns `{"name", "params", "metrics"}`."""
    load_before = os.getloadavg()[0]
    with (
        _emulators() as urls,
        tempfile.TemporaryDirectory(prefix="podway-bench-router-evidence-") as tmp,
        _front(urls, Path(tmp), args.processes) as front,
    ):
        metrics = asyncio.run(_drill(args, urls, front))
    params = {
        "rate": args.rate,
        "normal_s": args.normal_s,
        "slow_s": args.slow_s,
        "recovered_s": args.recovered_s,
        "ttft_ms": args.ttft_ms,
        "slow_by_ms": args.slow_by_ms,
        "max_tokens": args.max_tokens,
        "returned_share": args.returned_share,
        "router_processes": front.processes,
        "deployments": {
            FAST: "Bedrock Converse (claude-haiku od)",
            SLOW: "Vertex generateContent (gemini od)",
        },
        "client": "aiohttp, open loop, one process, pooled keep-alive connections",
        "host_cpus": os.cpu_count(),
        "host_load_avg_1m_before": round(load_before, 2),
    }
    return {"name": "router-evidence", "params": params, "metrics": metrics}


def policy_document(urls: dict[str, str]) -> dict[str, Any]:
    """One feature whose one model is served by two on-demand deployments, one on each cloud."""
    document = example_policy_document(urls["bedrock"], urls["vertex"])
    document["deployments"] = {
        FAST: {"provider": "bedrock", "model": CLAUDE_HAIKU_OD, "tier": "on_demand"},
        SLOW: {"provider": "vertex", "model": GEMINI_FLASH, "tier": "on_demand"},
    }
    document["models"] = {"assistant": [FAST, SLOW]}
    document["features"] = {
        FEATURE: {"latency": "sync", "deadline_ms": 8000, "routes": [{"weight": 1, "models": ["assistant"]}]}
    }
    document["api_keys"] = {API_KEY: {"features": [FEATURE]}}
    document["breaker"].update(NO_BREAKER)  # the slow deployment stays healthy: only evidence moves traffic
    return document


@contextmanager
def _front(urls: dict[str, str], data_dir: Path, processes: int) -> Iterator[Front]:
    from libs.client.commands.stack import prepare_stack

    policy = data_dir / "policy.yaml"
    policy.write_text(yaml.safe_dump(policy_document(urls), sort_keys=False))
    settings = PodwaySettings(
        data_dir=data_dir,
        router_policy=policy,
        router_http_address="127.0.0.1:0",
        router_processes=processes,
        log_level="WARNING",
    )
    stack = Stack(settings, services=("llm_router",), prepare=prepare_stack)
    try:
        info = stack.start()
        if not stack.wait_ready(timeout_s=READY_TIMEOUT_S):
            raise RuntimeError("the router did not become healthy")
        assert info.router_url is not None
        pids = [pid for pid in info.services.values() if pid is not None]
        yield Front(info.router_url, len(pids), pids)
    finally:
        stack.stop()


async def _drill(args: argparse.Namespace, urls: dict[str, str], front: Front) -> dict[str, Any]:
    served: list[tuple[float, str]] = []
    errors = Counter[int]()
    body = json.dumps(
        {
            "model": f"feature:{FEATURE}",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": args.max_tokens,
        }
    ).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession() as http:
        for control in (urls["bedrock"], urls["vertex"]):
            await _latency(http, control, args.ttft_ms)

        async def one(offset: float) -> None:
            try:
                async with http.post(
                    f"{front.url}/v1/chat/completions", data=body, headers=headers, timeout=timeout
                ) as response:
                    answer = await response.read()
                    if response.status != 200:
                        errors[response.status] += 1
                        return
            except (aiohttp.ClientError, TimeoutError):
                errors[0] += 1
                return
            served.append((offset, json.loads(answer)["podway"]["deployment"]))

        for _ in range(20):  # each router process opens its provider connections
            await one(0.0)
        served.clear()
        total_s = args.normal_s + args.slow_s + args.recovered_s
        changes = [
            (args.normal_s, args.ttft_ms + args.slow_by_ms),
            (args.normal_s + args.slow_s, args.ttft_ms),
        ]
        tasks: set[asyncio.Task[None]] = set()
        start = time.perf_counter()
        count = int(args.rate * total_s)
        for i in range(count):
            offset = i / args.rate
            while changes and offset >= changes[0][0]:
                await _latency(http, urls["vertex"], changes.pop(0)[1])
            delay = start + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(one(offset))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.gather(*list(tasks))
    return _figures(args, served, errors)


async def _latency(http: aiohttp.ClientSession, emulator: str, ttft_ms: float) -> None:
    async with http.post(f"{emulator}/__emulator/latency", json={"ttft_ms": ttft_ms}) as response:
        response.raise_for_status()


def _figures(
    args: argparse.Namespace, served: list[tuple[float, str]], errors: Counter[int]
) -> dict[str, Any]:
    seconds = int(args.normal_s + args.slow_s + args.recovered_s)
    per_second = [Counter[str]() for _ in range(seconds)]
    for offset, deployment in served:
        per_second[min(int(offset), seconds - 1)][deployment] += 1
    share_fast: list[float | None] = [
        round(c[FAST] / c.total(), 3) if c.total() else None for c in per_second
    ]
    slow_at, recovered_at = int(args.normal_s), int(args.normal_s + args.slow_s)
    moved = next(
        (s - slow_at + 1 for s in range(slow_at, recovered_at) if (share_fast[s] or 0.0) >= MOVED_SHARE), None
    )
    returned = next(
        (
            s - recovered_at + 1
            for s in range(recovered_at, seconds)
            if 1.0 - (share_fast[s] or 1.0) >= args.returned_share
        ),
        None,
    )
    return {
        "answers": len(served),
        "errors": dict(errors),
        "share_fast_per_second": share_fast,
        "share_fast_before_slowdown": _mean(share_fast[:slow_at]),
        "share_fast_while_slow": _mean(share_fast[slow_at:recovered_at]),
        "share_fast_after_recovery": _mean(share_fast[recovered_at:]),
        "moved_90_s": moved,
        "moved_90_target_s": MOVED_TARGET_S,
        "moved_90_within_target": moved is not None and moved <= MOVED_TARGET_S,
        "returned_s": returned,
    }


def _mean(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return round(sum(present) / len(present), 3) if present else None


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.router_evidence [options] [-o json|table]`, the same as `podway bench router-evidence`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["router-evidence", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
