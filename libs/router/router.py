"""The in-process router: decides with libs.core.routing, calls providers, fails over within the deadline.

One request: (1) resolve the feature's route and candidates (the A/B route by request id, or the winner of a
concluded experiment; equivalent deployments ordered by evidence), (2) charge the feature's and the API key's
budgets and the key's request rate, (3) dispatch to the next admitted candidate with a first-byte timeout, (4)
on a retryable failure before the first byte record it and dispatch the next candidate at once (no sleep, no
backoff), (5) on success settle capacity, breaker, evidence and scoreboard and emit `inference.completed`.
Decisions use the injected clock; latency figures use the performance counter.

The first byte is the first text the provider streams. For a feature with a first-byte timeout, a whole
(non-streamed) answer is asked for as a stream too (ConverseStream, streamGenerateContent) and assembled here:
Converse and generateContent send nothing until the whole answer is written, so their first byte would be the
last, and a first-byte timeout would cut slow but healthy answers. Without a first-byte timeout there is
nothing to time, and the whole call (one answer to parse instead of a frame per token) is cheaper. The first-byte timeout bounds one attempt up to its first text; after it, only the
request's deadline bounds the answer and there is no failover (the provider is already billing it), and a
deadline passing after the first byte is not held against the deployment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from libs.core.routing import (
    REASON_TRAITS,
    BreakerSnapshot,
    BreakerTransition,
    CapacitySnapshot,
    Charge,
    DeploymentHealth,
    Dispatch,
    FailureReason,
    LeaseBook,
    LedgerKind,
    NeverFits,
    ProviderKind,
    ProviderSpec,
    Refusal,
    RequestLimits,
    RoutePlan,
    RouteWalk,
    RoutingPolicy,
    RoutingTable,
    Scoreboard,
    SkipReason,
    SpilloverDecision,
    build_health,
    changed_providers,
    edit_warnings,
    estimate_tokens,
    ledger_key,
)
from libs.core.routing.evidence import EvidenceSnapshot
from libs.core.routing.experiment import ExperimentConclusion, FeatureExperiment, FleetExperiments, Tally
from libs.events.catalogue import EventType
from libs.providers import Chunk, Completion, Message, Provider, ProviderError, ProviderRequest, Usage
from libs.router.clock import RouterClock, SystemClock
from libs.router.contracts import (
    Attempt,
    InferRequest,
    InferResult,
    StreamCompleted,
    StreamEvent,
    TextDelta,
)
from libs.router.errors import (
    BudgetExceeded,
    BudgetNeverFits,
    DeadlineExceeded,
    MidStreamFailure,
    NoDeploymentAvailable,
    RequestRejected,
    RoutingError,
    UnknownFeature,
)
from libs.router.events import EventBuffer, EventSink, RouterEvent, breaker_event

log = logging.getLogger(__name__)

PROBE_MESSAGES = (Message("user", "ping"),)

MAX_UNSHARED_OUTCOMES = 10_000
AttemptOutcome = tuple[str, float | None]
"""One attempt as a breaker heard it: the deployment, and the first-byte seconds of a success (None: a failure
that counts against it)."""
DEFAULT_PROBE_TIMEOUT_S = 5.0
GRANT_WAIT_S = 0.25
CLIENT_DISCONNECTED = "client_disconnected"


class _Generation:
    """One policy compiled with its runtime state; a reload swaps the whole object in one assignment."""

    __slots__ = ("experiments", "health", "limits", "policy", "probe_timeout_s", "providers", "table")

    def __init__(
        self,
        policy: RoutingPolicy,
        providers: Mapping[str, Provider],
        previous: _Generation | None,
        now: float,
        book: LeaseBook | None,
        fleet: FleetExperiments,
    ) -> None:
        self.policy = policy
        self.providers = providers
        self.table = RoutingTable(policy)
        self.health: dict[str, DeploymentHealth] = build_health(
            policy, previous.health if previous else {}, now, book
        )
        self.limits: RequestLimits = RequestLimits(policy, previous.limits if previous else None, now, book)
        self.experiments: dict[str, FeatureExperiment] = fleet.build(policy.features)
        if book is not None:
            book.keep_only(self.limits.ledger_keys | _pt_ledger_keys(policy))
        timeouts = [f.first_byte_timeout_ms for f in policy.features.values() if f.first_byte_timeout_ms]
        self.probe_timeout_s = max(timeouts) / 1000.0 if timeouts else DEFAULT_PROBE_TIMEOUT_S


def _pt_ledger_keys(policy: RoutingPolicy) -> set[str]:
    return {ledger_key(LedgerKind.PT, n) for n, d in policy.deployments.items() if d.capacity is not None}


@dataclass(slots=True)
class _Call:
    """The state of one request while it is being routed."""

    request: InferRequest
    generation: _Generation
    plan: RoutePlan
    walk: RouteWalk
    charge: Charge
    started: float
    deadline_at: float
    first_byte_timeout_s: float | None
    provider_s: float = 0.0
    caller_s: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)
    spillovers: list[SpilloverDecision] = field(default_factory=list)
    failed_at: float | None = None
    last_failure: ProviderError | None = None
    in_flight: DeploymentHealth | None = None
    """The deployment an attempt is under way at, counted in its evidence until the attempt ends."""
    whole: bool = False
    """The caller waits for the whole answer (infer), not for a stream."""


class Router:
    """Routes inference requests across deployments per the policy; see the module docstring."""

    def __init__(
        self,
        policy: RoutingPolicy,
        providers: Mapping[str, Provider],
        clock: RouterClock | None = None,
        event_sink: EventSink | None = None,
        leases: LeaseBook | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._emit: EventSink = event_sink if event_sink is not None else EventBuffer()
        _check_providers(policy, providers)
        # With a lease book, budgets and PT capacity are the fleet's, leased (a refresher keeps them topped up).
        self.leases = leases
        # Set by whoever refreshes the leases: one refresh pass, awaited by a request its lease was short for.
        self.await_grant: Callable[[], Awaitable[None]] | None = None
        self._fleet = FleetExperiments()
        self._generation = _Generation(policy, dict(providers), None, self._clock.now(), leases, self._fleet)
        self._probes: set[asyncio.Task[None]] = set()
        self.scoreboard = Scoreboard()
        # Bounded: a router nobody drains (a library user with one process) keeps only the latest.
        self._outcomes: deque[AttemptOutcome] = deque(maxlen=MAX_UNSHARED_OUTCOMES)
        # Called when an outcome arrives with none waiting to be drained: a sharer waits for it, never polls.
        self.on_outcome: Callable[[], None] | None = None
        # Set by whoever stores conclusions for the fleet (it audits the one stored first); without it, this
        # router audits its own conclusions at once.
        self.on_conclusion: Callable[[ExperimentConclusion], None] | None = None

    @property
    def policy(self) -> RoutingPolicy:
        """The policy in force."""
        return self._generation.policy

    # Public API ------------------------------------------------------------------------------------------

    async def infer(self, request: InferRequest) -> InferResult:
        """Answer a request whole, failing over across deployments, models and clouds before the first byte
        and within its deadline. With a first-byte timeout the provider streams it (see the module): the same
        tokens, billed the same; without one, one whole call (one answer to parse) bounded by the deadline. A
        caller that goes away (the task is cancelled) ends it as `client_disconnected`, charged what was
        produced."""
        call = await self._begin_granted(request)
        if call.first_byte_timeout_s is None:
            return await self._whole(call)
        call.whole = True
        events = self._answer(request, call)
        try:
            async for event in events:
                if isinstance(event, StreamCompleted):
                    return event.result
        finally:
            await _close(events)
        raise AssertionError("a stream always ends with StreamCompleted or an error")

    async def _whole(self, call: _Call) -> InferResult:
        while True:
            dispatch = self._next_dispatch(call)
            provider_request = _provider_request(call, dispatch)
            provider = call.generation.providers[dispatch.candidate.deployment.provider]
            timeout_s, by_deadline = self._attempt_timeout(call)
            sent = time.perf_counter()
            try:
                async with asyncio.timeout(timeout_s):
                    completion = await provider.complete(provider_request)
            except asyncio.CancelledError:
                self._abandon(call, dispatch)
                raise
            except Exception as exc:  # every provider failure is normalised, so a bug still fails over
                call.provider_s += time.perf_counter() - sent
                self._attempt_failed(call, dispatch, exc, sent, by_deadline)
                continue
            call.provider_s += time.perf_counter() - sent
            return self._succeed(call, dispatch, completion, sent, completion.first_byte_s)

    def stream(self, request: InferRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream an answer: TextDelta events, then exactly one StreamCompleted. Failover happens only before
        the first text reaches the caller; a later failure raises MidStreamFailure. A caller that leaves
        (closes the generator or is cancelled) ends it as `client_disconnected`, charged what was streamed."""
        return self._answer(request, None)

    async def _answer(self, request: InferRequest, call: _Call | None) -> AsyncGenerator[StreamEvent, None]:
        """The stream of `request`, begun here unless `call` already began it."""
        if call is None:
            call = await self._begin_granted(request)
        while True:
            dispatch = self._next_dispatch(call)
            provider = call.generation.providers[dispatch.candidate.deployment.provider]
            chunks = provider.stream(_provider_request(call, dispatch))
            timeout_s, by_deadline = self._attempt_timeout(call)
            sent = time.perf_counter()
            try:
                async with asyncio.timeout(timeout_s):
                    first = await anext(chunks)
            except asyncio.CancelledError:
                self._abandon(call, dispatch)
                await _close(chunks)
                raise
            except Exception as exc:  # every provider failure is normalised, so a bug still fails over
                call.provider_s += time.perf_counter() - sent
                await _close(chunks)
                self._attempt_failed(call, dispatch, exc, sent, by_deadline)
                continue
            call.provider_s += time.perf_counter() - sent
            break
        first_byte_s = time.perf_counter() - sent
        relay = self._relay(call, dispatch, chunks, first, sent, first_byte_s)
        try:
            async for event in relay:
                yield event
        finally:
            await _close(relay)  # a caller leaving early must release capacity and the provider stream now

    def reload(self, policy: RoutingPolicy, providers: Mapping[str, Provider] | None = None) -> None:
        """Swap in a new policy atomically, with `providers` (those in use when not given). Requests in flight
        finish on the old one; deployments whose definition, provider and breaker settings are unchanged keep
        their breaker and capacity state. What the edit may not have meant (every API key gone, a provider
        changed but its client not reopened) is logged and audited as warnings."""
        previous = self._generation
        providers = dict(providers) if providers is not None else previous.providers
        _check_providers(policy, providers)
        self._generation = _Generation(
            policy, providers, previous, self._clock.now(), self.leases, self._fleet
        )
        kept = sorted(n for n, h in self._generation.health.items() if previous.health.get(n) is h)
        warnings = edit_warnings(previous.policy, policy)
        reopened = []
        for name in changed_providers(previous.policy, policy):
            if providers[name] is not previous.providers.get(name):
                reopened.append(name)
            else:
                where = _address(previous.policy.providers[name])
                warnings.append(
                    f"providers.{name}: changed, but its client was not reopened: calls still go to {where}"
                )
        for warning in warnings:
            log.warning("policy reloaded, but %s", warning)
        self._emit(
            RouterEvent(
                EventType.ROUTER_POLICY_RELOADED,
                "policy",
                self._clock.wall(),
                {
                    "deployments": sorted(policy.deployments),
                    "kept_state": kept,
                    "features": sorted(policy.features),
                    "reopened_providers": reopened,
                    "warnings": warnings,
                },
            )
        )

    def record_feedback(self, feature: str, model: str, score: float) -> None:
        """A quality score for an answer: feeds the scoreboard and, when the feature runs an experiment, its
        test; the score that concludes the test is audited (`router.experiment.concluded`)."""
        self.scoreboard.record_feedback(feature, model, score)
        experiment = self._generation.experiments.get(feature)
        if experiment is not None:
            self._concluded(experiment.record(model, score))

    def record_peer_tally(self, key: str, instance: str, tally: Tally) -> None:
        """Another process's latest tally of experiment `key` (its own feedback scores, per arm)."""
        self._concluded(self._fleet.merge_peer(key, instance, tally))

    def resume_tally(self, key: str, tally: Tally) -> None:
        """What this process had counted for experiment `key` before it restarted."""
        self._fleet.resume(key, tally)

    def adopt_conclusion(self, key: str, winner: int) -> None:
        """The fleet's conclusion of experiment `key`: all its feature's traffic goes to route `winner`."""
        self._fleet.adopt(key, winner)

    def experiments(self) -> list[FeatureExperiment]:
        """The experiments in force (one per feature that runs one)."""
        return list(self._generation.experiments.values())

    def audit_conclusion(self, conclusion: ExperimentConclusion) -> None:
        """Audit a conclusion (`router.experiment.concluded`): the one the fleet stored."""
        self._emit(_concluded_event(conclusion, self._clock.wall()))

    def _concluded(self, conclusion: ExperimentConclusion | None) -> None:
        if conclusion is None:
            return
        if self.on_conclusion is not None:
            self.on_conclusion(conclusion)
        else:
            self.audit_conclusion(conclusion)

    def experiment_winners(self) -> dict[str, int]:
        """The route every request of a feature goes to, for features whose experiment concluded."""
        return {n: e.winner for n, e in self._generation.experiments.items() if e.winner is not None}

    def evidence(self) -> dict[str, EvidenceSnapshot]:
        """What this router has seen of every deployment, as its decisions weigh it now."""
        now = self._clock.now()
        return {name: h.evidence.snapshot(name, now) for name, h in self._generation.health.items()}

    def drain_outcomes(self) -> list[AttemptOutcome]:
        """The attempt outcomes this router's breakers heard since the last call, for its peers."""
        outcomes = list(self._outcomes)
        self._outcomes.clear()
        return outcomes

    def _record_outcome(self, deployment: str, first_byte_s: float | None) -> None:
        if not self._outcomes and self.on_outcome is not None:
            self.on_outcome()
        self._outcomes.append((deployment, first_byte_s))

    def record_peer_outcomes(self, outcomes: Iterable[AttemptOutcome]) -> None:
        """Feed the breakers and the evidence with attempts another process of the same front made (its
        `drain_outcomes`), so that every process sees the whole traffic's health and speed. Deployments this
        policy does not have are skipped."""
        now = self._clock.now()
        health = self._generation.health
        for deployment, first_byte_s in outcomes:
            entry = health.get(deployment)
            if entry is None:
                continue
            if first_byte_s is None:
                self._transition(entry.breaker.record_failure(now))
                entry.evidence.record_fault(now, throttled=False)
            else:
                self._transition(entry.breaker.record_peer_success(first_byte_s, now))
                entry.evidence.record_success(now, first_byte_ms=first_byte_s * 1000.0)

    def breakers(self) -> dict[str, BreakerSnapshot]:
        """The breaker of every deployment."""
        now = self._clock.now()
        return {name: h.breaker.snapshot(now) for name, h in self._generation.health.items()}

    def capacity(self) -> dict[str, CapacitySnapshot]:
        """The capacity tracker of every PT deployment."""
        now = self._clock.now()
        return {
            n: h.tracker.snapshot(now) for n, h in self._generation.health.items() if h.tracker is not None
        }

    async def wait_for_probes(self) -> None:
        """Wait until the breaker probes in flight have finished (tests, shutdown)."""
        while self._probes:
            await asyncio.gather(*self._probes, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel probes in flight. Providers belong to the caller, who closes them."""
        for task in list(self._probes):
            task.cancel()
        await self.wait_for_probes()

    # One request -----------------------------------------------------------------------------------------

    async def _begin_granted(self, request: InferRequest) -> _Call:
        """Begin, waiting for one grant when only this process's lease was short: the one request-path round
        trip, for a request larger than what a process holds while the fleet has room."""
        try:
            return self._begin(request)
        except BudgetExceeded as refused:
            if not refused.grantable or self.await_grant is None:
                raise
            try:
                async with asyncio.timeout(GRANT_WAIT_S):
                    await self.await_grant()
            except TimeoutError:
                raise refused from None
            except asyncio.CancelledError:
                self._emit(
                    _disconnected_event(request, (), 0, "while waiting for a budget grant", self._clock)
                )
                raise
        return self._begin(request)

    def _begin(self, request: InferRequest) -> _Call:
        started = time.perf_counter()
        generation = self._generation
        feature = generation.policy.features.get(request.feature)
        if feature is None:
            raise UnknownFeature(f"unknown feature {request.feature!r}")
        estimate = estimate_tokens(request.prompt_chars, request.max_tokens)
        charge = generation.limits.charge(
            request.feature, request.api_key, estimate, request.max_tokens, self._clock.now()
        )
        if isinstance(charge, NeverFits):
            raise BudgetNeverFits(charge.message)
        if isinstance(charge, Refusal):
            raise BudgetExceeded(charge.message, charge.retry_after_s, grantable=charge.grantable)
        experiment = generation.experiments.get(request.feature)
        winner = experiment.winner if experiment is not None else None
        plan = generation.table.plan(
            request.feature, request.request_id, generation.health, self._clock.now(), winner
        )
        deadline_ms = min(feature.deadline_ms, request.deadline_ms or feature.deadline_ms)
        first_byte = feature.first_byte_timeout_ms / 1000.0 if feature.first_byte_timeout_ms else None
        walk = RouteWalk(plan, generation.health, estimate)
        return _Call(
            request, generation, plan, walk, charge, started, started + deadline_ms / 1000.0, first_byte
        )

    def _next_dispatch(self, call: _Call) -> Dispatch:
        now = self._clock.now()
        if time.perf_counter() >= call.deadline_at:
            self._fail_request(
                call, DeadlineExceeded("deadline passed before an answer", tuple(call.attempts))
            )
        dispatch = call.walk.next(now)
        if call.walk.probes_due:
            for name in call.walk.probes_due:
                self._start_probe(call.generation, name)
            call.walk.probes_due.clear()
        if dispatch is None:
            last = call.last_failure
            detail = f"; last failure {last.reason.value}: {last}" if last is not None else ""
            detail += _refusals(call, now)
            self._fail_request(
                call, NoDeploymentAvailable(f"no deployment could answer{detail}", tuple(call.attempts))
            )
        self._announce_move(call, dispatch)
        call.in_flight = call.generation.health[dispatch.candidate.name]
        call.in_flight.evidence.started()
        return dispatch

    @staticmethod
    def _attempt_ended(call: _Call) -> None:
        if call.in_flight is not None:
            call.in_flight.evidence.ended()
            call.in_flight = None

    def _attempt_timeout(self, call: _Call) -> tuple[float, bool]:
        """Seconds this attempt may wait for its first byte, and whether the deadline (not the SLO) set it."""
        remaining = call.deadline_at - time.perf_counter()
        if call.first_byte_timeout_s is not None and call.first_byte_timeout_s <= remaining:
            return call.first_byte_timeout_s, False
        return max(remaining, 0.0), True

    def _announce_move(self, call: _Call, dispatch: Dispatch) -> None:
        if dispatch.spillover is None and dispatch.failover is None:
            return
        gap_ms = (time.perf_counter() - call.failed_at) * 1000.0 if call.failed_at is not None else None
        elapsed_ms = (time.perf_counter() - call.started) * 1000.0
        payload: dict[str, object] = {"request_id": call.request.request_id, "feature": call.request.feature}
        if dispatch.spillover is not None:
            spill = dispatch.spillover
            call.spillovers.append(spill)
            event_type = EventType.ROUTER_SPILLOVER
            payload |= {
                "model": spill.model,
                "from_deployment": spill.from_deployment,
                "to_deployment": spill.to_deployment,
                "reason": spill.reason.value,
            }
        else:
            assert dispatch.failover is not None
            event_type = EventType.ROUTER_FAILOVER
            breaker = call.generation.health[dispatch.failover.from_deployment].breaker
            payload |= {
                "from_deployment": dispatch.failover.from_deployment,
                "to_deployment": dispatch.failover.to_deployment,
                "reason": dispatch.failover.reason.value,
                "breaker_state": breaker.state.value,
            }
        failure = call.last_failure
        if failure is not None:
            payload |= {"code": failure.code, "status": failure.status}
        payload |= {
            "elapsed_ms": round(elapsed_ms, 3),
            "dispatch_ms": round(gap_ms, 3) if gap_ms is not None else None,
        }
        self._emit(RouterEvent(event_type, call.request.request_id, self._clock.wall(), payload))

    def _attempt_failed(
        self, call: _Call, dispatch: Dispatch, exc: Exception, sent: float, by_deadline: bool
    ) -> None:
        failed_at = time.perf_counter()
        error = _normalise(exc)
        # A timeout that the request's own deadline imposed says nothing about the deployment's health.
        judged = not (by_deadline and isinstance(exc, TimeoutError))
        now = self._clock.now()
        candidate = dispatch.candidate
        health = call.generation.health[candidate.name]
        self._attempt_ended(call)
        if dispatch.reservation is not None:
            dispatch.reservation.cancel(now)
        if error.reason is FailureReason.PT_EXHAUSTED and health.tracker is not None:
            health.tracker.mark_exhausted(now)
        traits = REASON_TRAITS[error.reason]
        if traits.counts_against_breaker and judged:
            # Only ill health counts against the deployment and the model: not PT capacity, quota or the caller.
            self._transition(health.breaker.record_failure(now))
            self._record_outcome(candidate.name, None)
            self.scoreboard.record_failure(call.request.feature, candidate.model)
            waited_ms = (failed_at - sent) * 1000.0 if isinstance(exc, TimeoutError) else None
            health.evidence.record_fault(
                now, throttled=error.reason is FailureReason.THROTTLED, waited_ms=waited_ms
            )
        call.attempts.append(_attempt(call, dispatch, error, sent, failed_at, None))
        call.failed_at = failed_at
        call.last_failure = error
        if not traits.failover:
            self._fail_request(call, RequestRejected(str(error), tuple(call.attempts), error.status))
        call.walk.failed(candidate, error.reason)

    def _succeed(
        self, call: _Call, dispatch: Dispatch, completion: Completion, sent: float, first_byte_s: float
    ) -> InferResult:
        done = time.perf_counter()
        now = self._clock.now()
        candidate = dispatch.candidate
        usage = completion.usage
        health = call.generation.health[candidate.name]
        self._attempt_ended(call)
        if dispatch.reservation is not None:
            dispatch.reservation.settle(usage.total_tokens, now)
        call.charge.settle(usage.total_tokens, now)
        self._transition(health.breaker.record_success(first_byte_s, now))
        self._record_outcome(candidate.name, first_byte_s)
        call.attempts.append(_attempt(call, dispatch, None, sent, done, first_byte_s))
        latency_ms = (done - call.started) * 1000.0
        first_byte_ms = (sent - call.started + first_byte_s) * 1000.0
        cost = candidate.deployment.cost.of(usage.input_tokens, usage.output_tokens)
        _record_evidence(health, now, done - sent, first_byte_s, usage, cost)
        self.scoreboard.record_success(
            call.request.feature,
            candidate.model,
            latency_ms=latency_ms,
            first_byte_ms=first_byte_ms,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=cost,
        )
        added_ms = (done - call.started - call.provider_s - call.caller_s) * 1000.0
        result = InferResult(
            request_id=call.request.request_id,
            feature=call.request.feature,
            route_index=call.plan.route_index,
            text=completion.text,
            model=candidate.model,
            deployment=candidate.name,
            provider=candidate.deployment.provider,
            requested_tier=candidate.deployment.tier,
            served_tier=completion.served_tier,
            usage=usage,
            cost=cost,
            stop_reason=completion.stop_reason,
            latency_ms=latency_ms,
            first_byte_ms=first_byte_ms,
            added_ms=added_ms,
            attempts=tuple(call.attempts),
            skips=tuple(call.walk.skips),
            spillovers=tuple(call.spillovers),
        )
        event = _completed_event(result, call.request.stream, self._clock.wall())
        self._emit(_with_prompt(event, call))
        return result

    def _fail_request(self, call: _Call, error: RoutingError) -> NoReturn:
        call.charge.settle(0, self._clock.now())
        failed = RouterEvent(
            EventType.INFERENCE_FAILED,
            call.request.request_id,
            self._clock.wall(),
            {
                "request_id": call.request.request_id,
                "feature": call.request.feature,
                "reason": error.reason,
                "detail": str(error),
                "attempts": [_attempt_summary(a) for a in call.attempts],
            },
        )
        self._emit(_with_prompt(failed, call))
        raise error

    def _abandon(self, call: _Call, dispatch: Dispatch, streamed: str = "") -> None:
        """The caller went away (cancelled, or left a stream): the request's outcome is `client_disconnected`,
        charged what the provider consumed and produced by then (the prompt, and the text streamed), and what
        was held beyond that is given back."""
        now = self._clock.now()
        self._attempt_ended(call)
        used = estimate_tokens(call.request.prompt_chars, 0) + estimate_tokens(len(streamed), 0)
        if dispatch.reservation is not None:
            dispatch.reservation.settle(used, now)
        call.charge.settle(used, now)
        where = (
            f"during the call to {dispatch.candidate.name}, after {len(streamed)} characters of the answer"
        )
        event = _disconnected_event(call.request, call.attempts, used, where, self._clock)
        self._emit(_with_prompt(event, call))

    # Streaming after the first byte ------------------------------------------------------------------------

    async def _relay(
        self,
        call: _Call,
        dispatch: Dispatch,
        chunks: AsyncIterator[Chunk],
        first: Chunk,
        sent: float,
        first_byte_s: float,
    ) -> AsyncIterator[StreamEvent]:
        texts: list[str] = []
        chunk = first
        finished = False
        try:
            while chunk.usage is None:
                if chunk.text:
                    texts.append(chunk.text)
                    handed = time.perf_counter()
                    yield TextDelta(chunk.text)
                    call.caller_s += time.perf_counter() - handed
                chunk = await self._next_chunk(call, dispatch, chunks, sent)
            if chunk.text:
                texts.append(chunk.text)
                yield TextDelta(chunk.text)
            finished = True
        except RoutingError:
            finished = True  # _stream_broke settled the reservation and the budget
            raise
        finally:
            if not finished:
                self._abandon(call, dispatch, "".join(texts))
            await _close(chunks)
        completion = Completion(
            text="".join(texts),
            usage=chunk.usage,
            served_tier=chunk.served_tier or dispatch.candidate.deployment.tier.value,
            stop_reason=chunk.stop_reason,
            first_byte_s=first_byte_s,
        )
        yield StreamCompleted(self._succeed(call, dispatch, completion, sent, first_byte_s))

    async def _next_chunk(
        self, call: _Call, dispatch: Dispatch, chunks: AsyncIterator[Chunk], sent: float
    ) -> Chunk:
        waited = time.perf_counter()
        try:
            async with asyncio.timeout(max(call.deadline_at - waited, 0.0)):
                return await anext(chunks)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            # Bytes had arrived: the request's deadline cut the answer, not the deployment's health.
            self._stream_broke(call, dispatch, _DEADLINE_AFTER_FIRST_BYTE, sent)
        except Exception as exc:
            self._stream_broke(call, dispatch, _normalise(exc), sent)
        finally:
            call.provider_s += time.perf_counter() - waited

    def _stream_broke(self, call: _Call, dispatch: Dispatch, error: ProviderError, sent: float) -> NoReturn:
        now = self._clock.now()
        health = call.generation.health[dispatch.candidate.name]
        self._attempt_ended(call)
        if dispatch.reservation is not None:
            dispatch.reservation.cancel(now)
        if error is not _DEADLINE_AFTER_FIRST_BYTE and REASON_TRAITS[error.reason].counts_against_breaker:
            self._transition(health.breaker.record_failure(now))
            self._record_outcome(dispatch.candidate.name, None)
            self.scoreboard.record_failure(call.request.feature, dispatch.candidate.model)
            health.evidence.record_fault(now, throttled=error.reason is FailureReason.THROTTLED)
        call.attempts.append(_attempt(call, dispatch, error, sent, time.perf_counter(), None))
        if error is _DEADLINE_AFTER_FIRST_BYTE and call.whole:
            message = f"deadline passed while {dispatch.candidate.name} was answering (after its first byte)"
            self._fail_request(call, DeadlineExceeded(message, tuple(call.attempts)))
        message = (
            f"stream from {dispatch.candidate.name} broke after the first byte: {error.reason.value}: {error}"
        )
        self._fail_request(call, MidStreamFailure(message, tuple(call.attempts), error.reason.value))

    # Breakers --------------------------------------------------------------------------------------------

    def _transition(self, transition: BreakerTransition | None) -> None:
        if transition is not None:
            self._emit(breaker_event(transition, self._clock.wall()))

    def _start_probe(self, generation: _Generation, name: str) -> None:
        task = asyncio.get_running_loop().create_task(self._probe(generation, name))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _probe(self, generation: _Generation, name: str) -> None:
        """The single minimal request an OPEN breaker sends after its open time."""
        health: DeploymentHealth = generation.health[name]
        deployment = health.deployment
        request = ProviderRequest(
            model=deployment.model, tier=deployment.tier, messages=PROBE_MESSAGES, max_tokens=1
        )
        try:
            async with asyncio.timeout(generation.probe_timeout_s):
                await generation.providers[deployment.provider].complete(request)
            healthy = True
        except asyncio.CancelledError:
            health.breaker.record_probe(False, self._clock.now())
            raise
        except Exception as exc:
            healthy = not REASON_TRAITS[_normalise(exc).reason].counts_against_breaker
        self._transition(health.breaker.record_probe(healthy, self._clock.now()))


def _refusals(call: _Call, now: float) -> str:
    """What refused the request without a call: the breakers (with the seconds to their probe) and capacity."""
    parts = []
    for skip in call.walk.skips:
        if skip.reason is SkipReason.PT_CAPACITY:
            parts.append(f"{skip.deployment} no PT capacity")
            continue
        breaker = call.generation.health[skip.deployment].breaker.snapshot(now)
        probe = (
            f", probe in {max(breaker.reopens_at - now, 0.0):.1f} s" if breaker.reopens_at is not None else ""
        )
        parts.append(f"{skip.deployment} breaker {breaker.state.value}{probe}")
    return "; refused by " + ", ".join(parts) if parts else ""


def _address(spec: ProviderSpec) -> str:
    """Where a provider's calls go."""
    if spec.kind is ProviderKind.BEDROCK:
        return spec.endpoint_url or f"Bedrock in {spec.region}"
    return spec.api_endpoint or f"Vertex AI in {spec.project}/{spec.location}"


def _check_providers(policy: RoutingPolicy, providers: Mapping[str, Provider]) -> None:
    missing = sorted({d.provider for d in policy.deployments.values()} - providers.keys())
    if missing:
        raise ValueError(f"no provider adapter for: {', '.join(missing)}")


def _provider_request(call: _Call, dispatch: Dispatch) -> ProviderRequest:
    deployment = dispatch.candidate.deployment
    request = call.request
    return ProviderRequest(
        model=deployment.model,
        tier=deployment.tier,
        messages=request.messages,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        stop=request.stop,
        labels=(("feature", request.feature),),
    )


_DEADLINE_AFTER_FIRST_BYTE = ProviderError(
    FailureReason.TIMEOUT, "the request's deadline passed after the first byte", code="DeadlineExceeded"
)


def _record_evidence(
    health: DeploymentHealth, now: float, attempt_s: float, first_byte_s: float, usage: Usage, cost: float
) -> None:
    """An answered attempt's figures, for the choice among equivalent deployments."""
    tokens = usage.output_tokens
    per_token_ms = (attempt_s - first_byte_s) * 1000.0 / (tokens - 1) if tokens > 1 else None
    total = usage.total_tokens
    health.evidence.record_success(
        now,
        first_byte_ms=first_byte_s * 1000.0,
        per_token_ms=max(per_token_ms, 0.0) if per_token_ms is not None else None,
        cost_per_1k_tokens=cost * 1000.0 / total if total else 0.0,
    )


def _concluded_event(conclusion: ExperimentConclusion, occurred_at: float) -> RouterEvent:
    return RouterEvent(
        EventType.ROUTER_EXPERIMENT_CONCLUDED,
        "policy",
        occurred_at,
        {
            "feature": conclusion.feature,
            "experiment_key": conclusion.key,
            "winner_route_index": conclusion.winner,
            "winner_models": list(conclusion.arms[conclusion.winner].models),
            "confidence": conclusion.confidence,
            "arms": [
                {
                    "route_index": arm.route_index,
                    "models": list(arm.models),
                    "feedback_count": arm.feedback_count,
                    "feedback_mean": round(arm.feedback_mean, 4),
                    "lower": round(arm.lower, 4),
                    "upper": round(arm.upper, 4),
                }
                for arm in conclusion.arms
            ],
        },
    )


def _normalise(exc: BaseException) -> ProviderError:
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, TimeoutError):
        return ProviderError(FailureReason.TIMEOUT, "no first byte in time", code="FirstByteTimeout")
    return ProviderError(FailureReason.UNAVAILABLE, f"{type(exc).__name__}: {exc}", code=type(exc).__name__)


