"""The router's application layer: the async in-process router that applies the pure decisions of
libs.core.routing, calls providers through libs.providers and fails over within a request's deadline; its
requests and results, errors, events, injected clock, and the policy file it reads and hot-reloads.

The llm_router service puts it behind NATS and HTTP; the benchmarks and the demo use it too.
"""

from libs.router_runtime.clock import Clock, ManualClock, SystemClock
from libs.router_runtime.contracts import (
    Attempt,
    InferRequest,
    InferResult,
    StreamCompleted,
    StreamEvent,
    TextDelta,
    new_request_id,
)
from libs.router_runtime.errors import (
    BudgetExceeded,
    DeadlineExceeded,
    MidStreamFailure,
    NoDeploymentAvailable,
    RequestRejected,
    RoutingError,
    UnknownFeature,
)
from libs.router_runtime.events import EventBuffer, EventSink, RouterEvent
from libs.router_runtime.policy_file import PolicyFileWatcher, read_policy_file
from libs.router_runtime.router import AttemptOutcome, Router

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "BudgetExceeded",
    "Clock",
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
