"""How long each row family is kept: 30 days of audit by default, the bus plumbing never less than its window."""

from __future__ import annotations

from datetime import timedelta

from libs.core.retention import RetentionPolicy, retention_policy
from libs.messaging.consumer import redelivery_window_s
from libs.messaging.streams import DUPLICATE_WINDOW_S
from libs.runtime.retention import policy_from
from libs.runtime.settings import PodwaySettings
from tests.conftest import FakeClock

WINDOWS = {"duplicate_window": timedelta(minutes=2), "redelivery_window": timedelta(minutes=3)}


def test_the_defaults_keep_a_month_of_audit_and_twice_each_window_of_plumbing() -> None:
    assert retention_policy(**WINDOWS) == RetentionPolicy(
        events=timedelta(days=30), outbox=timedelta(minutes=4), inbox=timedelta(minutes=6)
    )


def test_plumbing_asked_to_go_sooner_than_its_window_stays_for_the_window() -> None:
    policy = retention_policy(
        **WINDOWS, events=timedelta(days=1), outbox=timedelta(0), inbox=timedelta(seconds=5)
    )
    assert (policy.events, policy.outbox, policy.inbox) == (
        timedelta(days=1),
        timedelta(minutes=2),
        timedelta(minutes=3),
    )
    longer = retention_policy(**WINDOWS, outbox=timedelta(hours=1), inbox=timedelta(hours=2))
    assert (longer.outbox, longer.inbox) == (timedelta(hours=1), timedelta(hours=2))


def test_horizons_are_counted_back_from_the_clock() -> None:
    clock = FakeClock()
    policy = retention_policy(**WINDOWS)
    first = policy.horizons(clock())
    assert (clock() - first.events, clock() - first.outbox, clock() - first.inbox) == (
        timedelta(days=30),
        timedelta(minutes=4),
        timedelta(minutes=6),
    )
    clock.advance(timedelta(hours=1))
    assert policy.horizons(clock()).events - first.events == timedelta(hours=1)


def test_the_redelivery_window_covers_every_attempt_with_its_ack_wait_and_backoff() -> None:
    assert redelivery_window_s() == 5 * 30 + (1 + 2 + 4 + 8)
    assert redelivery_window_s(max_deliver=1, ack_wait_s=10) == 10


def test_the_settings_policy_uses_the_bus_windows_as_floors() -> None:
    default = policy_from(PodwaySettings())
    assert default.outbox == timedelta(seconds=2 * DUPLICATE_WINDOW_S)
    assert default.inbox == timedelta(seconds=2 * redelivery_window_s())
    asked = policy_from(
        PodwaySettings(retention_events_days=7, retention_outbox_seconds=1, retention_inbox_seconds=3600)
    )
    assert (asked.events, asked.outbox, asked.inbox) == (
        timedelta(days=7),
        timedelta(seconds=DUPLICATE_WINDOW_S),
        timedelta(hours=1),
    )
