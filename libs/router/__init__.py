"""The router's application layer: the async in-process router that applies the pure decisions of
libs.core.routing, calls providers through libs.providers and fails over within a request's deadline; its
requests and results, errors, events, injected clock, and the policy file it reads and hot-reloads.

The llm_router service puts it behind NATS and HTTP; the benchmarks and the demo use it too.
"""

from libs.router.clock import ManualClock, RouterClock, SystemClock
from libs.router.contracts import (
    Attempt,
    InferRequest,
    InferResult,
    StreamCompleted,
    StreamEvent,
    TextDelta,
    new_request_id,
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
from libs.router.events import EventBuffer, EventSink, RouterEvent
from libs.router.policy_file import PolicyFileWatcher, read_policy_file
from libs.router.router import AttemptOutcome, Router

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "BudgetExceeded",
    "BudgetNeverFits",
    "DeadlineExceeded",
    "EventBuffer",
    "EventSink",
    "InferRequest",
    "InferResult",
    "ManualClock",
    "MidStreamFailure",
    "NoDeploymentAvailable",
    "PolicyFileWatcher",
    "RequestRejected",
    "Router",
    "RouterClock",
    "RouterEvent",
    "RoutingError",
    "StreamCompleted",
    "StreamEvent",
    "SystemClock",
    "TextDelta",
    "UnknownFeature",
    "new_request_id",
    "read_policy_file",
]