def _attempt(
    call: _Call,
    dispatch: Dispatch,
    error: ProviderError | None,
    sent: float,
    ended: float,
    first_byte_s: float | None,
) -> Attempt:
    candidate = dispatch.candidate
    gap = (sent - call.failed_at) * 1000.0 if call.failed_at is not None else None
    return Attempt(
        deployment=candidate.name,
        provider=candidate.deployment.provider,
        model=candidate.model,
        tier=candidate.deployment.tier,
        reason=error.reason if error is not None else None,
        status=error.status if error is not None else None,
        code=error.code if error is not None else None,
        started_ms=(sent - call.started) * 1000.0,
        elapsed_ms=(ended - sent) * 1000.0,
        first_byte_ms=first_byte_s * 1000.0 if first_byte_s is not None else None,
        dispatch_gap_ms=gap,
    )


def _attempt_summary(attempt: Attempt) -> dict[str, object]:
    return {
        "deployment": attempt.deployment,
        "reason": attempt.reason.value if attempt.reason else "ok",
        "status": attempt.status,
        "code": attempt.code,
        "elapsed_ms": round(attempt.elapsed_ms, 3),
    }


def _with_prompt(event: RouterEvent, call: _Call) -> RouterEvent:
    """The outcome event with the request's messages when its feature opts in to keeping them."""
    feature = call.generation.policy.features.get(call.request.feature)
    if feature is None or not feature.record_prompts:
        return event
    prompt = [{"role": message.role, "content": message.content} for message in call.request.messages]
    return dataclasses.replace(event, payload={**event.payload, "prompt": prompt})


