"""Per feature x model figures (latency, time to first token, errors, tokens, cost, quality feedback), the
evidence for choosing each feature's model chain."""

from __future__ import annotations

from dataclasses import dataclass

EWMA_ALPHA = 0.1


@dataclass(frozen=True, slots=True)
class ScoreboardEntry:
    """One feature x model row of the scoreboard."""

    feature: str
    model: str
    requests: int
    failures: int
    error_rate: float
    latency_ms_ewma: float
    first_byte_ms_ewma: float
    latency_ms_max: float
    input_tokens: int
    output_tokens: int
    cost: float
    feedback_count: int
    feedback_mean: float | None


class _Row:
    __slots__ = (
        "cost",
        "failures",
        "feedback_count",
        "feedback_sum",
        "first_byte_ms",
        "input_tokens",
        "latency_max",
        "latency_ms",
        "output_tokens",
        "requests",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.failures = 0
        self.latency_ms = 0.0
        self.first_byte_ms = 0.0
        self.latency_max = 0.0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.feedback_count = 0
        self.feedback_sum = 0.0


class Scoreboard:
    """In-memory scoreboard; O(1) per record, snapshot on demand."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], _Row] = {}

    def _row(self, feature: str, model: str) -> _Row:
        row = self._rows.get((feature, model))
        if row is None:
            row = self._rows[(feature, model)] = _Row()
        return row

    def record_success(
        self,
        feature: str,
        model: str,
        *,
        latency_ms: float,
        first_byte_ms: float,
        input_tokens: int,
        output_tokens: int,
        cost: float,
    ) -> None:
        """An answered request."""
        row = self._row(feature, model)
        first = row.requests - row.failures == 0
        row.requests += 1
        row.latency_ms = latency_ms if first else row.latency_ms + EWMA_ALPHA * (latency_ms - row.latency_ms)
        row.first_byte_ms = (
            first_byte_ms if first else row.first_byte_ms + EWMA_ALPHA * (first_byte_ms - row.first_byte_ms)
        )
        row.latency_max = max(row.latency_max, latency_ms)
        row.input_tokens += input_tokens
        row.output_tokens += output_tokens
        row.cost += cost

    def record_failure(self, feature: str, model: str) -> None:
        """An attempt on this model that failed for ill health (a reason that counts against its breaker): PT
        capacity, quota and the caller's own errors are not the model's failures."""
        row = self._row(feature, model)
        row.requests += 1
        row.failures += 1

    def record_feedback(self, feature: str, model: str, score: float) -> None:
        """A quality score (e.g. thumbs up = 1, down = 0) for an answer this model gave."""
        row = self._row(feature, model)
        row.feedback_count += 1
        row.feedback_sum += score

    def snapshot(self) -> tuple[ScoreboardEntry, ...]:
        """Every row, sorted by feature then model."""
        return tuple(
            ScoreboardEntry(
                feature=feature,
                model=model,
                requests=row.requests,
                failures=row.failures,
                error_rate=row.failures / row.requests if row.requests else 0.0,
                latency_ms_ewma=row.latency_ms,
                first_byte_ms_ewma=row.first_byte_ms,
                latency_ms_max=row.latency_max,
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                cost=row.cost,
                feedback_count=row.feedback_count,
                feedback_mean=row.feedback_sum / row.feedback_count if row.feedback_count else None,
            )
            for (feature, model), row in sorted(self._rows.items())
        )
