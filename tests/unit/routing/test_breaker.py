"""The circuit breaker, driven on an injected clock: no test sleeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from libs.core.routing import BreakerSettings, BreakerState, CircuitBreaker, TripReason
from libs.core.routing.breaker import WINDOW_BUCKETS, _Window

FAST = 0.05
SLOW = 2.0


def make_breaker(**overrides: object) -> CircuitBreaker:
    settings = BreakerSettings.model_validate(
        {
            "window_s": 10,
            "min_requests": 20,
            "error_rate": 0.5,
            "consecutive_failures": 5,
            "latency_p90_ms": 1000,
            "open_s": 5,
            "open_s_max": 60,
            "ramp": [0.01, 0.05, 0.25, 1.0],
            "ramp_step_s": 2,
            "ramp_min_requests": 20,
        }
        | overrides
    )
    return CircuitBreaker("gemini-flash-pt", settings, now=0.0)


def open_breaker(breaker: CircuitBreaker, now: float = 0.0) -> None:
    for _ in range(breaker.settings.consecutive_failures):
        breaker.record_failure(now)
    assert breaker.state is BreakerState.OPEN


def half_open_breaker(**overrides: object) -> CircuitBreaker:
    breaker = make_breaker(**overrides)
    open_breaker(breaker)
    assert breaker.probe_due(5.0)
    breaker.record_probe(True, 5.0)
    assert breaker.state is BreakerState.HALF_OPEN
    return breaker


def test_consecutive_failures_open_the_breaker() -> None:
    breaker = make_breaker()
    transitions = [breaker.record_failure(1.0) for _ in range(5)]
    assert transitions[:4] == [None] * 4
    opened = transitions[4]
    assert opened is not None
    assert (opened.from_state, opened.to_state, opened.reason) == (
        BreakerState.CLOSED,
        BreakerState.OPEN,
        TripReason.CONSECUTIVE_FAILURES,
    )
    assert opened.open_for_s == 5
    assert not breaker.allows(1.0)


def test_error_rate_over_threshold_with_min_requests_opens_the_breaker() -> None:
    breaker = make_breaker(consecutive_failures=100)
    transition = None
    for i in range(20):
        transition = breaker.record_failure(0.1 * i) if i % 2 else breaker.record_success(FAST, 0.1 * i)
    assert transition is None, "10 of 20 is 50%: not over the threshold"
    transition = breaker.record_failure(2.0)
    assert transition is not None
    assert transition.reason is TripReason.ERROR_RATE
    assert transition.window_requests == 21


def test_high_error_rate_below_min_requests_does_not_open() -> None:
    breaker = make_breaker(consecutive_failures=100)
    for i in range(19):
        assert breaker.record_failure(0.1 * i) is None
    assert breaker.state is BreakerState.CLOSED


def test_failures_older_than_the_window_are_forgotten() -> None:
    breaker = make_breaker(consecutive_failures=100)
    for _ in range(15):
        breaker.record_failure(0.5)
    for i in range(10):
        assert breaker.record_success(FAST, 11.0 + 0.1 * i) is None
    assert breaker.snapshot(12.0).window_requests == 10
    assert breaker.state is BreakerState.CLOSED


def test_slow_first_bytes_open_the_breaker_on_p90() -> None:
    breaker = make_breaker()
    for _ in range(18):
        assert breaker.record_success(FAST, 1.0) is None
    assert breaker.record_success(SLOW, 1.0) is None
    assert breaker.record_success(SLOW, 1.0) is None, "2 slow of 20: p90 is still fast"
    transition = breaker.record_success(SLOW, 1.0)
    assert transition is not None
    assert transition.reason is TripReason.LATENCY_P90


def test_open_breaker_admits_nothing_and_asks_for_one_probe_after_open_s() -> None:
    breaker = make_breaker()
    open_breaker(breaker, now=10.0)
    assert not breaker.allows(14.9)
    assert not breaker.probe_due(14.9)
    assert breaker.probe_due(15.0)
    assert not breaker.probe_due(15.1), "one probe at a time"
    assert not breaker.allows(15.1)


def test_failed_probe_doubles_open_time_up_to_the_maximum() -> None:
    breaker = make_breaker(open_s=5, open_s_max=15)
    open_breaker(breaker)
    now, waits = 0.0, []
    for _ in range(4):
        reopens_at = breaker.snapshot(now).reopens_at
        assert reopens_at is not None
        wait = reopens_at - now
        waits.append(wait)
        now += wait
        assert breaker.probe_due(now)
        transition = breaker.record_probe(False, now)
        assert transition is not None
        assert transition.reason is TripReason.PROBE_FAILED
    assert waits == [5, 10, 15, 15]


def test_successful_probe_half_opens_at_the_first_ramp_step() -> None:
    breaker = make_breaker()
    open_breaker(breaker)
    assert breaker.probe_due(5.0)
    transition = breaker.record_probe(True, 5.0)
    assert transition is not None
    assert (transition.from_state, transition.to_state) == (BreakerState.OPEN, BreakerState.HALF_OPEN)
    assert breaker.ramp_fraction == 0.01


def test_half_open_admits_exactly_the_ramp_fraction_starting_with_the_first_request() -> None:
    breaker = half_open_breaker()
    admitted = [breaker.allows(5.0) for _ in range(300)]
    assert sum(admitted) == 3
    assert admitted[0]
    assert admitted[100]
    assert admitted[200]


def test_ramp_steps_up_after_step_time_and_min_requests_then_closes() -> None:
    breaker = half_open_breaker(ramp_step_s=2, ramp_min_requests=20)
    now = 5.0
    fractions = []
    for _ in range(3):
        fractions.append(breaker.ramp_fraction)
        for i in range(19):
            assert breaker.record_success(FAST, now + 0.01 * i) is None
        now += 2.0
        transition = breaker.record_success(FAST, now)
    assert fractions == [0.01, 0.05, 0.25]
    assert transition is not None
    assert (transition.from_state, transition.to_state) == (BreakerState.HALF_OPEN, BreakerState.CLOSED)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.allows(now)


def test_ramp_does_not_step_up_before_ramp_step_s() -> None:
    breaker = half_open_breaker(ramp_step_s=2, ramp_min_requests=5)
    for _ in range(50):
        breaker.record_success(FAST, 6.0)
    assert breaker.ramp_fraction == 0.01


def test_failure_while_half_open_reopens_with_doubled_open_time() -> None:
    breaker = half_open_breaker()
    transition = breaker.record_failure(6.0)
    assert transition is not None
    assert (transition.to_state, transition.reason, transition.open_for_s) == (
        BreakerState.OPEN,
        TripReason.RAMP_FAILED,
        10,
    )
    assert not breaker.probe_due(15.9)
    assert breaker.probe_due(16.0)


def test_a_failure_after_successes_in_half_open_reopens_with_doubled_open_time() -> None:
    breaker = half_open_breaker()
    assert breaker.record_success(FAST, 5.5) is None
    transition = breaker.record_failure(6.0)
    assert transition is not None
    assert (transition.from_state, transition.to_state, transition.reason, transition.open_for_s) == (
        BreakerState.HALF_OPEN,
        BreakerState.OPEN,
        TripReason.RAMP_FAILED,
        10,
    )
    assert not breaker.allows(6.0)
    assert breaker.snapshot(6.0).reopens_at == 16.0


def test_every_reopen_from_half_open_doubles_the_open_time_up_to_the_maximum() -> None:
    breaker = half_open_breaker(open_s=5, open_s_max=15)
    now, open_times = 5.0, []
    for _ in range(3):
        breaker.record_success(FAST, now)
        transition = breaker.record_failure(now)
        assert transition is not None
        open_times.append(transition.open_for_s)
        now += transition.open_for_s or 0.0
        assert breaker.probe_due(now)
        breaker.record_probe(True, now)
    assert open_times == [10, 15, 15]


def test_a_step_whose_error_rate_reaches_the_threshold_does_not_step_up() -> None:
    breaker = half_open_breaker(error_rate=0.5, ramp_step_s=2, ramp_min_requests=20)
    for i in range(10):
        breaker.record_success(FAST, 5.0 + 0.1 * i)
        breaker.record_failure(5.05 + 0.1 * i)
    # 10 failures in 20 attempts is exactly the threshold, not under it: the step time passing changes nothing.
    breaker.record_success(FAST, 7.5)
    assert breaker.state is BreakerState.OPEN
    assert breaker.ramp_fraction == 0.0


def test_closing_resets_the_open_time() -> None:
    breaker = half_open_breaker(ramp=[1.0], ramp_step_s=0, ramp_min_requests=1)
    assert breaker.record_success(FAST, 5.0) is not None
    assert breaker.state is BreakerState.CLOSED
    open_breaker(breaker, now=6.0)
    assert breaker.snapshot(6.0).reopens_at == 11.0


def test_outcomes_arriving_while_open_are_ignored() -> None:
    breaker = make_breaker()
    open_breaker(breaker)
    assert breaker.record_success(FAST, 1.0) is None
    assert breaker.record_failure(1.0) is None
    assert breaker.state is BreakerState.OPEN


@given(st.lists(st.tuples(st.floats(0, 3), st.booleans()), max_size=200))
def test_window_counts_exactly_the_records_of_the_last_window(events: list[tuple[float, bool]]) -> None:
    window = _Window(10.0)
    width = 10.0 / WINDOW_BUCKETS
    now, history = 0.0, []
    for step, failed in events:
        now += step
        window.record(now, failed=failed, slow=False)
        history.append((int(now // width), failed))
        newest = int(now // width)
        live = [f for epoch, f in history if epoch > newest - WINDOW_BUCKETS]
        assert window.requests == len(live)
        assert window.failures == sum(live)


@given(st.sampled_from([0.01, 0.05, 0.25, 0.5]), st.integers(1, 2000))
def test_ramp_admission_never_exceeds_its_fraction_by_more_than_one(fraction: float, offered: int) -> None:
    breaker = half_open_breaker(ramp=[fraction, 1.0])
    admitted = sum(breaker.allows(5.0) for _ in range(offered))
    assert admitted - 1 <= offered * fraction + 1e-9
    assert admitted >= int(offered * fraction)


def recover_at_rate(breaker: CircuitBreaker, requests_per_s: float, start: float, answer_s: float) -> float:
    """Offer traffic at a steady rate, each admitted request answering `answer_s` later; the instant the
    breaker closes (or start + 600 s)."""
    now, gap = start, 1.0 / requests_per_s
    answers: list[float] = []
    while now < start + 600:
        for at in [at for at in answers if at <= now]:
            answers.remove(at)
            breaker.record_success(FAST, at)
        if breaker.state is BreakerState.CLOSED:
            return now
        if breaker.allows(now):
            answers.append(now + answer_s)
        now += gap
    return now


def test_a_quiet_deployment_recovers_in_seconds_not_after_two_thousand_requests() -> None:
    breaker = half_open_breaker(ramp_step_s=2, ramp_min_requests=20)
    closed_at = recover_at_rate(breaker, requests_per_s=3, start=5.0, answer_s=0.2)
    assert closed_at - 5.0 < 10.0
    assert breaker.state is BreakerState.CLOSED


def test_a_step_needs_as_many_successes_as_it_admitted_up_to_min_requests() -> None:
    breaker = half_open_breaker(ramp_step_s=2, ramp_min_requests=20)
    for _ in range(1000):
        breaker.allows(5.0)  # ten admitted at 1 %
    for i in range(9):
        breaker.record_success(FAST, 7.0 + i * 0.01)
    assert breaker.ramp_fraction == 0.01
    breaker.record_success(FAST, 7.1)
    assert breaker.ramp_fraction == 0.05


def test_a_step_whose_time_has_passed_admits_at_the_next_fraction_without_a_burst() -> None:
    breaker = half_open_breaker(ramp_step_s=2)
    for _ in range(1000):
        breaker.allows(5.0)
    admitted = sum(breaker.allows(7.5) for _ in range(1000))
    assert admitted == 50


def test_a_peer_success_stands_for_the_probe_once_it_is_due() -> None:
    breaker = make_breaker()
    open_breaker(breaker)
    assert breaker.record_peer_success(FAST, 1.0) is None  # it may predate the outage
    assert breaker.state is BreakerState.OPEN
    transition = breaker.record_peer_success(FAST, 5.0)
    assert transition is not None
    assert (transition.to_state, transition.reason) == (BreakerState.HALF_OPEN, TripReason.PEER_SUCCEEDED)
    assert not breaker.probe_due(6.0)


def test_a_late_local_probe_after_a_peer_half_opened_the_breaker_changes_nothing() -> None:
    breaker = make_breaker()
    open_breaker(breaker)
    assert breaker.probe_due(5.0)
    breaker.record_peer_success(FAST, 5.01)
    assert breaker.record_probe(True, 5.2) is None
    assert breaker.state is BreakerState.HALF_OPEN
