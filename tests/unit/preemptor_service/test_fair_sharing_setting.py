"""Kueue's `fairSharing.enable` is one setting: the scheduler admits and the preemptor preempts by it."""

from __future__ import annotations

import pytest

from libs.core.preemption.world import PreemptorSettings, PreemptorStateMachine
from libs.runtime.settings import PodwaySettings
from services.preemptor.app import PreemptorService
from services.scheduler.app import SchedulerService


@pytest.mark.parametrize("enabled", [False, True])
def test_the_fair_sharing_setting_reaches_the_scheduler_and_the_preemptor(
    enabled: bool, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PODWAY_FAIR_SHARING", "true" if enabled else "false")
    settings = PodwaySettings(nats_url="nats://127.0.0.1:1", database_url="sqlite+aiosqlite://")

    scheduler = SchedulerService(settings)
    preemptor = PreemptorService(settings)

    assert settings.fair_sharing is enabled
    assert scheduler.machine_settings.fair_sharing is enabled
    assert preemptor.preemptor_settings.fair_sharing is enabled


def test_the_preemptors_view_of_the_queues_shares_its_fair_sharing():
    fair = PreemptorStateMachine(PreemptorSettings(fair_sharing=True))
    plain = PreemptorStateMachine()

    assert fair.cluster.quotas.fair_sharing is True
    assert plain.cluster.quotas.fair_sharing is False
