"""The Kubernetes probes on real services, on both databases: admission and a leased scheduler beat that NATS is
connected and the database answers, so `python -m libs.runtime.probe ready` passes; with the NATS server
gone the beats say so and readiness fails while liveness holds (the client is reconnecting)."""

from __future__ import annotations

import time
from pathlib import Path

from libs.runtime import probe
from libs.runtime.nats_server import EmbeddedNatsServer
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.scheduler.app import SchedulerService
from tests.support import eventually


async def test_ready_while_connected_and_not_ready_once_nats_is_gone(
    nats_server: EmbeddedNatsServer, nats_url: str, database_url: str, tmp_path: Path
):
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, metrics_port=-1
    )
    services = [AdmissionService(settings), SchedulerService(settings)]
    for service in services:
        await service.start()
    run_dir = settings.run_dir

    async def readiness() -> list[str]:
        return probe.ready(run_dir, time.time())

    try:
        assert (
            await eventually(readiness, lambda problems: problems == [] and len(probe.beats(run_dir)) == 2)
            == []
        )
        beats = probe.beats(run_dir)
        assert {b["nats"] for b in beats.values()} == {"connected"}
        assert {b["database"] for b in beats.values()} == {"ok"}

        nats_server.stop()
        problems = await eventually(readiness, lambda found: len(found) == 2)
        assert sorted(p.split(": ", 1)[1] for p in problems) == ["NATS is reconnecting"] * 2
        assert probe.live(run_dir, time.time()) == []
    finally:
        for service in services:
            await service.stop()
