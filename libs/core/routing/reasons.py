"""Normalised failure reasons: one table says, for each provider signal, whether to spill, fail over, or count
it against the deployment's breaker (docs/router.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from libs.api.router_policy.policy import Tier


class FailureReason(StrEnum):
    """Why an attempt at one deployment did not produce an answer."""

    PT_EXHAUSTED = "pt_exhausted"
    THROTTLED = "throttled"
    NOT_READY = "not_ready"
    QUOTA = "quota"
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    MODEL_ERROR = "model_error"
    CLIENT_ERROR = "client_error"


@dataclass(frozen=True, slots=True)
class ReasonTraits:
    """What the router does about a reason: spill PT to OD, try the next candidate, and/or count a failure."""

    spill: bool
    failover: bool
    counts_against_breaker: bool


REASON_TRAITS: dict[FailureReason, ReasonTraits] = {
    # PT exhausted moves on to the model's OD deployment; it only "fails over" further if that fails too.
    FailureReason.PT_EXHAUSTED: ReasonTraits(spill=True, failover=True, counts_against_breaker=False),
    FailureReason.THROTTLED: ReasonTraits(spill=False, failover=True, counts_against_breaker=True),
    FailureReason.NOT_READY: ReasonTraits(spill=True, failover=True, counts_against_breaker=True),
    # Quota is an account limit, not ill health: alert, do not trip.
    FailureReason.QUOTA: ReasonTraits(spill=True, failover=True, counts_against_breaker=False),
    FailureReason.UNAVAILABLE: ReasonTraits(spill=False, failover=True, counts_against_breaker=True),
    FailureReason.TIMEOUT: ReasonTraits(spill=False, failover=True, counts_against_breaker=True),
    FailureReason.MODEL_ERROR: ReasonTraits(spill=False, failover=True, counts_against_breaker=True),
    FailureReason.CLIENT_ERROR: ReasonTraits(spill=False, failover=False, counts_against_breaker=False),
}

_BEDROCK_CODES: dict[str, FailureReason] = {
    "ModelNotReadyException": FailureReason.NOT_READY,
    "ServiceQuotaExceededException": FailureReason.QUOTA,
    "ServiceUnavailableException": FailureReason.UNAVAILABLE,
    "InternalServerException": FailureReason.UNAVAILABLE,
    "ModelTimeoutException": FailureReason.TIMEOUT,
    "ModelErrorException": FailureReason.MODEL_ERROR,
    "ModelStreamErrorException": FailureReason.MODEL_ERROR,
    "ValidationException": FailureReason.CLIENT_ERROR,
    "AccessDeniedException": FailureReason.CLIENT_ERROR,
    "ResourceNotFoundException": FailureReason.CLIENT_ERROR,
}


def classify_bedrock(status: int | None, code: str | None, tier: Tier) -> FailureReason:
    """The reason for a Bedrock error. The error code decides before the status: ModelNotReady is also a 429.

    In-stream exceptions arrive with camelCase codes (`throttlingException`); they map like their HTTP twins.
    """
    normalised = (code[:1].upper() + code[1:]) if code else ""
    if normalised == "ThrottlingException":
        return _throttle(tier)
    reason = _BEDROCK_CODES.get(normalised)
    if reason is not None:
        return reason
    return _by_status(status, tier)


def classify_vertex(status: int | None, tier: Tier) -> FailureReason:
    """The reason for a Vertex error; a 429 on a `dedicated` (PT) request means PT exhausted."""
    return _by_status(status, tier)


def _throttle(tier: Tier) -> FailureReason:
    return FailureReason.PT_EXHAUSTED if tier is Tier.PROVISIONED else FailureReason.THROTTLED


def _by_status(status: int | None, tier: Tier) -> FailureReason:
    if status is None:
        return FailureReason.UNAVAILABLE
    if status == 429:
        return _throttle(tier)
    if status in (408, 504):
        return FailureReason.TIMEOUT
    if status == 424:
        return FailureReason.MODEL_ERROR
    if 400 <= status < 500:
        return FailureReason.CLIENT_ERROR
    return FailureReason.UNAVAILABLE
