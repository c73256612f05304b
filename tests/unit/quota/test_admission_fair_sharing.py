"""Admission fair sharing's arithmetic and order, as Kueue's: usage decays by its half-life between samples, an
admission counts at once as a penalty, weights divide, and a less-used LocalQueue's workload that fits goes
first."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libs.core.quota import admit
from libs.core.quota.admission_fair_sharing import (
    AdmissionFairSharing,
    UsageLedger,
    decay_rate,
    parse_status,
)
from libs.core.quota.ordering import goes_first
from tests.unit.quota.builders import GPU, gang, make_queue, running, snapshot

CONFIG = AdmissionFairSharing(half_life_s=600.0, sampling_interval_s=60.0)


def test_one_half_life_keeps_half_of_the_past_and_takes_half_of_the_present() -> None:
    ledger = UsageLedger(CONFIG)
    ledger.restore("ns/a", {GPU: 16.0}, 0.0)
    ledger.sample(600.0, {"ns/a": {GPU: 4}})
    assert ledger.entries["ns/a"].consumed == {GPU: pytest.approx(10.0)}
    assert ledger.entries["ns/a"].last_update == 600.0


def test_a_zero_half_life_forgets_the_past_at_once() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life_s=0))
    ledger.restore("ns/a", {GPU: 16.0}, 0.0)
    ledger.sample(1.0, {"ns/a": {GPU: 2}})
    assert ledger.entries["ns/a"].consumed == {GPU: 2.0}


def test_an_admission_counts_at_once_until_the_next_sample_settles_it() -> None:
    ledger = UsageLedger(CONFIG)
    ledger.sample(0.0, {})
    ledger.admitted("ns/a", {GPU: 8, "cpu": 4000})
    alpha = decay_rate(60.0, 600.0)
    assert ledger.usage("ns/a", Decimal(1)) == pytest.approx(8 * alpha + 4 * alpha)  # cpu counts in cores
    ledger.sample(60.0, {"ns/a": {GPU: 8, "cpu": 4000}})
    assert ledger.entries["ns/a"].penalty == {}
    assert ledger.usage("ns/a", Decimal(1)) == pytest.approx(12 * alpha)


def test_weights_divide_and_resource_weights_multiply() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life_s=0, resource_weights={GPU: 10.0}))
    ledger.sample(0.0, {"ns/a": {GPU: 2, "cpu": 1000}})
    assert ledger.usage("ns/a", Decimal(1)) == pytest.approx(21.0)
    assert ledger.usage("ns/a", Decimal(3)) == pytest.approx(7.0)
    assert ledger.usage("ns/a", Decimal(0)) == math.inf
    assert ledger.usage("ns/unknown", Decimal(1)) == 0.0


def test_sampling_is_due_once_per_interval_and_reports_what_changed() -> None:
    ledger = UsageLedger(CONFIG)
    assert ledger.due(0.0)
    assert ledger.sample(0.0, {}) == []
    assert not ledger.due(59.0)
    assert ledger.due(60.0)
    assert ledger.sample(60.0, {"ns/a": {GPU: 1}}) == ["ns/a"]
    assert ledger.entries["ns/a"].consumed == {GPU: pytest.approx(decay_rate(60.0, 600.0))}
    assert ledger.sample(120.0, {}) == ["ns/a"]  # decaying towards nothing


@given(
    st.lists(st.tuples(st.floats(0, 3600), st.integers(0, 64)), min_size=1, max_size=30),
    st.floats(1, 10_000),
)
def test_consumed_stays_between_the_least_and_the_most_ever_held(
    samples: list[tuple[float, int]], half_life: float
) -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life_s=half_life))
    now = 0.0
    ledger.sample(now, {})
    held = [0]
    for gap, amount in samples:
        now += gap
        ledger.sample(now, {"ns/a": {GPU: amount}})
        held.append(amount)
    consumed = ledger.entries["ns/a"].consumed.get(GPU, 0.0)
    assert min(held) - 1e-6 <= consumed <= max(held) + 1e-6


def test_a_status_round_trips_through_what_is_stored() -> None:
    ledger = UsageLedger(CONFIG)
    ledger.restore("ns/a", {GPU: 12.0, "cpu": 2500.0, "memory": 2.0 * 2**30}, 1_800_000_000.0)
    status = ledger.status("ns/a")
    assert status == {
        "consumedResources": {"cpu": "2500m", "memory": "2Gi", GPU: "12"},
        "lastUpdate": "2027-01-15T08:00:00Z",
    }
    assert parse_status(status) == ({"cpu": 2500.0, "memory": 2.0 * 2**30, GPU: 12.0}, 1_800_000_000.0)
    broken = [
        {"consumedResources": [], "lastUpdate": "2027-01-15T08:00:00Z"},
        {"consumedResources": {GPU: "x"}, "lastUpdate": "2027-01-15T08:00:00Z"},
        {"consumedResources": {GPU: "1"}},
        {"consumedResources": {GPU: "1"}, "lastUpdate": "yesterday"},
    ]
    for status in broken:
        with pytest.raises(ValueError):
            parse_status(status)


def test_in_a_queue_with_admission_fair_sharing_the_less_used_local_queue_that_fits_goes_first() -> None:
    queue = make_queue("shared", 8, cohort=None, admission_fair_sharing=True)
    state = snapshot([queue], [running("busy", "shared", 4)])
    heavy = gang("shared", 4, minute=1, name="heavy-job", local_queue="ns/heavy")
    light = gang("shared", 4, minute=2, name="light-job", local_queue="ns/light")
    too_big = gang("shared", 8, minute=0, name="too-big", local_queue="ns/idle")
    usage = {"ns/heavy": 10.0, "ns/light": 1.0, "ns/idle": 0.0}.__getitem__

    ahead = goes_first(
        state, heavy, admit(state, heavy), [heavy, light, too_big], fair_sharing=False, admission_usage=usage
    )

    assert ahead is not None
    assert ahead.workload == "light-job", "too-big used less, but does not fit: it does not hold the queue"
    assert (
        goes_first(
            state,
            light,
            admit(state, light),
            [heavy, light, too_big],
            fair_sharing=False,
            admission_usage=usage,
        )
        is None
    )
    plain = make_queue("shared", 8, cohort=None)
    state = snapshot([plain], [running("busy", "shared", 4)])
    assert (
        goes_first(
            state, heavy, admit(state, heavy), [heavy, light], fair_sharing=False, admission_usage=usage
        )
        is None
    )


def test_a_strict_fifo_queue_with_admission_fair_sharing_orders_by_usage_then_priority() -> None:
    queue = make_queue("shared", 8, cohort=None, admission_fair_sharing=True, strict_fifo=True)
    state = snapshot([queue], [running("busy", "shared", 6)])
    urgent = gang("shared", 4, priority=100, minute=1, name="urgent", local_queue="ns/heavy")
    small = gang("shared", 2, minute=2, name="small", local_queue="ns/light")
    usage = {"ns/heavy": 10.0, "ns/light": 1.0}.__getitem__

    assert (
        goes_first(
            state, small, admit(state, small), [urgent, small], fair_sharing=False, admission_usage=usage
        )
        is None
    )
    ahead = goes_first(state, small, admit(state, small), [urgent, small], fair_sharing=False)
    assert ahead is not None
    assert ahead.workload == "urgent", "by priority alone, the urgent head blocks"
