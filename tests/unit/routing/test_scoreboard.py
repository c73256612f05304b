"""The per feature x model scoreboard."""

from __future__ import annotations

from libs.core.routing import Scoreboard


def test_scoreboard_aggregates_per_feature_and_model() -> None:
    board = Scoreboard()
    board.record_success(
        "search", "gemini-flash", latency_ms=100, first_byte_ms=40, input_tokens=10, output_tokens=5, cost=0.5
    )
    board.record_success(
        "search", "gemini-flash", latency_ms=200, first_byte_ms=60, input_tokens=10, output_tokens=5, cost=0.5
    )
    board.record_failure("search", "gemini-flash")
    board.record_feedback("search", "gemini-flash", 1.0)
    board.record_feedback("search", "gemini-flash", 0.0)
    board.record_success(
        "recap", "claude-haiku", latency_ms=50, first_byte_ms=50, input_tokens=1, output_tokens=1, cost=0.0
    )
    recap, search = board.snapshot()
    assert (recap.feature, search.feature) == ("recap", "search")
    assert (search.requests, search.failures) == (3, 1)
    assert round(search.error_rate, 3) == 0.333
    assert search.latency_ms_ewma == 110.0, "EWMA with alpha 0.1 from the first sample"
    assert search.latency_ms_max == 200
    assert (search.input_tokens, search.output_tokens, search.cost) == (20, 10, 1.0)
    assert (search.feedback_count, search.feedback_mean) == (2, 0.5)
    assert recap.feedback_mean is None
