"""Why the router could not answer; each error carries the attempts made and an HTTP status for front ends."""

from __future__ import annotations

from libs.router.contracts import Attempt


class RoutingError(Exception):
    """Base of the router's refusals and failures."""

    http_status = 502
    reason = "routing_error"

    def __init__(self, message: str, attempts: tuple[Attempt, ...] = ()) -> None:
        super().__init__(message)
        self.attempts = attempts


class UnknownFeature(RoutingError):
    """The feature is not in the policy."""

    http_status = 404
    reason = "unknown_feature"


class BudgetExceeded(RoutingError):
    """The feature spent its tokens per minute; retry after `retry_after_s`."""

    http_status = 429
    reason = "budget_exceeded"

    def __init__(self, message: str, retry_after_s: float, *, grantable: bool = False) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.grantable = grantable
        """This process's lease was short but the fleet's ledger had room when last seen."""


class BudgetNeverFits(RoutingError):
    """The request's estimate is above a whole minute of a budget: it could never be admitted, so say so."""

    http_status = 400
    reason = "exceeds_budget"


class RequestRejected(RoutingError):
    """A provider refused the request itself (400 validation, 403, 404): not retried elsewhere."""

    reason = "client_error"

    def __init__(self, message: str, attempts: tuple[Attempt, ...], status: int | None) -> None:
        super().__init__(message, attempts)
        self.http_status = status or 400


class NoDeploymentAvailable(RoutingError):
    """Every candidate was refused by its breaker or capacity, or failed."""

    http_status = 503
    reason = "no_deployment_available"


class DeadlineExceeded(RoutingError):
    """The request's deadline passed before any deployment answered."""

    http_status = 504
    reason = "deadline_exceeded"


class MidStreamFailure(RoutingError):
    """A stream broke after text had reached the caller: an explicit error, never a silent clean end."""

    http_status = 502
    reason = "mid_stream_failure"

    def __init__(self, message: str, attempts: tuple[Attempt, ...], failure_reason: str) -> None:
        super().__init__(message, attempts)
        self.failure_reason = failure_reason