def _disconnected_event(
    request: InferRequest, attempts: Iterable[Attempt], charged: int, where: str, clock: RouterClock
) -> RouterEvent:
    return RouterEvent(
        EventType.INFERENCE_FAILED,
        request.request_id,
        clock.wall(),
        {
            "request_id": request.request_id,
            "feature": request.feature,
            "reason": CLIENT_DISCONNECTED,
            "detail": f"the caller went away {where}; charged {charged} tokens",
            "attempts": [_attempt_summary(a) for a in attempts],
            "charged_tokens": charged,
        },
    )


def _completed_event(result: InferResult, streamed: bool, occurred_at: float) -> RouterEvent:
    return RouterEvent(
        EventType.INFERENCE_COMPLETED,
        result.request_id,
        occurred_at,
        {
            "request_id": result.request_id,
            "feature": result.feature,
            "route_index": result.route_index,
            "model": result.model,
            "deployment": result.deployment,
            "provider": result.provider,
            "requested_tier": result.requested_tier.value,
            "served_tier": result.served_tier,
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
            "latency_ms": round(result.latency_ms, 3),
            "first_byte_ms": round(result.first_byte_ms, 3),
            "added_ms": round(result.added_ms, 3),
            "cost": result.cost,
            "attempts": len(result.attempts),
            "stream": streamed,
        },
    )


async def _close(iterator: AsyncIterator[object]) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()
