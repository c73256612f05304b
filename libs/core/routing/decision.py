"""The routing decision for one request: feature -> weighted route -> ordered candidate deployments -> the next
deployment to dispatch to, given breaker, capacity and evidence (docs/router.md).

Within a chain, the deployments of one model and tier are equivalent: the request goes to the better of two of
them by evidence (power of two choices, libs.core.routing.evidence), the two drawn by a hash of the request
id, so a request's order is a function of its id and the evidence. Tiers keep their order (PT before OD) and
models the feature's.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from libs.api.router_policy.policy import Deployment, Feature, LatencyClass, RoutingPolicy, Tier
from libs.core.routing.breaker import BreakerState, CircuitBreaker
from libs.core.routing.capacity import CapacityTracker, Reservation
from libs.core.routing.evidence import DeploymentEvidence
from libs.core.routing.ledger import LeaseBook, LedgerKind
from libs.core.routing.reasons import REASON_TRAITS, FailureReason


@dataclass(frozen=True, slots=True)
class Candidate:
    """A deployment in a request's ordered chain, with the model name that put it there."""

    model: str
    name: str
    deployment: Deployment

    @property
    def provisioned(self) -> bool:
        return self.deployment.tier is Tier.PROVISIONED


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """The chain chosen for one request: which A/B route, and its candidates in dispatch order."""

    feature_name: str
    feature: Feature
    route_index: int
    candidates: tuple[Candidate, ...]


class SkipReason(StrEnum):
    """Why a candidate was passed over without a call."""

    BREAKER_OPEN = "breaker_open"
    PT_CAPACITY = "pt_capacity"


class SpilloverReason(StrEnum):
    """Why traffic left a PT deployment for on-demand."""

    PT_CAPACITY = "pt_capacity"
    PT_BREAKER_OPEN = "pt_breaker_open"
    PT_EXHAUSTED = "pt_exhausted"
    NOT_READY = "not_ready"
    QUOTA = "quota"


@dataclass(frozen=True, slots=True)
class Skip:
    """A candidate passed over, kept so that a result can answer "why did it fall back?"."""

    deployment: str
    reason: SkipReason


@dataclass(frozen=True, slots=True)
class SpilloverDecision:
    """PT -> OD: the request went to `to_deployment` because `from_deployment` had no room or said so."""

    model: str
    from_deployment: str
    to_deployment: str
    reason: SpilloverReason


