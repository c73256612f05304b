"""A budget shared by every router process: a ledger of one minute's tokens, leased out in grants.

The ledger (one record per budget, kept on the bus) is a token bucket whose tokens are either in its pool or
held by a process. Each process spends from what it holds with no round trip, and tops its holding up in the
background. The pool refills at `tokens_per_minute / 60` a second, but only up to a minute's budget less what
the processes hold, so the fleet never has more than one bucket's worth to spend: over any window of T seconds
the fleet spends at most `tokens_per_minute * (1 + T / 60)`, what one process with the whole budget would.
Processes overshoot only by the tokens their requests used beyond the estimate reserved, which they repay
from their next grant.

A holding lasts `lease_s`; the process stops spending it `margin_s` before (so clocks a little apart never
spend an expired grant), and the ledger drops an expired holding, so the pool refills into the room it
leaves: what a process that dies held comes back within `lease_s` plus the refill. A process that stops
returns what it did not spend at once.

Time is wall-clock seconds passed in by the caller (processes on several hosts share it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

# Shares of a small allowance (a few requests a minute) are fractions: their sums must not miss by a rounding.
ROUNDING = 1e-6
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_=-]+")


class LedgerKind(StrEnum):
    """What a fleet budget limits."""

    FEATURE = "feature"
    API_KEY = "key"
    PT = "pt"


def ledger_key(kind: LedgerKind, name: str) -> str:
    """The ledger record's key: the name when it is plain, else its digest; an API key is a secret, always
    digested."""
    if kind is not LedgerKind.API_KEY and _PLAIN_KEY.fullmatch(name):
        return f"{kind.value}.{name}"
    return f"{kind.value}.{hashlib.blake2b(name.encode(), digest_size=12).hexdigest()}"


@dataclass(frozen=True, slots=True)
class LeaseTerms:
    """How a process leases a budget: the share of a minute's budget it tries to hold, how long a grant
    lasts, how long before expiry it stops spending it, and how often it may ask for more."""

    share: float = 0.02
    lease_s: float = 10.0
    margin_s: float = 2.0
    refresh_s: float = 0.05


@dataclass(frozen=True, slots=True)
class Holding:
    """Tokens granted to one process and not known to be spent, until `expires_at`."""

    process: str
    tokens: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class LedgerState:
    """One budget's record on the bus: the pool, when it was last refilled, and who holds the rest."""

    tokens_per_minute: int
    pool: float
    updated_at: float
    holdings: tuple[Holding, ...] = ()

    def held(self) -> float:
        return sum(h.tokens for h in self.holdings)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "tokens_per_minute": self.tokens_per_minute,
                "pool": self.pool,
                "updated_at": self.updated_at,
                "holdings": [[h.process, h.tokens, h.expires_at] for h in self.holdings],
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LedgerState:
        raw: dict[str, Any] = json.loads(data)
        holdings = tuple(Holding(str(p), float(t), float(e)) for p, t, e in raw["holdings"])
        return cls(int(raw["tokens_per_minute"]), float(raw["pool"]), float(raw["updated_at"]), holdings)


@dataclass(frozen=True, slots=True)
class GrantRequest:
    """A process's report and ask: what it still holds unspent, what it spent beyond its holding (debt), and
    how many more tokens it wants (0 with `releasing` to give everything back)."""

    process: str
    unspent: float
    debt: float
    want: float
    releasing: bool = False


@dataclass(frozen=True, slots=True)
class Grant:
    """The ledger's answer: tokens added to the process's holding, until when, and what the pool has left."""

    tokens: float
    expires_at: float
    pool: float
    holders: int = 1
    """Processes holding a share after this settle, the asking one included (at least 1)."""


def settle(
    state: LedgerState | None, request: GrantRequest, *, tokens_per_minute: int, now: float, lease_s: float
) -> tuple[LedgerState, Grant]:
    """Apply one process's report and ask to the ledger; the new ledger and the process's grant.

    Invariant kept: pool + held <= tokens_per_minute after every settle (the pool may go negative by debts).
    """
    # 1. A new budget starts full; a changed one keeps its pool within the new minute.
    if state is None:
        state = LedgerState(tokens_per_minute, float(tokens_per_minute), now)
    # 2. Expired holdings are dropped, not pooled: their process may have spent them before they expired, so
    #    only the room they leave under the ceiling comes back, refilled at the budget's rate.
    live = tuple(h for h in state.holdings if h.expires_at > now)
    pool = state.pool
    # 3. The process's holding becomes what it says is unspent (never more than recorded); its debt is paid.
    mine = next((h for h in live if h.process == request.process), None)
    unspent = min(max(request.unspent, 0.0), mine.tokens if mine is not None else 0.0)
    others = tuple(h for h in live if h.process != request.process)
    pool -= request.debt
    if request.releasing:
        pool += unspent
        unspent = 0.0
    # 4. Refill for the time passed, up to a minute's budget less what is held.
    held = sum(h.tokens for h in others) + unspent
    ceiling = tokens_per_minute - held
    elapsed = max(now - state.updated_at, 0.0)
    pool = min(pool + elapsed * tokens_per_minute / 60.0, ceiling)
    # 5. Grant what is wanted from what the pool has.
    granted = 0.0 if request.releasing else min(max(request.want, 0.0), max(pool, 0.0))
    pool -= granted
    holdings = others
    if unspent + granted > 0:
        holdings = (*others, Holding(request.process, unspent + granted, now + lease_s))
    ledger = LedgerState(tokens_per_minute, pool, max(now, state.updated_at), holdings)
    return ledger, Grant(granted, now + lease_s, pool, max(len(holdings), 1))


