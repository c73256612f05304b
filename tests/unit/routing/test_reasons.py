"""Provider signals map to the normalised reasons of docs/router.md."""

from __future__ import annotations

import pytest

from libs.core.routing import REASON_TRAITS, FailureReason, Tier, classify_bedrock, classify_vertex

PT, OD = Tier.PROVISIONED, Tier.ON_DEMAND


@pytest.mark.parametrize(
    ("status", "code", "tier", "reason"),
    [
        (429, "ThrottlingException", PT, FailureReason.PT_EXHAUSTED),
        (429, "ThrottlingException", OD, FailureReason.THROTTLED),
        (429, "ModelNotReadyException", PT, FailureReason.NOT_READY),
        (429, "ModelNotReadyException", OD, FailureReason.NOT_READY),
        (400, "ServiceQuotaExceededException", OD, FailureReason.QUOTA),
        (500, "InternalServerException", OD, FailureReason.UNAVAILABLE),
        (503, "ServiceUnavailableException", PT, FailureReason.UNAVAILABLE),
        (408, "ModelTimeoutException", OD, FailureReason.TIMEOUT),
        (424, "ModelErrorException", OD, FailureReason.MODEL_ERROR),
        (400, "ValidationException", PT, FailureReason.CLIENT_ERROR),
        (403, "AccessDeniedException", OD, FailureReason.CLIENT_ERROR),
        (404, "ResourceNotFoundException", OD, FailureReason.CLIENT_ERROR),
        (None, "throttlingException", PT, FailureReason.PT_EXHAUSTED),
        (None, "modelStreamErrorException", OD, FailureReason.MODEL_ERROR),
        (502, None, OD, FailureReason.UNAVAILABLE),
    ],
)
def test_bedrock_signals(status: int | None, code: str | None, tier: Tier, reason: FailureReason) -> None:
    assert classify_bedrock(status, code, tier) is reason


@pytest.mark.parametrize(
    ("status", "tier", "reason"),
    [
        (429, PT, FailureReason.PT_EXHAUSTED),
        (429, OD, FailureReason.THROTTLED),
        (500, PT, FailureReason.UNAVAILABLE),
        (503, OD, FailureReason.UNAVAILABLE),
        (504, OD, FailureReason.TIMEOUT),
        (400, OD, FailureReason.CLIENT_ERROR),
        (403, OD, FailureReason.CLIENT_ERROR),
        (404, PT, FailureReason.CLIENT_ERROR),
    ],
)
def test_vertex_signals(status: int, tier: Tier, reason: FailureReason) -> None:
    assert classify_vertex(status, tier) is reason


def test_traits_follow_the_table() -> None:
    traits = {reason: (t.spill, t.failover, t.counts_against_breaker) for reason, t in REASON_TRAITS.items()}
    assert traits == {
        FailureReason.PT_EXHAUSTED: (True, True, False),
        FailureReason.THROTTLED: (False, True, True),
        FailureReason.NOT_READY: (True, True, True),
        FailureReason.QUOTA: (True, True, False),
        FailureReason.UNAVAILABLE: (False, True, True),
        FailureReason.TIMEOUT: (False, True, True),
        FailureReason.MODEL_ERROR: (False, True, True),
        FailureReason.CLIENT_ERROR: (False, False, False),
    }
