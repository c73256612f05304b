"""`podway bench all` runs each benchmark in a process of its own and keeps going past a broken one."""

from __future__ import annotations

import json

import pytest

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
