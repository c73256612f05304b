"""`podway.rpc.router.status` (`podway router status`): each deployment's breaker state and ramp step, the PT
capacity in use, and the latest failed attempts, as one router process sees them; and the shared budgets'
ledgers, with the share every router process of the fleet holds."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from libs.core.routing import FeatureExperiment, LedgerKind, ledger_key
from libs.events.catalogue import EventType
from libs.events.inference import (
    BudgetStatus,
    DeploymentStatus,
    ExperimentArmStatus,
    ExperimentStatus,
    RecentError,
    RouterStatusReply,
)
from libs.messaging.streaming_rpc import IncomingRequest
from libs.router import Router, RouterClock, RouterEvent
from services.llm_router.metrics import MOVES_WITHOUT_AN_ATTEMPT, SPILLS_AFTER_A_FAILED_ATTEMPT

RECENT_ERRORS = 20


class RecentErrors:
    """The latest failed attempts, from the router's events (`observe` is called with each)."""

    def __init__(self, keep: int = RECENT_ERRORS) -> None:
        self._errors: deque[RecentError] = deque(maxlen=keep)

    def observe(self, event: RouterEvent) -> None:
        p = event.payload
        if (event.type is EventType.ROUTER_FAILOVER and p["reason"] not in MOVES_WITHOUT_AN_ATTEMPT) or (
            event.type is EventType.ROUTER_SPILLOVER and p["reason"] in SPILLS_AFTER_A_FAILED_ATTEMPT
        ):
            self._add(event, p["from_deployment"], p["reason"], p.get("code"), p.get("status"))
        elif event.type is EventType.INFERENCE_FAILED:
            last = p["attempts"][-1] if p["attempts"] else {}
            self._add(event, last.get("deployment"), p["reason"], last.get("code"), last.get("status"))

    def latest(self) -> list[RecentError]:
        """Newest first."""
        return list(reversed(self._errors))

    def _add(
        self, event: RouterEvent, deployment: str | None, reason: str, code: str | None, status: int | None
    ) -> None:
        self._errors.append(
            RecentError(
                at=datetime.fromtimestamp(event.occurred_at, UTC),
                request_id=event.payload["request_id"],
                feature=event.payload["feature"],
                deployment=deployment,
                reason=reason,
                code=code,
                status=status,
            )
        )


class RouterStatus:
    """Serves `podway.rpc.router.status`."""

    def __init__(
        self,
        router: Router,
        errors: RecentErrors,
        instance: str,
        clock: RouterClock,
        ledgers: Callable[[], Awaitable[list[BudgetStatus]]] | None = None,
        process: str = "",
    ) -> None:
        self._router = router
        self._errors = errors
        self._instance = instance
        self._clock = clock
        self._ledgers = ledgers
        self._process = process

    async def __call__(self, request: IncomingRequest) -> None:
        reply = self.reply()
        if self._ledgers is not None:
            reply = with_fleet_ledgers(reply, await self._ledgers(), self._process)
        await request.send(reply.model_dump_json().encode())

    def reply(self) -> RouterStatusReply:
        now = self._clock.now()
        policy = self._router.policy
        capacity = self._router.capacity()
        evidence = self._router.evidence()
        rows = []
        for name, breaker in sorted(self._router.breakers().items()):
            deployment = policy.deployments[name]
            held = capacity.get(name)
            seen = evidence.get(name)
            rows.append(
                DeploymentStatus(
                    deployment=name,
                    provider=deployment.provider,
                    tier=deployment.tier.value,
                    state=breaker.state.value,
                    ramp_fraction=breaker.ramp_fraction,
                    ramp_step=breaker.ramp_step,
                    window_requests=breaker.window_requests,
                    window_error_rate=round(breaker.window_error_rate, 4),
                    consecutive_failures=breaker.consecutive_failures,
                    reopens_in_s=round(max(0.0, breaker.reopens_at - now), 3)
                    if breaker.reopens_at is not None
                    else None,
                    pt_tokens_per_minute=held.tokens_per_minute if held else None,
                    pt_tokens_in_use=round(max(0.0, held.tokens_per_minute - held.tokens_available), 1)
                    if held
                    else None,
                    pt_in_flight=held.in_flight if held else None,
                    pt_concurrency=held.concurrency if held else None,
                    first_byte_ms=round(seen.first_byte_ms, 1) if seen and seen.samples else None,
                    evidence_score=round(seen.score, 4) if seen and seen.samples else None,
                    evidence_samples=round(seen.samples, 1) if seen else None,
                )
            )
        return RouterStatusReply(
            instance=self._instance,
            deployments=rows,
            recent_errors=self._errors.latest(),
            experiments=[_experiment_status(e) for e in self._router.experiments()],
        )


def _experiment_status(experiment: FeatureExperiment) -> ExperimentStatus:
    totals = experiment.totals()
    arms = [
        ExperimentArmStatus(
            route_index=index,
            models=list(route.models),
            feedback_count=count,
            feedback_mean=round(total / count, 4) if count else None,
        )
        for index, (route, count, total) in enumerate(
            zip(experiment.feature.routes, totals.counts, totals.sums, strict=True)
        )
    ]
    return ExperimentStatus(
        feature=experiment.name, key=experiment.key, winner_route_index=experiment.winner, arms=arms
    )


def with_fleet_ledgers(
    reply: RouterStatusReply, budgets: list[BudgetStatus], process: str
) -> RouterStatusReply:
    """The reply with the fleet's ledgers, and each leased PT deployment's tokens in use as the whole fleet
    spent them: the ledger's pool and the other processes' shares as last reported, and what this process
    holds now (its share alone would say nearly all is in use)."""
    ledgers = {b.key: b for b in budgets}
    rows = []
    for row in reply.deployments:
        ledger = ledgers.get(ledger_key(LedgerKind.PT, row.deployment))
        if ledger is not None and row.pt_tokens_per_minute is not None and row.pt_tokens_in_use is not None:
            held_here = row.pt_tokens_per_minute - row.pt_tokens_in_use
            others = sum(h.tokens for h in ledger.holders if h.process != process)
            free = ledger.pool + others + held_here
            row = row.model_copy(
                update={"pt_tokens_in_use": round(max(0.0, ledger.tokens_per_minute - free), 1)}
            )
        rows.append(row)
    return reply.model_copy(update={"budgets": budgets, "deployments": rows})
