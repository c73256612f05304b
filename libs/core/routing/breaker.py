"""The circuit breaker of one deployment: CLOSED -> OPEN -> (probe) -> HALF_OPEN ramp -> CLOSED.

HALF_OPEN reopens on any failure, so a step that lasts `ramp_step_s` and `ramp_min_requests` attempts has an
error rate of zero, under any threshold (the breaker needs one strictly under `error_rate`, which is > 0).

Recovery takes seconds at any traffic level: a step needs at most `ramp_min_requests` successes, and no more
than the requests it admitted (a quiet deployment is not held at 1 % until 20 requests came by). Once a step's
time has passed it admits at the next step's fraction, so the success that moves it up arrives without waiting
for the hundredth request. A peer process's success counts as this breaker's probe once the probe is due.

Time is a float of seconds passed in by the caller. Every method is O(1): the sliding window is a fixed ring
of buckets, and the p90 test counts slow successes instead of sorting latencies (p90 > T exactly when more
than n - ceil(0.9 n) of the n successes are slower than T).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from libs.api.router_policy.policy import BreakerSettings

WINDOW_BUCKETS = 10


class BreakerState(StrEnum):
    """Where a deployment's breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class TripReason(StrEnum):
    """Why a breaker changed state."""

    ERROR_RATE = "error_rate"
    LATENCY_P90 = "latency_p90"
    CONSECUTIVE_FAILURES = "consecutive_failures"
    PROBE_SUCCEEDED = "probe_succeeded"
    PEER_SUCCEEDED = "peer_succeeded"
    PROBE_FAILED = "probe_failed"
    RAMP_FAILED = "ramp_failed"
    RAMP_COMPLETED = "ramp_completed"


@dataclass(frozen=True, slots=True)
class BreakerTransition:
    """One state change, as the audit log records it (`router.breaker.opened|half_opened|closed`)."""

    deployment: str
    from_state: BreakerState
    to_state: BreakerState
    reason: TripReason
    at: float
    window_requests: int
    window_error_rate: float
    open_for_s: float | None


@dataclass(frozen=True, slots=True)
class BreakerSnapshot:
    """A breaker's visible state."""

    deployment: str
    state: BreakerState
    ramp_fraction: float
    window_requests: int
    window_error_rate: float
    consecutive_failures: int
    reopens_at: float | None
    ramp_step: int | None = None
    """Index in the ramp while half-open."""


