"""The kube-api benchmark keeps its contract on a tiny stack: every phase measured, every figure beside its
target."""

from __future__ import annotations

import argparse

from bench import kube_api

TINY = [
    *("--blocks", "1", "--racks-per-block", "1", "--nodes-per-rack", "4"),
    *("--pods", "30", "--namespaces", "2", "--page-size", "10", "--lists", "2"),
    *("--watchers", "2", "--watch-rate", "10", "--watch-seconds", "0.6"),
    *("--clients", "2", "--write-rate", "20", "--write-seconds", "0.5", "--database", "sqlite"),
]


def test_a_tiny_run_measures_lists_watches_and_writes() -> None:
    parser = argparse.ArgumentParser()
    kube_api.add_arguments(parser)

    report = kube_api.run(parser.parse_args(TINY))

    assert report["name"] == "kube-api"
    assert report["params"]["database"] == "sqlite"
    metrics = report["metrics"]
    assert 0 < metrics["list_ms_p50"] <= metrics["list_ms_p99"]
    assert metrics["watch_events"] == metrics["watch_writes"] * 2
    assert 0 <= metrics["watch_events_superseded"] <= metrics["watch_events"]
    assert metrics["watch_events_missed"] == 0
    assert metrics["write_requests"] == 10
    assert metrics["write_errors"] == metrics["write_unsent"] == 0
    assert len(metrics["write_ms_max_by_second"]) == 1  # the requests of half a second
    assert metrics["write_ms_max_by_second"][0] == metrics["write_ms_max"]
    assert 0 < metrics["write_disk_sync_ms_p50"] <= metrics["write_disk_sync_ms_max"]
    assert metrics["write_host_busy_cpu_s"] > 0
    assert metrics["write_host_stolen_cpu_s"] >= 0
    assert set(report["slo"]) == {"list", "watch", "write"}
    assert report["slo"]["write"]["kube_apiserver_slo_p99_ms"] == 1000.0


def test_each_seconds_worst_wait_tells_a_stall_from_a_run_that_fell_behind() -> None:
    stall = [(0.1, 0.01), (1.2, 0.2), (1.5, 0.05), (2.9, 0.012), (4.0, 0.011)]

    assert kube_api.worst_by_second(stall) == [10.0, 200.0, 12.0, 0.0, 11.0]
    assert kube_api.worst_by_second([]) == []