@dataclass(frozen=True, slots=True)
class FailoverDecision:
    """A move that is not a spillover: the request left `from_deployment` (an attempt there failed, or its
    breaker or capacity refused it) for `to_deployment`."""

    from_deployment: str
    to_deployment: str
    reason: FailureReason | SkipReason


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Where to send the next attempt, and how the request got there."""

    candidate: Candidate
    reservation: Reservation | None
    spillover: SpilloverDecision | None
    failover: FailoverDecision | None


class DeploymentHealth:
    """Runtime state of one deployment: its breaker, what the router has seen of it and, for PT, its capacity
    tracker; and what it was built for (the deployment and its provider), which a reload compares."""

    __slots__ = ("breaker", "deployment", "evidence", "provider", "tracker")

    def __init__(
        self,
        name: str,
        deployment: Deployment,
        policy: RoutingPolicy,
        now: float,
        book: LeaseBook | None = None,
    ) -> None:
        self.deployment = deployment
        self.provider = policy.providers[deployment.provider]
        self.breaker = CircuitBreaker(name, policy.breaker, now)
        self.evidence = DeploymentEvidence()
        capacity = deployment.capacity if deployment.tier is Tier.PROVISIONED else None
        self.tracker = None
        if capacity is not None:
            tokens = book.lease(LedgerKind.PT, name, capacity.tokens_per_minute, now) if book else None
            self.tracker = CapacityTracker(capacity, now, tokens)


def build_health(
    policy: RoutingPolicy,
    previous: Mapping[str, DeploymentHealth],
    now: float,
    book: LeaseBook | None = None,
) -> dict[str, DeploymentHealth]:
    """Health state for a (new) policy; unchanged deployments keep their breaker and tracker across a reload (a
    deployment whose provider now points elsewhere is not unchanged: its history was another endpoint's).
    With a lease book, PT capacity is leased from the fleet's ledger instead of a local bucket."""
    health: dict[str, DeploymentHealth] = {}
    for name, deployment in policy.deployments.items():
        kept = previous.get(name)
        if (
            kept is not None
            and kept.deployment == deployment
            and kept.provider == policy.providers[deployment.provider]
            and kept.breaker.settings == policy.breaker
        ):
            health[name] = kept
        else:
            health[name] = DeploymentHealth(name, deployment, policy, now, book)
    return health


EXPLORE_ONE_IN = 32
"""One request in this many (by its id) goes to the worse of its two draws, so that a deployment the evidence
left behind is measured again and traffic returns to it once it has recovered."""

Group = tuple[int, int]
"""A run [start, end) of equivalent candidates in a chain: one model's deployments of one tier."""
MAX_PAIR_GROUPS = 4
"""Up to this many groups of two per chain, every order is built once (2^groups chains), not per request."""


class RoutingTable:
    """A policy compiled for O(1) decisions: per feature, cumulative route weights, candidate chains and each
    chain's groups of equivalent deployments."""

    def __init__(self, policy: RoutingPolicy) -> None:
        self.policy = policy
        self._routes: dict[
            str, tuple[tuple[float, ...], tuple[tuple[Candidate, ...], ...], tuple[tuple[Group, ...], ...]]
        ] = {}
        self._pair_orders: dict[str, tuple[tuple[tuple[Candidate, ...], ...], ...]] = {}
        for name, feature in policy.features.items():
            cumulative: list[float] = []
            total = 0.0
            for route in feature.routes:
                total += route.weight
                cumulative.append(total)
            chains = tuple(candidate_chain(policy, feature, index) for index in range(len(feature.routes)))
            groups = tuple(equivalent_groups(c) for c in chains)
            self._routes[name] = (tuple(cumulative), chains, groups)
            self._pair_orders[name] = tuple(_pair_orders(c, g) for c, g in zip(chains, groups, strict=True))

    def plan(
        self,
        feature_name: str,
        request_id: str,
        health: Mapping[str, DeploymentHealth] | None = None,
        now: float = 0.0,
        winner: int | None = None,
    ) -> RoutePlan:
        """The route and chain for a request: the same request id always gets the same route (the `winner`
        once the feature's A/B split has concluded) and, with the same evidence in `health`, the same order;
        without `health`, the policy's order."""
        feature = self.policy.features[feature_name]
        cumulative, chains, groups = self._routes[feature_name]
        index = 0
        digest = -1
        if winner is not None:
            index = winner
        elif len(cumulative) > 1:
            digest = request_hash(request_id)
            point = digest / 2.0**64 * cumulative[-1]
            index = min(bisect.bisect_right(cumulative, point), len(cumulative) - 1)
        chain = chains[index]
        if health is not None and groups[index]:
            if digest < 0:
                digest = request_hash(request_id)
            pair_orders = self._pair_orders[feature_name][index]
            mask = 0
            for number, group in enumerate(groups[index]):
                bits = digest >> (24 * number % 48)
                if pair_orders:
                    first, _ = _draw(chain, group, bits, health, now)
                    if first is not chain[group[0]]:
                        mask |= 1 << number
                else:
                    chain = _order_group(chain, group, bits, health, now)
            if mask:
                chain = pair_orders[mask]
        return RoutePlan(feature_name, feature, index, chain)


def request_hash(request_id: str) -> int:
    """64 bits derived from the request id: the seeded, replayable chooser of A/B routes (its high bits) and of
    the two draws among equivalent deployments (its low bits)."""
    digest = hashlib.blake2b(request_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def equivalent_groups(chain: tuple[Candidate, ...]) -> tuple[Group, ...]:
    """The runs of two or more candidates of one model and tier in a chain (candidate_chain keeps them
    together)."""
    groups: list[Group] = []
    start = 0
    for end in range(1, len(chain) + 1):
        if end == len(chain) or not _equivalent(chain[start], chain[end]):
            if end - start > 1:
                groups.append((start, end))
            start = end
    return tuple(groups)


def _equivalent(first: Candidate, second: Candidate) -> bool:
    return first.model == second.model and first.deployment.tier is second.deployment.tier


def _pair_orders(
    chain: tuple[Candidate, ...], groups: tuple[Group, ...]
) -> tuple[tuple[Candidate, ...], ...]:
    """When every group of the chain has two candidates (and there are at most MAX_PAIR_GROUPS): the chain with
    each subset of its groups swapped, indexed by a bit mask (bit n: group n swapped). Otherwise none."""
    if len(groups) > MAX_PAIR_GROUPS or any(end - start != 2 for start, end in groups):
        return ()
    orders = []
    for mask in range(1 << len(groups)):
        order = list(chain)
        for number, (start, _) in enumerate(groups):
            if mask & (1 << number):
                order[start], order[start + 1] = order[start + 1], order[start]
        orders.append(tuple(order))
    return tuple(orders)


def _draw(
    chain: tuple[Candidate, ...], group: Group, bits: int, health: Mapping[str, DeploymentHealth], now: float
) -> tuple[Candidate, Candidate]:
    """The group's two candidates drawn by `bits`, the one to go first first: the lower score, except for one
    request in EXPLORE_ONE_IN, which goes to the other so that it is measured again."""
    start, end = group
    size = end - start
    first = bits % size
    second = (bits // size) % (size - 1)
    if second >= first:
        second += 1
    a, b = chain[start + first], chain[start + second]
    a_better = health[a.name].evidence.score(now) <= health[b.name].evidence.score(now)
    explore = (bits >> 16) % EXPLORE_ONE_IN == 0
    return (b, a) if a_better == explore else (a, b)


def _order_group(
    chain: tuple[Candidate, ...],
    group: Group,
    bits: int,
    health: Mapping[str, DeploymentHealth],
    now: float,
) -> tuple[Candidate, ...]:
    """The chain with the group's drawn pair first (see _draw); the rest of the group follows in the policy's
    order."""
    start, end = group
    a, b = _draw(chain, group, bits, health, now)
    if a is chain[start] and b is chain[start + 1]:
        return chain
    rest = tuple(c for c in chain[start:end] if c is not a and c is not b)
    return (*chain[:start], a, b, *rest, *chain[end:])


def candidate_chain(policy: RoutingPolicy, feature: Feature, route_index: int) -> tuple[Candidate, ...]:
    """Deployments in dispatch order: each model's PT before its OD; async features use OD only
    (a model without any OD deployment keeps its PT ones, so that it is still reachable)."""
    chain: list[Candidate] = []
    seen: set[str] = set()
    for model in feature.routes[route_index].models:
        names = sorted(policy.models[model], key=lambda n: policy.deployments[n].tier is not Tier.PROVISIONED)
        if feature.latency is LatencyClass.ASYNC:
            on_demand = [n for n in names if policy.deployments[n].tier is Tier.ON_DEMAND]
            names = on_demand or names
        for name in names:
            if name not in seen:
                seen.add(name)
                chain.append(Candidate(model, name, policy.deployments[name]))
    return tuple(chain)


class RouteWalk:
    """Walks a plan's candidates for one request: skips what breakers or capacity refuse, and labels each
    dispatch after the first. Each step is O(chain length), a small constant.

    A move is labelled from the candidate the request last left: the one whose attempt failed, or, before any
    attempt, the last one skipped. It is a spillover only from a PT deployment to the same model's on-demand
    one for a capacity reason (local capacity, an open PT breaker, or a failure whose traits say spill);
    every other move (another PT, another model, another cloud, a failure that is not about capacity) is a
    failover.

    A candidate whose half-open ramp held the request back is the last resort: when nothing else admits the
    request it goes there rather than being refused (the deployment answered its probe).
    """

    __slots__ = ("_estimate", "_health", "_held_back", "_left", "_plan", "_position", "probes_due", "skips")

    def __init__(self, plan: RoutePlan, health: Mapping[str, DeploymentHealth], estimate: int) -> None:
        self._plan = plan
        self._health = health
        self._estimate = estimate
        self._position = 0
        self._left: tuple[Candidate, FailureReason | SkipReason] | None = None
        self._held_back: list[Candidate] = []
        self.skips: list[Skip] = []
        self.probes_due: list[str] = []

    def next(self, now: float) -> Dispatch | None:
        """The next candidate that admits the request, with its capacity reserved; None when none is left."""
        candidates = self._plan.candidates
        while self._position < len(candidates):
            candidate = candidates[self._position]
            self._position += 1
            health = self._health[candidate.name]
            if not health.breaker.allows(now):
                if health.breaker.probe_due(now):
                    self.probes_due.append(candidate.name)
                if health.breaker.state is BreakerState.HALF_OPEN:
                    self._held_back.append(candidate)
                self._skip(candidate, SkipReason.BREAKER_OPEN)
                continue
            reservation = None
            if health.tracker is not None:
                reservation = health.tracker.try_reserve(self._estimate, now)
                if reservation is None:
                    self._skip(candidate, SkipReason.PT_CAPACITY)
                    continue
            return self._dispatch(candidate, reservation)
        return self._last_resort(now)

    def _last_resort(self, now: float) -> Dispatch | None:
        while self._held_back:
            candidate = self._held_back.pop(0)
            health = self._health[candidate.name]
            reservation = None
            if health.tracker is not None:
                reservation = health.tracker.try_reserve(self._estimate, now)
                if reservation is None:
                    continue
            if not health.breaker.admit_last_resort():
                if reservation is not None:
                    reservation.cancel(now)
                continue
            self.skips = [skip for skip in self.skips if skip.deployment != candidate.name]
            if self._left is None or isinstance(self._left[1], SkipReason):
                self._left = self._skipped_before(candidate)  # it moved only past those ahead of it
            return self._dispatch(candidate, reservation)
        return None

    def _skipped_before(self, target: Candidate) -> tuple[Candidate, SkipReason] | None:
        ahead = self._plan.candidates[: self._plan.candidates.index(target)]
        last = None
        for skip in self.skips:
            for candidate in ahead:
                if candidate.name == skip.deployment:
                    last = (candidate, skip.reason)
        return last

    def failed(self, candidate: Candidate, reason: FailureReason) -> None:
        """Tell the walk that the attempt at `candidate` failed, so the next dispatch is labelled."""
        self._left = (candidate, reason)

    def _skip(self, candidate: Candidate, reason: SkipReason) -> None:
        self.skips.append(Skip(candidate.name, reason))
        if self._left is None or isinstance(self._left[1], SkipReason):
            self._left = (candidate, reason)  # a failed attempt, if any, keeps naming the move

    def _dispatch(self, candidate: Candidate, reservation: Reservation | None) -> Dispatch:
        left, self._left = self._left, None
        if left is None:
            return Dispatch(candidate, reservation, None, None)
        source, reason = left
        spill = _spill_reason(source, reason, candidate)
        if spill is not None:
            spillover = SpilloverDecision(source.model, source.name, candidate.name, spill)
            return Dispatch(candidate, reservation, spillover, None)
        return Dispatch(candidate, reservation, None, FailoverDecision(source.name, candidate.name, reason))


_SKIP_SPILLS = {
    SkipReason.PT_CAPACITY: SpilloverReason.PT_CAPACITY,
    SkipReason.BREAKER_OPEN: SpilloverReason.PT_BREAKER_OPEN,
}


def _spill_reason(
    source: Candidate, reason: FailureReason | SkipReason, target: Candidate
) -> SpilloverReason | None:
    """Why leaving `source` for `target` is a spillover, or None when it is not one."""
    if not source.provisioned or target.provisioned or source.model != target.model:
        return None
    if isinstance(reason, SkipReason):
        return _SKIP_SPILLS[reason]
    return SpilloverReason(reason.value) if REASON_TRAITS[reason].spill else None