class _Window:
    """Counts of the last `window_s` seconds in WINDOW_BUCKETS buckets, with running totals."""

    __slots__ = ("_failures", "_last_epoch", "_requests", "_slow", "_width", "failures", "requests", "slow")

    def __init__(self, window_s: float) -> None:
        self._width = window_s / WINDOW_BUCKETS
        self._requests = [0] * WINDOW_BUCKETS
        self._failures = [0] * WINDOW_BUCKETS
        self._slow = [0] * WINDOW_BUCKETS
        self._last_epoch = -1
        self.requests = 0
        self.failures = 0
        self.slow = 0

    def record(self, now: float, *, failed: bool, slow: bool) -> None:
        index = self._advance(now)
        self._requests[index] += 1
        self.requests += 1
        if failed:
            self._failures[index] += 1
            self.failures += 1
        if slow:
            self._slow[index] += 1
            self.slow += 1

    def _advance(self, now: float) -> int:
        epoch = int(now // self._width)
        if epoch > self._last_epoch:
            # Buckets between the last record and now hold epochs a full window old: recycle them.
            for fresh in range(max(self._last_epoch + 1, epoch - WINDOW_BUCKETS + 1), epoch + 1):
                self._recycle(fresh)
            self._last_epoch = epoch
        return self._last_epoch % WINDOW_BUCKETS

    def _recycle(self, epoch: int) -> None:
        index = epoch % WINDOW_BUCKETS
        self.requests -= self._requests[index]
        self.failures -= self._failures[index]
        self.slow -= self._slow[index]
        self._requests[index] = self._failures[index] = self._slow[index] = 0

    def error_rate(self) -> float:
        return self.failures / self.requests if self.requests else 0.0

    def p90_exceeds(self) -> bool:
        successes = self.requests - self.failures
        return successes > 0 and self.slow > successes - math.ceil(0.9 * successes)


class CircuitBreaker:
    """Health gate of one deployment, driven by attempt outcomes and an injected clock."""

    def __init__(self, deployment: str, settings: BreakerSettings, now: float) -> None:
        self.deployment = deployment
        self.settings = settings
        self.state = BreakerState.CLOSED
        self._window = _Window(settings.window_s)
        self._consecutive = 0
        self._open_for = settings.open_s
        self._reopens_at = now
        self._probing = False
        self._step = 0
        self._step_started = now
        self._step_attempts = 0
        self._step_admitted = 0
        self._step_due = False
        self._offered = 0
        self._admitted = 0

    # Admission -----------------------------------------------------------------------------------------

    def allows(self, now: float) -> bool:
        """Whether a real request may go to this deployment now (consumes a ramp slot in HALF_OPEN).

        In HALF_OPEN the n-th request offered in a step is admitted while fewer than ceil(n x fraction) were:
        exactly the ramp fraction, starting with the first, deterministic so tests and the simulator replay it.
        """
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN:
            return False
        if not self._step_due and now - self._step_started >= self.settings.ramp_step_s:
            self._step_due = True
            self._offered = self._admitted = 0
        self._offered += 1
        if self._admitted < math.ceil(self._offered * self._admitting_fraction() - 1e-9):
            self._admitted += 1
            self._step_admitted += 1
            return True
        return False

    def admit_last_resort(self) -> bool:
        """Admit a request the ramp held back because no other candidate admits it: a half-open deployment
        answered its probe, so sending there beats refusing the caller. False unless HALF_OPEN."""
        if self.state is not BreakerState.HALF_OPEN:
            return False
        self._step_admitted += 1
        return True

    def _admitting_fraction(self) -> float:
        ramp = self.settings.ramp
        return ramp[min(self._step + 1, len(ramp) - 1)] if self._step_due else ramp[self._step]

    def probe_due(self, now: float) -> bool:
        """True once per open period, when it is time to send the single probe; the caller must send it."""
        if self.state is not BreakerState.OPEN or self._probing or now < self._reopens_at:
            return False
        self._probing = True
        return True

    # Outcomes --------------------------------------------------------------------------------------------

    def record_success(self, first_byte_s: float, now: float) -> BreakerTransition | None:
        """A real attempt answered; `first_byte_s` feeds the p90 latency test."""
        self._consecutive = 0
        slow = first_byte_s * 1000.0 > self.settings.latency_p90_ms
        if self.state is BreakerState.CLOSED:
            self._window.record(now, failed=False, slow=slow)
            if self._window.requests >= self.settings.min_requests and self._window.p90_exceeds():
                return self._open(now, TripReason.LATENCY_P90)
            return None
        if self.state is BreakerState.HALF_OPEN:
            self._step_attempts += 1
            return self._maybe_step_up(now)
        return None

    def record_failure(self, now: float) -> BreakerTransition | None:
        """A real attempt failed in a way that counts against health (see REASON_TRAITS). In HALF_OPEN any
        failure reopens, for twice the previous open time (up to `open_s_max`)."""
        self._consecutive += 1
        if self.state is BreakerState.CLOSED:
            self._window.record(now, failed=True, slow=False)
            if self._consecutive >= self.settings.consecutive_failures:
                return self._open(now, TripReason.CONSECUTIVE_FAILURES)
            if (
                self._window.requests >= self.settings.min_requests
                and self._window.error_rate() > self.settings.error_rate
            ):
                return self._open(now, TripReason.ERROR_RATE)
            return None
        if self.state is BreakerState.HALF_OPEN:
            return self._reopen(now, TripReason.RAMP_FAILED)
        return None

    def record_probe(self, succeeded: bool, now: float) -> BreakerTransition | None:
        """The outcome of the probe that `probe_due` asked for."""
        if self.state is not BreakerState.OPEN or not self._probing:
            return None
        self._probing = False
        if not succeeded:
            return self._reopen(now, TripReason.PROBE_FAILED)
        self._start_step(0, now)
        return self._move(BreakerState.HALF_OPEN, TripReason.PROBE_SUCCEEDED, now)

    def record_peer_success(self, first_byte_s: float, now: float) -> BreakerTransition | None:
        """Another router process's attempt answered. While OPEN it stands for this breaker's probe once the
        probe is due (earlier, it may predate the outage); otherwise it counts like a local success."""
        if self.state is not BreakerState.OPEN:
            return self.record_success(first_byte_s, now)
        if now < self._reopens_at:
            return None
        self._probing = False
        self._start_step(0, now)
        return self._move(BreakerState.HALF_OPEN, TripReason.PEER_SUCCEEDED, now)

    def snapshot(self, now: float) -> BreakerSnapshot:
        """The visible state of this breaker."""
        return BreakerSnapshot(
            deployment=self.deployment,
            state=self.state,
            ramp_fraction=self.ramp_fraction,
            window_requests=self._window.requests,
            window_error_rate=self._window.error_rate(),
            consecutive_failures=self._consecutive,
            reopens_at=self._reopens_at if self.state is BreakerState.OPEN else None,
            ramp_step=self._step if self.state is BreakerState.HALF_OPEN else None,
        )

    @property
    def ramp_fraction(self) -> float:
        """Share of the offered traffic this deployment takes now."""
        if self.state is BreakerState.CLOSED:
            return 1.0
        if self.state is BreakerState.OPEN:
            return 0.0
        return self.settings.ramp[self._step]

    # Transitions -----------------------------------------------------------------------------------------

    def _maybe_step_up(self, now: float) -> BreakerTransition | None:
        """Called on a success; the step has had no failure (one would have reopened the breaker)."""
        settings = self.settings
        needed = min(settings.ramp_min_requests, self._step_admitted)
        if now - self._step_started < settings.ramp_step_s or self._step_attempts < needed:
            return None
        next_step = self._step + 1
        if next_step >= len(settings.ramp) - 1:
            return self._close(now)
        self._start_step(next_step, now)
        return None

    def _start_step(self, step: int, now: float) -> None:
        self._step = step
        self._step_started = now
        self._step_attempts = 0
        self._step_admitted = 0
        self._step_due = False
        self._offered = 0
        self._admitted = 0

    def _open(self, now: float, reason: TripReason) -> BreakerTransition:
        self._open_for = self.settings.open_s
        return self._enter_open(now, reason)

    def _reopen(self, now: float, reason: TripReason) -> BreakerTransition:
        self._open_for = min(self._open_for * 2, self.settings.open_s_max)
        return self._enter_open(now, reason)

    def _enter_open(self, now: float, reason: TripReason) -> BreakerTransition:
        self._reopens_at = now + self._open_for
        self._probing = False
        return self._move(BreakerState.OPEN, reason, now)

    def _close(self, now: float) -> BreakerTransition:
        self._open_for = self.settings.open_s
        self._consecutive = 0
        return self._move(BreakerState.CLOSED, TripReason.RAMP_COMPLETED, now)

    def _move(self, to_state: BreakerState, reason: TripReason, now: float) -> BreakerTransition:
        transition = BreakerTransition(
            deployment=self.deployment,
            from_state=self.state,
            to_state=to_state,
            reason=reason,
            at=now,
            window_requests=self._window.requests,
            window_error_rate=self._window.error_rate(),
            open_for_s=self._open_for if to_state is BreakerState.OPEN else None,
        )
        self.state = to_state
        if to_state is not BreakerState.HALF_OPEN:
            self._window = _Window(self.settings.window_s)
        return transition
