"""`podway bench quota --phase e2e` keeps the bench contract at a tiny size: gangs through admission, the
scheduler, the preemptor and a simulated node agent on SQLite, each reserving quota in its ClusterQueue
before it is bound."""

from __future__ import annotations

import json

from libs.client import bench_cli

TINY = [
    "--phase",
    "e2e",
    "--cohorts",
    "1",
    "--teams",
    "1",
    "--queues-per-team",
    "4",
    "--e2e-gangs",
    "12",
    "--e2e-rate",
    "10",
    "--e2e-seconds",
    "1",
    "--e2e-nodes",
    "12",
]


def test_the_quota_benchmark_binds_a_released_backlog_and_gangs_at_a_rate_through_the_services():
    result = bench_cli.run_one("quota", TINY)

    assert result["name"] == "quota"
    e2e = result["params"]["e2e"]
    assert (e2e["cluster_queues"], e2e["database"]) == (4, "sqlite")
    metrics = result["metrics"]
    assert metrics["e2e_backlog_gangs"] == 12
    assert metrics["e2e_backlog_pods"] >= 12
    assert metrics["e2e_gangs_per_second"] > 0
    assert 0 < metrics["e2e_release_to_bound_ms_p50"] <= metrics["e2e_release_to_bound_ms_max"]
    assert metrics["e2e_paced_gangs"] == 10
    assert 0 < metrics["e2e_admitted_to_bound_ms_p50"] <= metrics["e2e_admitted_to_bound_ms_p99"]
    assert metrics["e2e_backlog_cpu_ms_per_gang_scheduler"] > 0
    assert "wall_s" not in metrics  # the core phase did not run
    assert all(isinstance(value, int | float | bool) for value in metrics.values())
    json.dumps(result)
