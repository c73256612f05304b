"""The PT capacity tracker and the feature budget: token buckets on an injected clock."""

from __future__ import annotations

from libs.core.routing import Allowance, Capacity, CapacityTracker, estimate_tokens


def test_estimate_is_prompt_chars_over_four_plus_max_tokens() -> None:
    assert estimate_tokens(prompt_chars=400, max_tokens=256) == 356
    assert estimate_tokens(prompt_chars=1, max_tokens=0) == 1


def test_reservations_stop_when_the_minute_is_spent_and_resume_as_it_refills() -> None:
    tracker = CapacityTracker(Capacity(tokens_per_minute=600), now=0.0)
    assert tracker.try_reserve(400, 0.0) is not None
    assert tracker.try_reserve(400, 0.0) is None
    assert tracker.try_reserve(400, 20.0) is not None, "200 left + 20 s x 10 tokens/s"


def test_in_flight_cap_limits_concurrent_reservations() -> None:
    tracker = CapacityTracker(Capacity(tokens_per_minute=10_000, concurrency=2), now=0.0)
    first = tracker.try_reserve(10, 0.0)
    assert first is not None
    assert tracker.try_reserve(10, 0.0) is not None
    assert tracker.try_reserve(10, 0.0) is None
    first.settle(used_tokens=10, now=0.0)
    assert tracker.try_reserve(10, 0.0) is not None


def test_settling_gives_back_the_unused_estimate() -> None:
    tracker = CapacityTracker(Capacity(tokens_per_minute=1000), now=0.0)
    reservation = tracker.try_reserve(800, 0.0)
    assert reservation is not None
    reservation.settle(used_tokens=100, now=0.0)
    reservation.settle(used_tokens=100, now=0.0)
    snapshot = tracker.snapshot(0.0)
    assert snapshot.tokens_available == 900
    assert snapshot.in_flight == 0


def test_cancel_refunds_everything_once() -> None:
    tracker = CapacityTracker(Capacity(tokens_per_minute=1000), now=0.0)
    reservation = tracker.try_reserve(800, 0.0)
    assert reservation is not None
    reservation.cancel(0.0)
    reservation.cancel(0.0)
    assert tracker.snapshot(0.0).tokens_available == 1000
    assert tracker.snapshot(0.0).in_flight == 0


def test_provider_exhaustion_empties_the_bucket_until_it_refills() -> None:
    tracker = CapacityTracker(Capacity(tokens_per_minute=600), now=0.0)
    tracker.mark_exhausted(0.0)
    assert tracker.try_reserve(10, 0.5) is None
    assert tracker.try_reserve(10, 1.0) is not None


def test_feature_budget_says_when_to_retry() -> None:
    budget = Allowance(tokens_per_minute=600, now=0.0)
    assert budget.try_spend(600, 0.0) == 0.0
    assert budget.try_spend(100, 0.0) == 10.0
    budget.correct(estimated=600, used=100, now=0.0)
    assert budget.try_spend(100, 0.0) == 0.0
