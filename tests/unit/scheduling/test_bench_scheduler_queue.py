"""The scheduler-queue benchmark on a small fleet: hints wake fewer parked gangs and waste fewer cycles."""

from __future__ import annotations

import argparse

from bench import scheduler_queue


def test_the_hints_wake_fewer_parked_gangs_than_waking_all_and_the_report_is_flat() -> None:
    parser = argparse.ArgumentParser()
    scheduler_queue.add_arguments(parser)
    args = parser.parse_args(
        [
            "--blocks",
            "2",
            "--racks-per-block",
            "2",
            "--nodes-per-rack",
            "4",
            "--parked",
            "60",
            "--completions",
            "20",
        ]
    )

    report = scheduler_queue.run(args)

    assert report["name"] == "scheduler-queue"
    metrics = report["metrics"]
    assert metrics["completion_events"] == 8  # every running gang of the 16-node fleet finishes
    assert metrics["parked_gangs"] >= 60
    assert metrics["wakeups_per_event"] < metrics["wakeups_per_event_without_hints"]
    assert metrics["empty_cycles"] < metrics["empty_cycles_without_hints"]
    assert all(isinstance(value, int | float) for value in metrics.values())
