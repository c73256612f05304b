"""Between the router's objects and the wire messages of libs.events.inference."""

from __future__ import annotations

from pydantic import ValidationError

from libs.events.inference import AttemptReport, InferenceAnswer, InferenceCall, InferenceRefusal, TokenUsage
from libs.providers import Message
from libs.router import (
    Attempt,
    BudgetExceeded,
    DeadlineExceeded,
    InferRequest,
    InferResult,
    MidStreamFailure,
    NoDeploymentAvailable,
    RequestRejected,
    RoutingError,
)
from services.llm_router.overload import Overloaded

# Failures the router itself reports as `inference.failed` (so the metrics count them from the event);
# refusals before routing (overload, budget, unknown feature, malformed call) are counted by the front.
ROUTER_REPORTED = (NoDeploymentAvailable, DeadlineExceeded, RequestRejected, MidStreamFailure)


def infer_request(call: InferenceCall, *, deadline_ms: int | None = None) -> InferRequest:
    """The router's request for a wire call; `deadline_ms` may shorten the caller's own."""
    deadlines = [d for d in (call.deadline_ms, deadline_ms) if d is not None]
    return InferRequest(
        feature=call.feature,
        messages=tuple(Message(m.role, m.content) for m in call.messages),
        max_tokens=call.max_tokens,
        stream=call.stream,
        request_id=call.request_id,
        deadline_ms=min(deadlines) if deadlines else None,
        temperature=call.temperature,
    )


def attempt_report(attempt: Attempt) -> AttemptReport:
    return AttemptReport(
        deployment=attempt.deployment,
        provider=attempt.provider,
        tier=attempt.tier.value,
        reason=attempt.reason.value if attempt.reason is not None else "ok",
        status=attempt.status,
        code=attempt.code,
        elapsed_ms=round(attempt.elapsed_ms, 3),
    )


def answer(result: InferResult, *, with_text: bool = True) -> InferenceAnswer:
    """The `end` frame (whole reply when not streaming; a stream's text went out in its chunks)."""
    return InferenceAnswer(
        request_id=result.request_id,
        feature=result.feature,
        text=result.text if with_text else "",
        model=result.model,
        deployment=result.deployment,
        provider=result.provider,
        requested_tier=result.requested_tier.value,
        served_tier=result.served_tier,
        stop_reason=result.stop_reason,
        usage=TokenUsage(input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens),
        cost=result.cost,
        latency_ms=round(result.latency_ms, 3),
        first_byte_ms=round(result.first_byte_ms, 3),
        added_ms=round(result.added_ms, 3),
        provider_ms=round(result.latency_ms - result.added_ms, 3),
        attempts=[attempt_report(a) for a in result.attempts],
    )


def refusal(error: Exception, request_id: str | None) -> InferenceRefusal:
    """The `error` frame for anything that stopped a request."""
    if isinstance(error, Overloaded):
        return InferenceRefusal(
            request_id=request_id,
            reason=error.reason,
            message=str(error),
            http_status=error.http_status,
            retry_after_s=error.retry_after_s,
        )
    if isinstance(error, RoutingError):
        return InferenceRefusal(
            request_id=request_id,
            reason=error.reason,
            message=str(error),
            http_status=error.http_status,
            retry_after_s=round(error.retry_after_s, 3) if isinstance(error, BudgetExceeded) else None,
            attempts=[attempt_report(a) for a in error.attempts],
        )
    if isinstance(error, ValidationError | ValueError):
        return InferenceRefusal(
            request_id=request_id, reason="bad_request", message=str(error), http_status=400
        )
    return InferenceRefusal(
        request_id=request_id,
        reason="internal_error",
        message=f"{type(error).__name__}: {error}",
        http_status=500,
    )
