"""`podway bench all` runs each benchmark in a process of its own and keeps going past a broken one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.measure import DiskSyncProbe
from libs.client import bench_cli

TINY = ["--blocks", "1", "--racks-per-block", "2", "--nodes-per-rack", "4", "--no-gc-freeze"]


def test_bench_all_runs_each_benchmark_apart_and_reports_the_broken_one(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench_cli, "ALL_RUNS", [("scheduler-core", ["--bogus"]), ("scheduler-core", TINY)])

    assert bench_cli.main(["all"]) == 1

    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines() if line.startswith("{")]
    assert lines[0] == {"name": "scheduler-core", "error": "exited with 2"}
    assert lines[1]["name"] == "scheduler-core"
    assert lines[1]["metrics"]["placed_pods"] > 0


def test_the_disk_probe_times_each_durable_write_and_leaves_nothing_behind(tmp_path: Path) -> None:
    with DiskSyncProbe(tmp_path, interval_s=3600) as probe:  # its thread waits: the test syncs
        for _ in range(3):
            probe.sync_once()

    summary = probe.summary("write")
    assert len(probe.syncs) == 3
    assert summary["write_disk_sync_ms_max"] >= summary["write_disk_sync_ms_p50"] > 0
    assert summary["write_disk_syncs_over_20ms"] == sum(1 for _, ms in probe.syncs if ms > 20)
    assert list(tmp_path.iterdir()) == []
