"""The in-flight cap: refuse at once beyond it, count async work, size the default for the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.llm_router.overload import (
    EventLoopLag,
    InFlightCap,
    Overloaded,
    default_max_in_flight,
    usable_cpus,
)


def test_a_request_beyond_the_cap_is_refused_at_once():
    cap = InFlightCap(2)
    with cap.admit(), cap.admit():
        with pytest.raises(Overloaded) as caught, cap.admit():
            pass
        assert cap.in_flight == 2
    assert (cap.in_flight, cap.refused) == (0, 1)
    assert (caught.value.reason, caught.value.http_status, caught.value.retry_after_s) == (
        "overloaded",
        503,
        1.0,
    )


def test_async_work_counts_toward_the_load_sync_requests_see():
    cap = InFlightCap(1)
    with cap.hold(), pytest.raises(Overloaded), cap.admit():
        pass
    with cap.admit():
        assert cap.in_flight == 1


def test_the_default_cap_bounds_the_cpu_backlog_of_one_core():
    assert default_max_in_flight(cpus=2.0) == 100, "one event loop uses one core however many there are"
    assert default_max_in_flight(cpus=1.0) == 100
    assert default_max_in_flight(cpus=0.5) == 50, "a CPU quota below one core lowers it"
    assert default_max_in_flight(cpus=0.01) == 8


def test_a_sustained_late_event_loop_sheds_sync_requests_below_the_cap():
    lag = EventLoopLag()
    cap = InFlightCap(100, lag=lambda: lag.lag_s, max_lag_s=0.1)
    lag.record(0.5)
    with cap.admit():
        pass
    assert cap.refused == 0, "one pause (a collection, a lazy import) does not shed load"
    for _ in range(30):
        lag.record(0.2)
    with pytest.raises(Overloaded, match="event loop"), cap.admit():
        pass
    for _ in range(30):
        lag.record(0.0)
    with cap.admit():
        assert cap.in_flight == 1


def test_shedding_on_lag_can_be_turned_off():
    cap = InFlightCap(100, lag=lambda: 10.0, max_lag_s=0)
    with cap.admit():
        assert cap.shedding() is None


def test_a_cgroup_quota_limits_the_usable_cpus(tmp_path: Path):
    quota = tmp_path / "cpu.max"
    quota.write_text("50000 100000\n")
    assert usable_cpus(quota) == 0.5
    quota.write_text("max 100000\n")
    assert usable_cpus(quota) >= 1
    assert usable_cpus(tmp_path / "absent") >= 1
