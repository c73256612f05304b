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


def test_the_churn_mix_holds_the_fleet_in_its_band_and_reports_placed_and_failed_cycles() -> None:
    report = scheduler_core.run(
        _args("--mix", "churn", "--churn-warmup", "50", "--churn-cycles", "300", "--churn-period", "100")
    )

    metrics = report["metrics"]
    assert report["params"]["mix"] == "churn"
    assert report["params"]["fill_band"] == [0.9, 0.95]
    assert metrics["churn_pods_per_second"] > 0
    assert metrics["placed_cycles"] + metrics["failed_cycles"] == 300
    assert metrics["completed_gangs"] > 0
    assert 0.8 <= metrics["gpu_fill_ratio_mean"] <= 0.95
    assert {
        "placed_cycle_ms_p50",
        "placed_cycle_ms_p99",
        "failed_cycle_ms_p50",
        "failed_cycle_ms_p99",
        "unbind_us_per_pod",
        "peak_rss_mb",
    } <= metrics.keys()
    assert all(isinstance(value, int | float) for value in metrics.values())


def test_the_churn_mix_is_deterministic() -> None:
    def decided() -> tuple[int, int, int]:
        metrics = scheduler_core.run(_args("--mix", "churn", "--churn-warmup", "0", "--churn-cycles", "200"))[
            "metrics"
        ]
        return metrics["placed_pods"], metrics["failed_cycles"], metrics["completed_gangs"]

    assert decided() == decided()


def test_the_composite_mix_places_whole_composites_and_reports_its_own_rate() -> None:
    report = scheduler_core.run(_args("--mix", "composite", "--blocks", "2"))

    assert report["params"]["mix"] == "composite"
    metrics = report["metrics"]
    assert metrics["composite_pods_per_second"] > 0
    assert metrics["placed_pods"] > 0
    assert metrics["cycles"] > metrics["unschedulable_cycles"]
    assert 0.5 < metrics["gpu_fill_ratio"] <= 1.0
