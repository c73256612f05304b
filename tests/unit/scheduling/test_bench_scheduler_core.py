"""The scheduler-core benchmark keeps the bench contract on a tiny fleet."""

from __future__ import annotations

import argparse

import pytest

from bench import scheduler_core


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    scheduler_core.add_arguments(parser)
    tiny = ["--blocks", "1", "--racks-per-block", "2", "--nodes-per-rack", "4", "--no-gc-freeze"]
    return parser.parse_args([*tiny, *argv])


@pytest.mark.parametrize(
    ("mix", "rate"), [("uniform", "pods_per_second"), ("hetero", "hetero_pods_per_second")]
)
def test_the_benchmark_reports_its_parameters_and_flat_metrics(mix: str, rate: str) -> None:
    report = scheduler_core.run(_args("--mix", mix))

    assert report["name"] == "scheduler-core"
    assert report["params"]["nodes"] == 8
    metrics = report["metrics"]
    assert metrics[rate] > 0
    assert metrics["gpu_fill_ratio"] >= (0.85 if mix == "hetero" else 0.9)
    assert {"cycle_ms_p50", "cycle_ms_p99", "peak_rss_mb", "snapshot_build_ms"} <= metrics.keys()
    assert all(isinstance(value, int | float) for value in metrics.values())
