"""Replay a production arrival process through the router with every capacity pool capped: does any request fail?

The trace is `alibaba-genai-2026/lora_request_trace.csv` (a production image-generation service, read in place
from `PODWAY_TRACES_DIR` or the repository's sibling `shared/traces/`; never copied). Its busiest
`--window-hours` are replayed open-loop, `--compression` times faster than they happened; requests logged in
the same second are spread evenly over it. Each request becomes a sync inference whose answer has
`num_inference_steps x num_images_per_prompt` output tokens (the work the request asked for; 1 image when the
column is empty) and whose prompt has `prompt_length` characters.

The four pools (Claude Haiku and Gemini Flash, PT and on-demand) are capped in the emulators by tokens per
minute, sized from P, the replay's peak minute of token demand. A pool's bucket holds one minute of its rate,
so in the peak minute a full pool delivers at most twice its rate. Each PT pool is sold at `--pt-share` x P
(the router's policy buys exactly that) and each OD pool capped at `--od-share` x P; with the defaults (0.2)
one pool delivers at most 0.4 P, both PT pools at most 0.8 P (so spillover is forced), all four up to 1.6 P.
The feature splits 50/50 between Gemini-first and Claude-first chains, so the router has to use PT, spill to
OD and fail over across clouds to answer everything. The target is `failed` = 0.

    python -m bench.router_trace -o json
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.measure import percentile_or_none
from bench.router import _control, _emulators, _round
from libs.core.routing import RoutingPolicy, parse_policy
from libs.events.catalogue import EventType
from libs.providers import Message, close_providers, open_providers
from libs.router import EventBuffer, InferRequest, InferResult, Router, RoutingError
from libs.router.example_policy import (
    CLAUDE_HAIKU_OD,
    CLAUDE_HAIKU_PT_ARN,
    GEMINI_FLASH,
    example_policy_document,
)

TRACE = Path("alibaba-genai-2026") / "lora_request_trace.csv"
FEATURE = "image-prompt"
DEFAULT_PROMPT_CHARS = 64
EMULATOR_OUTPUT_CAP = 100_000  # the request's max_tokens decides the answer's length


def traces_dir() -> Path:
    """`PODWAY_TRACES_DIR`, else `shared/traces` beside the repository."""
    configured = os.environ.get("PODWAY_TRACES_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "shared" / "traces"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument("--compression", type=float, default=240.0, help="trace seconds per real second")
    parser.add_argument("--window-hours", type=float, default=8.0, help="replay the busiest window this long")
    parser.add_argument(
        "--pt-share", type=float, default=0.2, help="each PT pool's rate, as a share of the peak"
    )
    parser.add_argument(
        "--od-share", type=float, default=0.2, help="each OD pool's rate, as a share of the peak"
    )
    parser.add_argument("--ttft-ms", type=float, default=40.0, help="emulated time to first token")
    parser.add_argument("--per-token-ms", type=float, default=0.5, help="emulated time per further token")
    parser.add_argument(
        "--traces-dir", type=Path, default=None, help="default: PODWAY_TRACES_DIR or ../shared/traces"
    )


@dataclass(frozen=True, slots=True)
class Arrival:
    """One replayed request: when (real seconds from the start), its prompt size and its answer size."""

    at_s: float
    prompt_chars: int
    output_tokens: int

    @property
    def tokens(self) -> int:
        """What the emulator charges: ~4 prompt characters per token plus the answer."""
        return -(-self.prompt_chars // 4) + self.output_tokens


def load_arrivals(path: Path, *, window_hours: float, compression: float) -> tuple[list[Arrival], datetime]:
    """The busiest window of the trace as arrivals in real time; also returns the window's start."""
    rows = []
    with path.open(newline="") as file:
        for row in csv.DictReader(file):
            stamp = datetime.fromisoformat(row["gmt_create"]).timestamp()
            steps = float(row["num_inference_steps"] or 0) or 1.0
            images = float(row["num_images_per_prompt"] or 0) or 1.0
            chars = int(float(row["prompt_length"] or 0)) or DEFAULT_PROMPT_CHARS
            rows.append((stamp, chars, max(1, int(steps * images))))
    rows.sort()
    start = _busiest_window_start([r[0] for r in rows], window_hours * 3600)
    window = [r for r in rows if start <= r[0] < start + window_hours * 3600]
    arrivals: list[Arrival] = []
    index = 0
    while index < len(window):  # requests logged in the same second are spread over that second
        same = [r for r in window[index:] if r[0] == window[index][0]]
        for k, (stamp, chars, tokens) in enumerate(same):
            arrivals.append(Arrival((stamp - start + k / len(same)) / compression, chars, tokens))
        index += len(same)
    return arrivals, datetime.fromtimestamp(start)


