"""How long the `podway` command takes, as a user types it: `podway --help`, and `podway get` against a
running stack (target: get answers in < 300 ms).

Starts `podway up --detach` in a temporary data dir (embedded nats-server, SQLite, admission: `get` needs
no other service), applies the small example fleet (64 nodes, their ResourceSlices) and the example
workloads, then runs each command `--runs` times as a fresh process, the installed `podway` script, and
reports wall-clock p50 / p99 / max and the CPU each process spent (p50), next to a bare `python -c pass` (the interpreter's own start) and to
importing the asyncio client the CLI used before (`libs.client.client`: faststream and nats-py).

Left out: a stack on another host (network round trips), PostgreSQL (admission's read is the same query),
write verbs (`apply` imports the validation and the asyncio client, on purpose), a cold page cache.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import percentile

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "deploy" / "examples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=15, help="times each command is run")


def podway_argv() -> list[str]:
    script = Path(sys.executable).parent / "podway"
    return [str(script)] if script.exists() else [sys.executable, "-m", "libs.client.cli"]


def timed(argv: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (user + system) milliseconds of each run of `argv` as a fresh process."""
    took, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT, check=False)
        took.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
        if done.returncode != 0:
            raise RuntimeError(f"{argv} failed: {done.stderr.decode()[-500:]}")
    return took, cpu


def figures(prefix: str, measured: tuple[list[float], list[float]]) -> dict[str, float]:
    took, cpu = measured
    return {
        f"{prefix}_ms_p50": round(percentile(took, 0.5), 1),
        f"{prefix}_ms_p99": round(percentile(took, 0.99), 1),
        f"{prefix}_ms_max": round(max(took), 1),
        # CPU the process spent: what a busy host inflates least (wall time waits for the cores)
        f"{prefix}_cpu_ms_p50": round(percentile(cpu, 0.5), 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    podway = podway_argv()
    metrics: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="podway-cli-start-") as tmp:
        env = {**os.environ, "PODWAY_DATA_DIR": tmp}
        env.pop("PODWAY_NATS_URL", None)
        subprocess.run(
            [*podway, "up", "--detach", "--services", "admission"],
            env=env,
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
        try:
            for manifests in ("cluster-small.yaml", "01-priorityclasses.yaml", "03-gang-workload.yaml"):
                subprocess.run(
                    [*podway, "apply", "-f", str(EXAMPLES / manifests)],
                    env=env,
                    check=True,
                    cwd=ROOT,
                    capture_output=True,
                )
            metrics |= figures("python_bare", timed([sys.executable, "-c", "pass"], args.runs, env))
            metrics |= figures(
                "import_asyncio_client",
                timed([sys.executable, "-c", "import libs.client.client"], max(3, args.runs // 3), env),
            )
            metrics |= figures("help", timed([*podway, "--help"], args.runs, env))
            metrics |= figures("get_nodes", timed([*podway, "get", "nodes"], args.runs, env))
            metrics |= figures("get_pods", timed([*podway, "get", "pods", "-A"], args.runs, env))
        finally:
            subprocess.run([*podway, "down"], env=env, check=False, cwd=ROOT, capture_output=True)
    # What the CLI itself costs over the interpreter's own start (the share a busy host inflates least).
    for verb in ("get_nodes", "get_pods", "help"):
        metrics[f"{verb}_over_python_ms_p50"] = round(
            metrics[f"{verb}_ms_p50"] - metrics["python_bare_ms_p50"], 1
        )
    load = os.getloadavg()[0]
    metrics["host_load_1m"] = round(load, 2)
    metrics["get_under_300_ms"] = metrics["get_nodes_ms_p50"] < 300 and metrics["get_pods_ms_p50"] < 300
    return {
        "name": "cli-start",
        "params": {"runs": args.runs, "nodes": 64, "stack": "admission"},
        "metrics": metrics,
    }
