"""`podway bench runtime` keeps the bench contract with a few pods: real processes through the real stack,
their starts read from their own logs, and nothing left behind in the agent."""

from __future__ import annotations

import json

from libs.client import bench_cli

TINY = ["--pods", "4", "--gangs", "1", "--gang-size", "4", "--short-pods", "10", "--in-flight", "4"]


def test_the_runtime_benchmark_times_real_starts_and_finds_no_leak():
    result = bench_cli.run_one("runtime", TINY)

    assert result["name"] == "runtime"
    assert result["params"]["database"] == "sqlite"
    metrics = result["metrics"]
    assert (metrics["pods"], metrics["gangs"], metrics["short_pods"]) == (4, 1, 10)
    assert 0 < metrics["bound_to_started_ms_p50"] <= metrics["bound_to_started_ms_p99"]
    # A pod is created before it is bound: the anchor's span holds the binding's.
    assert metrics["created_to_started_ms_p50"] >= metrics["bound_to_started_ms_p50"]
    assert 0 <= metrics["gang_start_skew_ms_p50"] <= metrics["gang_start_skew_ms_max"]
    assert metrics["gang_bound_to_started_ms_p50"] > 0
    assert (metrics["leaked_processes"], metrics["agent_pod_fds_open"]) == (0, 0)
    assert metrics["no_leaks"] is True
    assert all(isinstance(value, int | float) for value in metrics.values())
    json.dumps(result)
