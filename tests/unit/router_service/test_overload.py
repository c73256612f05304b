"""The in-flight cap: refuse at once beyond it, count async work, size the default for the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.llm_router.overload import InFlightCap, Overloaded, default_max_in_flight, usable_cpus


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
    assert default_max_in_flight(cpus=2.0) == 250, "one event loop uses one core however many there are"
    assert default_max_in_flight(cpus=1.0) == 250
    assert default_max_in_flight(cpus=0.5) == 125, "a CPU quota below one core lowers it"
    assert default_max_in_flight(cpus=0.01) == 8


def test_a_cgroup_quota_limits_the_usable_cpus(tmp_path: Path):
    quota = tmp_path / "cpu.max"
    quota.write_text("50000 100000\n")
    assert usable_cpus(quota) == 0.5
    quota.write_text("max 100000\n")
    assert usable_cpus(quota) >= 1
    assert usable_cpus(tmp_path / "absent") >= 1
