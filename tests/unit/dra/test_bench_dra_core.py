"""`podway bench dra-core` on a small fleet: both cases fill it through the cycle and report their rates."""

from __future__ import annotations

import argparse

from bench import dra_core


def test_both_cases_fill_a_small_fleet_and_report_rates():
    parser = argparse.ArgumentParser()
    dra_core.add_arguments(parser)
    args = parser.parse_args(["--blocks", "1", "--racks-per-block", "2", "--nodes-per-rack", "4"])

    result = dra_core.run(args)

    metrics = result["metrics"]
    assert result["name"] == "dra-core"
    assert metrics["pods_per_second"] > 0
    assert metrics["fractional_pods_per_second"] > 0
    assert metrics["pods_per_cpu_second"] > 0
    assert metrics["fractional_pods_per_cpu_second"] > 0
    assert metrics["gpu_fill_ratio"] >= 0.9
    assert metrics["fractional_gpu_cores_fill_ratio"] >= 0.9
    # Two device descriptions (NUMA 0 and 1) x two selectors (the class's, the request's), not per pod.
    assert metrics["selector_evaluations"] == 4
