"""Local view of provisioned capacity: a token bucket refilled at the bought tokens/minute plus an in-flight cap.

The router reserves an estimate before a call and settles it with the usage the provider reports, so a PT
deployment is skipped (spilled to OD) before the provider has to answer 429.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from libs.api.router_policy.policy import Capacity


def estimate_tokens(prompt_chars: int, max_tokens: int) -> int:
    """Tokens to reserve for one call: input at ~4 characters per token, output at its maximum."""
    return -(-prompt_chars // 4) + max_tokens


class TokenSource(Protocol):
    """Where a budget or a PT tracker takes its tokens: a local bucket, or a lease of a fleet's ledger."""

    def try_take(self, tokens: float, now: float) -> bool: ...

    def adjust(self, tokens: float, now: float) -> None: ...

    def seconds_until(self, tokens: float, now: float) -> float: ...

    def empty(self, now: float) -> None: ...

    def level_at(self, now: float) -> float: ...

    def could_grant(self, tokens: float) -> bool: ...

    @property
    def fleet_size(self) -> int:
        """How many processes share the source (1 for a local bucket)."""
        ...


class TokenBucket:
    """Tokens refill continuously at `tokens_per_minute / 60` per second, up to one minute's worth."""

    __slots__ = ("capacity", "level", "rate_per_s", "updated_at")

    fleet_size = 1

    def __init__(self, tokens_per_minute: float, now: float) -> None:
        self.capacity = float(tokens_per_minute)
        self.rate_per_s = tokens_per_minute / 60.0
        self.level = self.capacity
        self.updated_at = now

    def refill(self, now: float) -> None:
        """Add what accrued since the last update."""
        elapsed = now - self.updated_at
        if elapsed > 0:
            self.level = min(self.capacity, self.level + elapsed * self.rate_per_s)
            self.updated_at = now

    def try_take(self, tokens: float, now: float) -> bool:
        """Take `tokens` if the bucket holds them."""
        self.refill(now)
        if self.level < tokens:
            return False
        self.level -= tokens
        return True

    def adjust(self, tokens: float, now: float) -> None:
        """Give back (positive) or charge extra (negative, may go below zero) after the real usage is known."""
        self.refill(now)
        self.level = min(self.capacity, self.level + tokens)

    def seconds_until(self, tokens: float, now: float) -> float:
        """How long until `tokens` are available (0 if they are now)."""
        self.refill(now)
        missing = tokens - self.level
        return 0.0 if missing <= 0 else missing / self.rate_per_s

    def empty(self, now: float) -> None:
        """Drop to zero: the provider said the capacity is gone, so believe it until the bucket refills."""
        self.refill(now)
        self.level = min(self.level, 0.0)

    def level_at(self, now: float) -> float:
        """The tokens available at `now`."""
        self.refill(now)
        return self.level

    def could_grant(self, tokens: float) -> bool:
        """A local bucket has no one to ask for more."""
        return False


@dataclass(slots=True)
class Reservation:
    """Tokens and one in-flight slot held on a tracker for one call; settle or cancel it exactly once."""

    tracker: CapacityTracker
    tokens: int
    open: bool = True

    def settle(self, used_tokens: int, now: float) -> None:
        """The call completed: correct the estimate with the real usage and free the slot."""
        if self.open:
            self.open = False
            self.tracker.finish(self.tokens - used_tokens, now)

    def cancel(self, now: float) -> None:
        """The call consumed nothing (error or cancelled): give everything back."""
        if self.open:
            self.open = False
            self.tracker.finish(self.tokens, now)


@dataclass(frozen=True, slots=True)
class CapacitySnapshot:
    """What a tracker holds at one instant."""

    tokens_available: float
    tokens_per_minute: int
    in_flight: int
    concurrency: int | None


class CapacityTracker:
    """The router's local estimate of one PT deployment's remaining capacity."""

    __slots__ = ("_bucket", "_capacity", "in_flight")

    def __init__(self, capacity: Capacity, now: float, tokens: TokenSource | None = None) -> None:
        self._capacity = capacity
        self._bucket = tokens if tokens is not None else TokenBucket(capacity.tokens_per_minute, now)
        self.in_flight = 0

    def try_reserve(self, estimate: int, now: float) -> Reservation | None:
        """Hold `estimate` tokens and one slot, or None when either is missing (the caller spills)."""
        limit = self.concurrency
        if limit is not None and self.in_flight >= limit:
            return None
        if not self._bucket.try_take(estimate, now):
            return None
        self.in_flight += 1
        return Reservation(self, estimate)

    @property
    def concurrency(self) -> int | None:
        """This process's share of the bought concurrency: split evenly among the processes leasing the
        deployment's capacity (at least one call each, so a fleet larger than the concurrency may exceed it)."""
        limit = self._capacity.concurrency
        if limit is None:
            return None
        return max(1, limit // max(self._bucket.fleet_size, 1))

    def finish(self, refund_tokens: int, now: float) -> None:
        """Free a slot and give back (or charge) the difference between reserved and used tokens."""
        self.in_flight -= 1
        if refund_tokens:
            self._bucket.adjust(refund_tokens, now)

    def mark_exhausted(self, now: float) -> None:
        """The provider answered 429 on PT: stop sending there until the bucket has refilled."""
        self._bucket.empty(now)

    def snapshot(self, now: float) -> CapacitySnapshot:
        """The tracker's state, for dashboards and tests."""
        return CapacitySnapshot(
            tokens_available=self._bucket.level_at(now),
            tokens_per_minute=self._capacity.tokens_per_minute,
            in_flight=self.in_flight,
            concurrency=self.concurrency,
        )


class Allowance:
    """A feature's tokens-per-minute allowance; callers beyond it are told when to come back."""

    __slots__ = ("_bucket",)

    def __init__(self, tokens_per_minute: int, now: float, tokens: TokenSource | None = None) -> None:
        self._bucket = tokens if tokens is not None else TokenBucket(tokens_per_minute, now)

    def try_spend(self, tokens: int, now: float) -> float:
        """Spend `tokens`; returns 0.0 when allowed, else the seconds to wait (Retry-After)."""
        if self._bucket.try_take(tokens, now):
            return 0.0
        return max(self._bucket.seconds_until(tokens, now), 0.001)

    def could_grant(self, tokens: int) -> bool:
        """Whether a refusal was only this process's share running short (a fleet's ledger has room)."""
        return self._bucket.could_grant(tokens)

    def correct(self, estimated: int, used: int, now: float) -> None:
        """Replace the estimate with the real usage."""
        self._bucket.adjust(estimated - used, now)
