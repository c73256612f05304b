"""The async in-process LLM router: policy decisions from libs.core.routing, calls through libs.providers."""

from libs.routing_engine.clock import Clock, ManualClock, SystemClock
from libs.routing_engine.contracts import (
    Attempt,
    InferRequest,
    InferResult,
    StreamCompleted,
    StreamEvent,
    TextDelta,
    new_request_id,
)
from libs.routing_engine.errors import (
    BudgetExceeded,
    DeadlineExceeded,
    MidStreamFailure,
    NoDeploymentAvailable,
    RequestRejected,
    RoutingError,
    UnknownFeature,
)
from libs.routing_engine.events import EventBuffer, EventSink, RouterEvent
from libs.routing_engine.policy_source import PolicyFileWatcher, read_policy_file
from libs.routing_engine.router import Router

__all__ = [
    "Attempt",
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
