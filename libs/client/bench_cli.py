"""`podway bench NAME [options] -o json`: runs one benchmark module from `bench/`, or all of them."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
from typing import Any

BENCHMARKS: dict[str, str] = {
    "admission": "bench.admission",
    "scheduler-core": "bench.scheduler_core",
    "scheduler-queue": "bench.scheduler_queue",
    "scheduler-e2e": "bench.scheduler_e2e",
    "dra-core": "bench.dra_core",
    "preemption": "bench.preemption",
    "router": "bench.router",
    "router-vs-litellm": "bench.router_vs_litellm",
    "router-trace": "bench.router_trace",
    "router-http": "bench.router_http",
    "router-http-vs-litellm": "bench.router_http_vs_litellm",
    "router-evidence": "bench.router_evidence",
    "api-validation": "bench.api_validation",
    "bus-sync": "bench.bus_sync",
    "simulate": "bench.simulate",
    "cli-start": "bench.cli_start",
    "retention": "bench.retention",
    "kube-api": "bench.kube_api",
    "runtime": "bench.runtime",
    "quota": "bench.quota",
}

# `make bench` runs these, hetero and churn as lines of their own so every figure appears.
ALL_RUNS: list[tuple[str, list[str]]] = [
    ("api-validation", []),
    ("scheduler-core", []),
    ("scheduler-core", ["--mix", "hetero"]),
    ("scheduler-core", ["--mix", "churn"]),
    ("scheduler-queue", []),
    ("dra-core", []),
    ("admission", []),
    ("scheduler-e2e", []),
    ("preemption", []),
    ("quota", []),
    ("router", []),
    ("router-trace", []),
    ("router-vs-litellm", []),
    ("router-http", []),
    ("router-http-vs-litellm", []),
    ("router-evidence", []),
    ("bus-sync", []),
    ("simulate", []),
    ("cli-start", []),
    ("retention", []),
    ("kube-api", []),
    ("runtime", []),
]


def available() -> dict[str, str]:
    """Benchmarks whose module exists in this checkout."""
    found = {}
    for name, module in BENCHMARKS.items():
        if importlib.util.find_spec(module) is not None:
            found[name] = module
    return found


def run_one(name: str, argv: list[str]) -> dict[str, Any]:
    module = importlib.import_module(BENCHMARKS[name])
    parser = argparse.ArgumentParser(prog=f"podway bench {name}")
    parser.add_argument("-o", "--output", default="json", choices=["json", "table"])
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    result: dict[str, Any] = module.run(args)
    return result


def run_apart(name: str, argv: list[str]) -> bool:
    """Run one benchmark in a process of its own, so that none inherits another's heap (its timings and its
    peak RSS are its own); its output passes through. False when it failed, which is printed as a line too:
    one broken benchmark must not hide the others."""
    done = subprocess.run([sys.executable, "-m", "libs.client.bench_cli", name, *argv], check=False)
    if done.returncode != 0:
        print(json.dumps({"name": name, "error": f"exited with {done.returncode}"}), flush=True)
    return done.returncode == 0


def print_result(result: dict[str, Any], output: str) -> None:
    if output == "json":
        print(json.dumps(result), flush=True)
        return
    print(f"{result['name']}  {json.dumps(result['params'])}")
    for key, value in result["metrics"].items():
        print(f"  {key:<40} {value}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: podway bench NAME [options] [-o json]\n\nbenchmarks: all, " + ", ".join(available()))
        return 0
    name, rest = argv[0], argv[1:]
    output = (
        "table" if "-o" in rest and rest[rest.index("-o") + 1 : rest.index("-o") + 2] == ["table"] else "json"
    )
    if name == "all":
        failed = 0
        for bench_name, extra in ALL_RUNS:
            if bench_name in available() and not run_apart(bench_name, extra + rest):
                failed += 1
        return 1 if failed else 0
    if name not in available():
        print(f"unknown benchmark {name!r}; available: {', '.join(available())}", file=sys.stderr)
        return 2
    print_result(run_one(name, rest), output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
