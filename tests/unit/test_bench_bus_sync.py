"""The bus-sync benchmark keeps the bench contract with a few events."""

from __future__ import annotations

import argparse

from bench import bus_sync


def test_the_benchmark_measures_both_settings_and_reports_flat_metrics() -> None:
    parser = argparse.ArgumentParser()
    bus_sync.add_arguments(parser)

    report = bus_sync.run(parser.parse_args(["--events", "300", "--lone", "20"]))

    assert report["name"] == "bus-sync"
    metrics = report["metrics"]
    for setting in ("default", "sync_always"):
        assert metrics[f"events_per_second_{setting}"] > 0
        assert 0 < metrics[f"lone_ack_ms_p50_{setting}"] <= metrics[f"lone_ack_ms_p99_{setting}"]
    assert all(isinstance(value, int | float) for value in metrics.values())