class LeasedBudget:
    """This process's share of a fleet budget: spent with no round trip, topped up in the background.

    It is a TokenSource, standing where a local token bucket would, so a feature budget, an API key's budget or
    a PT deployment's capacity can be leased from the fleet.
    """

    __slots__ = (
        "_terms",
        "expires_at",
        "fleet_size",
        "held",
        "key",
        "on_low",
        "pool",
        "rate_per_s",
        "tokens_per_minute",
        "wanted",
    )

    def __init__(self, key: str, tokens_per_minute: int, terms: LeaseTerms, now: float) -> None:
        self.key = key
        self.tokens_per_minute = tokens_per_minute
        self.rate_per_s = tokens_per_minute / 60.0
        self._terms = terms
        self.held = 0.0
        self.expires_at = now
        self.pool = 0.0
        self.fleet_size = 1
        """Processes holding a share of the ledger at the last grant: a PT deployment's concurrency is split
        among them."""
        self.wanted = 0.0
        # Called when the holding runs low or a request was refused: a refresher waits for it, never polls.
        self.on_low: Callable[[], None] | None = None

    def level_at(self, now: float) -> float:
        """What this process may spend at `now`."""
        self._expire(now)
        return self.held

    @property
    def target(self) -> float:
        """How much this process tries to hold: its share of a minute, or the largest request refused."""
        return max(self.tokens_per_minute * self._terms.share, self.wanted)

    def try_take(self, tokens: float, now: float) -> bool:
        """Spend `tokens` from the holding, if it has them and has not expired."""
        self._expire(now)
        if self.held + ROUNDING < tokens:
            self.wanted = max(self.wanted, float(tokens))
            self._low()
            return False
        self.held -= tokens
        if self.held < self.target / 2:
            self._low()
        return True

    def adjust(self, tokens: float, now: float) -> None:
        """Give back (positive) or charge extra (negative, a debt repaid from the next grant)."""
        self.held += tokens

    def empty(self, now: float) -> None:
        """The provider said the capacity is gone: spend nothing of what is held."""
        self.held = min(self.held, 0.0)

    def seconds_until(self, tokens: float, now: float) -> float:
        """A fair Retry-After: the missing tokens at the fleet's refill rate, beyond the pool last seen."""
        self._expire(now)
        missing = tokens - max(self.held, 0.0) - max(self.pool, 0.0)
        return max(missing / self.rate_per_s, self._terms.refresh_s)

    def could_grant(self, tokens: float) -> bool:
        """Whether the ledger, as last seen, has room for what this holding lacks."""
        return tokens - max(self.held, 0.0) <= self.pool + ROUNDING

    def needs_grant(self, now: float) -> bool:
        """Whether to ask the ledger now: below half the target, a refusal waiting, or the lease ageing."""
        return self.held < self.target / 2 or now >= self.expires_at - self._terms.lease_s / 2

    def request(self, process: str, now: float) -> GrantRequest:
        """The report and ask to send; the debt moves to the ledger with it (`abandon` if it is not sent)."""
        self._expire(now)
        debt = max(-self.held, 0.0)
        self.held += debt
        return GrantRequest(process, self.held, debt, max(self.target - self.held, 0.0))

    def release(self, process: str, now: float) -> GrantRequest:
        """Give everything back (the process stops)."""
        request = replace(self.request(process, now), want=0.0, releasing=True)
        self.held = 0.0
        return request

    def abandon(self, request: GrantRequest) -> None:
        """The request never reached the ledger: keep the debt here."""
        self.held -= request.debt

    def apply(self, grant: Grant) -> None:
        """Add a grant to the holding; the whole holding now lasts until the grant expires (in this process's
        clock: the caller translates the ledger's)."""
        self.held += grant.tokens
        self.expires_at = grant.expires_at - self._terms.margin_s
        self.pool = grant.pool
        self.fleet_size = grant.holders
        if grant.tokens > 0:
            self.wanted = 0.0

    def _low(self) -> None:
        if self.on_low is not None:
            self.on_low()

    def _expire(self, now: float) -> None:
        if now >= self.expires_at and self.held > 0:
            self.held = 0.0


class LeaseBook:
    """Every lease this process holds, by ledger key; a lease whose budget did not change survives a reload."""

    def __init__(self, process: str, terms: LeaseTerms | None = None) -> None:
        self.process = process
        self.terms = terms or LeaseTerms()
        self.leases: dict[str, LeasedBudget] = {}
        self.retired: list[LeasedBudget] = []
        self.on_low: Callable[[], None] | None = None

    def lease(self, kind: LedgerKind, name: str, tokens_per_minute: int, now: float) -> LeasedBudget:
        """The lease of one budget, created empty (the first refresh fills it)."""
        key = ledger_key(kind, name)
        kept = self.leases.get(key)
        if kept is not None and kept.tokens_per_minute == tokens_per_minute:
            return kept
        lease = self.leases[key] = LeasedBudget(key, tokens_per_minute, self.terms, now)
        lease.on_low = self.on_low
        return lease

    def keep_only(self, keys: set[str]) -> None:
        """Retire the leases no policy uses any more: the refresher gives their tokens back."""
        for key in [key for key in self.leases if key not in keys]:
            self.retired.append(self.leases.pop(key))