def _busiest_window_start(stamps: Sequence[float], width_s: float) -> float:
    best, best_start, first = 0, stamps[0], 0
    for last, stamp in enumerate(stamps):
        while stamp - stamps[first] >= width_s:
            first += 1
        if last - first + 1 > best:
            best, best_start = last - first + 1, stamps[first]
    return best_start


def peak_tokens_per_minute(arrivals: Sequence[Arrival]) -> float:
    """The most tokens demanded in any 60 real seconds (the emulators' and the router's bucket horizon),
    scaled to a minute when the whole replay is shorter."""
    duration = max(arrivals[-1].at_s, 1e-9)
    horizon = min(60.0, duration)
    best = total = 0.0
    first = 0
    for arrival in arrivals:
        total += arrival.tokens
        while arrival.at_s - arrivals[first].at_s >= horizon:
            total -= arrivals[first].tokens
            first += 1
        best = max(best, total)
    return best * 60.0 / horizon


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Replay the window and return `{"name", "params", "metrics"}`."""
    path = (args.traces_dir or traces_dir()) / TRACE
    if not path.exists():
        print(f"router-trace: no trace at {path}; set PODWAY_TRACES_DIR", file=sys.stderr)
        raise SystemExit(2)
    arrivals, window_start = load_arrivals(path, window_hours=args.window_hours, compression=args.compression)
    peak = peak_tokens_per_minute(arrivals)
    pools = {"pt": int(peak * args.pt_share), "od": int(peak * args.od_share)}
    with _emulators() as urls:
        metrics = asyncio.run(_replay(args, urls, arrivals, pools))
    params = {
        "compression": args.compression,
        "window_hours": args.window_hours,
        "window_start": window_start.isoformat(sep=" "),
        "trace": str(TRACE),
        "output_tokens": "num_inference_steps x num_images_per_prompt (1 image when empty)",
        "prompt_chars": "prompt_length",
        "pt_share_of_peak": args.pt_share,
        "od_share_of_peak": args.od_share,
        "peak_tokens_per_minute": round(peak),
        "pt_pool_tokens_per_minute": pools["pt"],
        "od_pool_tokens_per_minute": pools["od"],
        "routes": "50/50 gemini-flash -> claude-haiku and claude-haiku -> gemini-flash, sync, PT first",
        "emulator_ttft_ms": args.ttft_ms,
        "emulator_per_token_ms": args.per_token_ms,
        "host_cpus": os.cpu_count(),
    }
    return {"name": "router-trace", "params": params, "metrics": metrics}


async def _replay(
    args: argparse.Namespace, urls: dict[str, str], arrivals: Sequence[Arrival], pools: dict[str, int]
) -> dict[str, Any]:
    await _cap_emulators(args, urls, pools)
    policy = _policy(urls, pools["pt"])
    providers = await open_providers(policy.providers)
    events = EventBuffer(max_events=10_000_000)
    try:
        router = Router(policy, providers, event_sink=events)
        results, failures, lateness = await _offer(router, arrivals)
    finally:
        await close_providers(providers)
    spilled = {e.correlation_id for e in events.of_type(EventType.ROUTER_SPILLOVER)}
    failed_over = {e.correlation_id for e in events.of_type(EventType.ROUTER_FAILOVER)}
    duration = arrivals[-1].at_s if arrivals else 0.0
    latency = sorted(r.latency_ms for r in results)
    added = sorted(r.added_ms for r in results)
    metrics: dict[str, Any] = {
        "requests": len(arrivals),
        "served_pt": sum(1 for r in results if r.served_tier == "provisioned"),
        "spilled_to_od": len(spilled),
        "failed_over": len(failed_over),
        "failed": failures,
        "replay_s": round(duration, 1),
        "mean_rate_rps": round(len(arrivals) / duration, 1) if duration else None,
        "peak_rate_rps_1s": _peak_rate(arrivals),
        "latency_ms_p50": _round(percentile_or_none(latency, 0.50)),
        "latency_ms_p99": _round(percentile_or_none(latency, 0.99)),
        "added_ms_p50": _round(percentile_or_none(added, 0.50)),
        "added_ms_p99": _round(percentile_or_none(added, 0.99)),
        "dispatch_lateness_ms_p99": _round(percentile_or_none(sorted(lateness), 0.99)),
        "breaker_transitions": sum(
            len(events.of_type(t))
            for t in (
                EventType.ROUTER_BREAKER_OPENED,
                EventType.ROUTER_BREAKER_HALF_OPENED,
                EventType.ROUTER_BREAKER_CLOSED,
            )
        ),
    }
    for deployment in sorted(policy.deployments):
        key = "served_by_" + deployment.replace("-", "_")
        metrics[key] = sum(1 for r in results if r.deployment == deployment)
    return metrics


async def _offer(router: Router, arrivals: Sequence[Arrival]) -> tuple[list[InferResult], int, list[float]]:
    """Open-loop: each request starts at its arrival time whatever the others are doing."""
    results: list[InferResult] = []
    lateness: list[float] = []
    failures = 0

    async def one(arrival: Arrival, index: int) -> None:
        nonlocal failures
        request = InferRequest(
            FEATURE,
            (Message("user", "x" * arrival.prompt_chars),),
            max_tokens=arrival.output_tokens,
            request_id=f"trace-{index}",
        )
        try:
            results.append(await router.infer(request))
        except RoutingError:
            failures += 1

    tasks = []
    start = time.perf_counter()
    for index, arrival in enumerate(arrivals):
        delay = start + arrival.at_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        lateness.append(max(0.0, -delay) * 1000.0)
        tasks.append(asyncio.create_task(one(arrival, index)))
    await asyncio.gather(*tasks)
    return results, failures, lateness


async def _cap_emulators(args: argparse.Namespace, urls: dict[str, str], pools: dict[str, int]) -> None:
    latency = {"ttft_ms": args.ttft_ms, "per_token_ms": args.per_token_ms}
    for cloud in ("bedrock", "vertex"):
        await _control(urls[cloud], "output", {"tokens": EMULATOR_OUTPUT_CAP})
        await _control(urls[cloud], "latency", latency)
    caps = [
        ("bedrock", CLAUDE_HAIKU_PT_ARN, "provisioned", pools["pt"]),
        ("bedrock", CLAUDE_HAIKU_OD, "on_demand", pools["od"]),
        ("vertex", GEMINI_FLASH, "provisioned", pools["pt"]),
        ("vertex", GEMINI_FLASH, "on_demand", pools["od"]),
    ]
    for cloud, model, pool, tokens_per_minute in caps:
        await _control(
            urls[cloud], "capacity", {"model": model, "pool": pool, "tokens_per_minute": tokens_per_minute}
        )


def _policy(urls: dict[str, str], pt_tokens_per_minute: int) -> RoutingPolicy:
    """The example policy (deploy/router/policy.yaml) with the PT the emulators sell, and one sync feature split between the clouds."""
    document = example_policy_document(urls["bedrock"], urls["vertex"])
    for name in ("claude-haiku-pt", "gemini-flash-pt"):
        document["deployments"][name]["capacity"] = {"tokens_per_minute": pt_tokens_per_minute}
    document["features"] = {
        FEATURE: {
            "latency": "sync",
            "deadline_ms": 30_000,
            "first_byte_timeout_ms": 10_000,
            "routes": [
                {"weight": 50, "models": ["gemini-flash", "claude-haiku"]},
                {"weight": 50, "models": ["claude-haiku", "gemini-flash"]},
            ],
        }
    }
    document["api_keys"] = {}
    return parse_policy(document)


def _peak_rate(arrivals: Sequence[Arrival]) -> int:
    best = first = 0
    for last, arrival in enumerate(arrivals):
        while arrival.at_s - arrivals[first].at_s >= 1.0:
            first += 1
        best = max(best, last - first + 1)
    return best


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.router_trace [options] [-o json|table]`, the same as `podway bench router-trace`."""
    from libs.client.bench_cli import main as bench_main

    return bench_main(["router-trace", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
