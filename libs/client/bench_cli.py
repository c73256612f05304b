"""`podway bench NAME [options] -o json`: runs one benchmark module from `bench/`, or all of them."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from typing import Any

BENCHMARKS: dict[str, str] = {
    "admission": "bench.admission",
    "scheduler-core": "bench.scheduler_core",
    "scheduler-e2e": "bench.scheduler_e2e",
    "router": "bench.router",
    "router-vs-litellm": "bench.router_vs_litellm",
    "router-trace": "bench.router_trace",
    "api-validation": "bench.api_validation",
}

# `make bench` runs these, hetero as its own line so both figures appear.
ALL_RUNS: list[tuple[str, list[str]]] = [
    ("api-validation", []),
    ("scheduler-core", []),
    ("scheduler-core", ["--mix", "hetero"]),
    ("admission", []),
    ("scheduler-e2e", []),
    ("router", []),
    ("router-trace", []),
    ("router-vs-litellm", []),
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
            if bench_name not in available():
                continue
            try:
                print_result(run_one(bench_name, extra + rest), output)
            except (Exception, SystemExit) as exc:  # one broken benchmark must not hide the others
                failed += 1
                print(json.dumps({"name": bench_name, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1 if failed else 0
    if name not in available():
        print(f"unknown benchmark {name!r}; available: {', '.join(available())}", file=sys.stderr)
        return 2
    print_result(run_one(name, rest), output)
    return 0
