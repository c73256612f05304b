"""`bench/router.py` keeps its output contract, and a cloud outage fails no sync request."""

from __future__ import annotations

import argparse

from bench import router as bench_router


def test_router_benchmark_reports_its_metrics_and_survives_an_outage() -> None:
    parser = argparse.ArgumentParser()
    bench_router.add_arguments(parser)
    args = parser.parse_args(
        [
            "--rate",
            "200",
            "--duration",
            "0.5",
            "--outage-requests",
            "60",
            "--warmup",
            "20",
            "--serial-requests",
            "20",
        ]
    )
    result = bench_router.run(args)
    assert result["name"] == "router"
    assert result["params"]["rate"] == 200
    metrics = result["metrics"]
    for key in ("added_ms_p50", "added_ms_p99", "requests_per_second", "failover_dispatch_ms_p99"):
        assert metrics[key] is not None, key
    assert metrics["failed_requests"] == 0
    assert metrics["failed_sync_requests_during_outage"] == 0
    assert metrics["failovers_measured"] == 120
