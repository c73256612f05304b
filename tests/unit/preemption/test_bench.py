"""`podway bench preemption` on a tiny fleet: every preemptor evicts, binds where it was nominated."""

from __future__ import annotations

import argparse

from bench import preemption


def test_the_benchmark_reports_its_metrics_and_every_preemptor_binds_on_its_nominated_nodes():
    parser = argparse.ArgumentParser()
    preemption.add_arguments(parser)
    args = parser.parse_args(
        ["--blocks", "1", "--racks-per-block", "4", "--nodes-per-rack", "20", "--preemptors", "3"]
    )

    result = preemption.run(args)

    metrics = result["metrics"]
    assert result["name"] == "preemption"
    assert metrics["preemptions"] == 3
    assert metrics["bound_on_nominated_nodes"] == 3
    assert metrics["pods_evicted_per_preemptor"] > 0
    assert metrics["victim_search_ms_p99"] >= metrics["victim_search_ms_p50"] > 0
