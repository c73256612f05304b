"""What the router has seen of each deployment, decayed over time, and the score that chooses among equivalent
deployments (docs/router.md, "How the router decides").

Each figure is an exponentially time-decayed average: a sum of samples and a sum of their weights, both halved
every HALF_LIFE_S seconds of the injected clock, so a sample weighs 1 when it arrives and 1/2 one half-life
later whatever the traffic. Blended with an optimistic prior of PRIOR_WEIGHT samples, a deployment with no
evidence (or only stale evidence) scores as fast, so it is tried, and its real figures take over after a few
samples.

Time to first byte is a peak average (as Finagle's and Helicone's peak-EWMA): a sample above the average
replaces it at once, lower samples pull it back down with the half-life. A slowdown is believed at its first
sample; a recovery needs a few half-lives of faster samples.

The score is the expected time to a good answer, in milliseconds, with the work already under way:
    (first byte + per-token latency x REFERENCE_OUTPUT_TOKENS) x (attempts in flight + 1)
    / (1 - min(error rate + throttle rate, MAX_FAULT_RATE))
    + cost per 1,000 tokens x COST_MS_PER_PRICE
Every update and every score is O(1) with no allocation: the score is computed from the running sums when read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HALF_LIFE_S = 2.0
PRIOR_WEIGHT = 1.0
"""The optimistic prior counts as this many samples."""
PRIOR_FIRST_BYTE_MS = 1.0
REFERENCE_OUTPUT_TOKENS = 100
"""Answer length at which per-token latency is weighed against time to first byte."""
MAX_FAULT_RATE = 0.9
COST_MS_PER_PRICE = 1000.0
"""A price of 1 (account currency) per 1,000 tokens weighs as one second: cost breaks near-ties in latency."""
_DECAY_PER_S = math.log(2.0) / HALF_LIFE_S


@dataclass(frozen=True, slots=True)
class EvidenceSnapshot:
    """One deployment's decayed figures and score at one instant."""

    deployment: str
    samples: float
    first_byte_ms: float
    per_token_ms: float
    error_rate: float
    throttle_rate: float
    cost_per_1k_tokens: float
    in_flight: int
    score: float


class DeploymentEvidence:
    """The decayed figures of one deployment, fed with its attempts' outcomes on the injected clock."""

    __slots__ = (
        "_at",
        "_attempts",
        "_cost",
        "_cost_weight",
        "_errors",
        "_first_byte",
        "_first_byte_weight",
        "_per_token",
        "_per_token_weight",
        "_throttles",
        "in_flight",
    )

    def __init__(self) -> None:
        self._at = 0.0
        self._attempts = 0.0
        self._errors = 0.0
        self._throttles = 0.0
        self._first_byte = 0.0
        self._first_byte_weight = 0.0
        self._per_token = 0.0
        self._per_token_weight = 0.0
        self._cost = 0.0
        self._cost_weight = 0.0
        self.in_flight = 0

    # Attempts --------------------------------------------------------------------------------------------

    def started(self) -> None:
        """An attempt was dispatched here; `ended` must follow exactly once."""
        self.in_flight += 1

    def ended(self) -> None:
        """The attempt `started` announced is over, whatever its outcome."""
        if self.in_flight > 0:
            self.in_flight -= 1

    def record_success(
        self,
        now: float,
        *,
        first_byte_ms: float,
        per_token_ms: float | None = None,
        cost_per_1k_tokens: float | None = None,
    ) -> None:
        """An answered attempt; `per_token_ms` is None when the answer had a single token, and both it and the
        cost are None when only the first byte is known (another router process's attempt)."""
        self._decay(now)
        self._attempts += 1.0
        self._first_byte_sample(first_byte_ms)
        if per_token_ms is not None:
            self._per_token += per_token_ms
            self._per_token_weight += 1.0
        if cost_per_1k_tokens is not None:
            self._cost += cost_per_1k_tokens
            self._cost_weight += 1.0

    def record_fault(self, now: float, *, throttled: bool, waited_ms: float | None = None) -> None:
        """An attempt that failed by the deployment's own fault. A throttle (429 on on-demand) counts in the
        throttle rate, anything else in the error rate; `waited_ms` is set when it gave no first byte in time,
        which is a slow outcome as well."""
        self._decay(now)
        self._attempts += 1.0
        if throttled:
            self._throttles += 1.0
        else:
            self._errors += 1.0
        if waited_ms is not None:
            self._first_byte_sample(waited_ms)

    def _first_byte_sample(self, first_byte_ms: float) -> None:
        weight = self._first_byte_weight
        if weight > 0.0 and first_byte_ms * weight > self._first_byte:
            self._first_byte = first_byte_ms * weight  # a peak replaces the average at once
        self._first_byte += first_byte_ms
        self._first_byte_weight = weight + 1.0

    def _decay(self, now: float) -> None:
        elapsed = now - self._at
        if elapsed <= 0.0:
            return
        self._at = now
        factor = math.exp(-_DECAY_PER_S * elapsed)
        self._attempts *= factor
        self._errors *= factor
        self._throttles *= factor
        self._first_byte *= factor
        self._first_byte_weight *= factor
        self._per_token *= factor
        self._per_token_weight *= factor
        self._cost *= factor
        self._cost_weight *= factor

    # Reading -----------------------------------------------------------------------------------------------

    def score(self, now: float) -> float:
        """The expected milliseconds to a good answer here (lower is better); see the module."""
        factor = self._factor(now)
        first_byte = _blend(self._first_byte * factor, self._first_byte_weight * factor, PRIOR_FIRST_BYTE_MS)
        per_token = _blend(self._per_token * factor, self._per_token_weight * factor, 0.0)
        faults = _blend((self._errors + self._throttles) * factor, self._attempts * factor, 0.0)
        cost = _blend(self._cost * factor, self._cost_weight * factor, 0.0)
        latency = (first_byte + per_token * REFERENCE_OUTPUT_TOKENS) * (self.in_flight + 1)
        return latency / (1.0 - min(faults, MAX_FAULT_RATE)) + cost * COST_MS_PER_PRICE

    def _factor(self, now: float) -> float:
        elapsed = now - self._at
        return math.exp(-_DECAY_PER_S * elapsed) if elapsed > 0.0 else 1.0

    def snapshot(self, deployment: str, now: float) -> EvidenceSnapshot:
        """The figures as `score` weighs them."""
        factor = self._factor(now)
        attempts = self._attempts * factor
        return EvidenceSnapshot(
            deployment=deployment,
            samples=attempts,
            first_byte_ms=_blend(
                self._first_byte * factor, self._first_byte_weight * factor, PRIOR_FIRST_BYTE_MS
            ),
            per_token_ms=_blend(self._per_token * factor, self._per_token_weight * factor, 0.0),
            error_rate=_blend(self._errors * factor, attempts, 0.0),
            throttle_rate=_blend(self._throttles * factor, attempts, 0.0),
            cost_per_1k_tokens=_blend(self._cost * factor, self._cost_weight * factor, 0.0),
            in_flight=self.in_flight,
            score=self.score(now),
        )


def _blend(total: float, weight: float, prior: float) -> float:
    """The decayed average of samples summing to `total` over `weight`, with the prior's PRIOR_WEIGHT."""
    return (total + prior * PRIOR_WEIGHT) / (weight + PRIOR_WEIGHT)
