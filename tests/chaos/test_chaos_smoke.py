"""The chaos smoke CI runs: a few dozen gang Jobs and a hundred inference requests through `podway up` on a
private PostgreSQL while every fault kind strikes once (each service SIGKILLed, each leased service paused past
its lease while a standby takes over, a node running pods taken away until it is lost and brought back,
nats-server SIGKILLed, PostgreSQL crashed). Every Job decided, every queued request one outcome, and
`podway check` clean. The full run is `make soak`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.chaos.harness import FAULTS, ChaosPlan, run
from tests.integration.reliability.private_postgres import postgres_bin

pytestmark = pytest.mark.skipif(
    postgres_bin() is None or os.geteuid() != 0, reason="needs PostgreSQL binaries and root to run initdb"
)


async def test_every_fault_once_and_every_promise_kept(tmp_path: Path) -> None:
    report = await run(
        ChaosPlan(seed=7, jobs=40, requests=120, fault_window_s=40.0, deadline_s=220.0), tmp_path
    )
    print(json.dumps({k: v for k, v in asdict(report).items() if k != "answered"}))
    assert sorted(report.faults_injected) == sorted(FAULTS), report
    assert report.violations == []
    assert report.jobs_decided == report.jobs, report
    assert report.requests_without_outcome == 0, report
    assert report.jobs_preempted >= 1, report
    # The lost node's pods were failed with it (and their Jobs still decided, above).
    assert len(report.nodes_lost) == 1, report
    assert report.pods_failed_node_lost >= 1, report
    assert report.requests > report.requests_failed, report
