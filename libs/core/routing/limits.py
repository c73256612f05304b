"""What a request may spend before it is routed: its feature's token budget, its API key's token budget and its
API key's request rate, each a per-minute allowance (local, or leased from the fleet's ledger).

A request is admitted only if every allowance takes it; a refusal gives back what the others took, and says
which allowance refused and when it will have room (a true Retry-After). A request whose estimate is above a
whole minute of a token budget could never be admitted: it is told so, with the field path, instead of 429s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from libs.api.router_policy.policy import RoutingPolicy
from libs.core.routing.capacity import Allowance
from libs.core.routing.ledger import LeaseBook, LedgerKind, ledger_key


class LimitKind(StrEnum):
    """Which allowance refused a request."""

    FEATURE_BUDGET = "feature_budget"
    KEY_BUDGET = "key_budget"
    KEY_RATE = "key_rate"


@dataclass(frozen=True, slots=True)
class Limit:
    """One allowance as the policy names it, for messages."""

    kind: LimitKind
    field_path: str
    per_minute: int
    unit: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """Over an allowance: retry after `retry_after_s`; `grantable` when only this process's lease was short."""

    limit: Limit
    retry_after_s: float
    grantable: bool

    @property
    def message(self) -> str:
        return f"over {self.limit.field_path} ({self.limit.per_minute} {self.limit.unit} per minute)"


@dataclass(frozen=True, slots=True)
class NeverFits:
    """The request's estimate is above a whole minute of a token budget."""

    limit: Limit
    estimate: int
    max_tokens: int

    @property
    def message(self) -> str:
        return (
            f"max_tokens: Invalid value: {self.max_tokens}: the request needs up to {self.estimate} tokens "
            f"(prompt characters / 4 + max_tokens), more than {self.limit.field_path} "
            f"({self.limit.per_minute} per minute), so it could never be admitted: lower max_tokens or shorten "
            "the prompt"
        )


class Charge:
    """The allowances one request was charged, settled exactly once with the tokens it used."""

    __slots__ = ("_budgets", "estimate", "settled")

    def __init__(self, budgets: tuple[Allowance, ...], estimate: int) -> None:
        self._budgets = budgets
        self.estimate = estimate
        self.settled = False

    def settle(self, used_tokens: int, now: float) -> None:
        """Replace the estimate with what the request used (0 when nothing was produced)."""
        if self.settled or not self._budgets:
            return  # NO_CHARGE, shared by every request under no budget, is never marked
        self.settled = True
        for budget in self._budgets:
            budget.correct(self.estimate, used_tokens, now)


NO_CHARGE = Charge((), 0)


class _Held:
    """An allowance with the limit it enforces."""

    __slots__ = ("allowance", "limit")

    def __init__(self, allowance: Allowance, limit: Limit) -> None:
        self.allowance = allowance
        self.limit = limit


class RequestLimits:
    """Every allowance of one policy. An allowance whose limit did not change survives a reload with what it
    has spent; with a lease book each is leased from the fleet."""

    def __init__(
        self, policy: RoutingPolicy, previous: RequestLimits | None, now: float, book: LeaseBook | None
    ) -> None:
        kept = previous._held if previous is not None else {}
        self._held: dict[tuple[LimitKind, str], _Held] = {}
        self.ledger_keys: set[str] = set()
        for name, feature in policy.features.items():
            if feature.budget is not None:
                limit = Limit(
                    LimitKind.FEATURE_BUDGET,
                    f"features.{name}.budget.tokens_per_minute",
                    feature.budget.tokens_per_minute,
                    "tokens",
                )
                self._add(kept, limit, name, LedgerKind.FEATURE, name, now, book)
        for key, spec in policy.api_keys.items():
            if spec.budget is not None:
                path = "api_keys.<key>.budget.tokens_per_minute"
                limit = Limit(LimitKind.KEY_BUDGET, path, spec.budget.tokens_per_minute, "tokens")
                self._add(kept, limit, key, LedgerKind.API_KEY, key, now, book)
            if spec.rate_limit is not None:
                path = "api_keys.<key>.rate_limit.requests_per_minute"
                limit = Limit(LimitKind.KEY_RATE, path, spec.rate_limit.requests_per_minute, "requests")
                self._add(kept, limit, key, LedgerKind.API_KEY, f"{key}/requests", now, book)

    def _add(
        self,
        kept: dict[tuple[LimitKind, str], _Held],
        limit: Limit,
        name: str,
        kind: LedgerKind,
        ledger_name: str,
        now: float,
        book: LeaseBook | None,
    ) -> None:
        previous = kept.get((limit.kind, name))
        if previous is not None and previous.limit == limit:
            held = previous
        else:
            leased = book.lease(kind, ledger_name, limit.per_minute, now) if book is not None else None
            held = _Held(Allowance(limit.per_minute, now, leased), limit)
        self._held[(limit.kind, name)] = held
        self.ledger_keys.add(ledger_key(kind, ledger_name))

    def charge(
        self, feature: str, api_key: str | None, estimate: int, max_tokens: int, now: float
    ) -> Charge | Refusal | NeverFits:
        """Charge a request to every allowance it falls under, or say why not. No allowance: NO_CHARGE."""
        # 1. The allowances that apply: the key's request rate, the key's tokens, the feature's tokens.
        rate = self._held.get((LimitKind.KEY_RATE, api_key)) if api_key is not None else None
        budgets = [self._held.get((LimitKind.FEATURE_BUDGET, feature))]
        if api_key is not None:
            budgets.insert(0, self._held.get((LimitKind.KEY_BUDGET, api_key)))
        token_budgets = [held for held in budgets if held is not None]
        if rate is None and not token_budgets:
            return NO_CHARGE
        # 2. A request above a whole minute of a budget could never fit.
        for held in token_budgets:
            if estimate > held.limit.per_minute:
                return NeverFits(held.limit, estimate, max_tokens)
        # 3. Take from each; on a refusal give back what the others took.
        taken: list[tuple[_Held, int]] = []
        for held, amount in [
            *([(rate, 1)] if rate is not None else []),
            *((h, estimate) for h in token_budgets),
        ]:
            wait_s = held.allowance.try_spend(amount, now)
            if wait_s:
                for earlier, spent in taken:
                    earlier.allowance.correct(spent, 0, now)
                return Refusal(held.limit, wait_s, held.allowance.could_grant(amount))
            taken.append((held, amount))
        return Charge(tuple(held.allowance for held in token_budgets), estimate)
