"""The LLM router's wire contract: its audit events, and the messages of its sync, async and feedback
interfaces (docs/router.md).

Every event of one inference request carries the request id as its correlation id, so one request's story is
one query; breaker events are correlated by deployment name. Prompt and answer text never enter an event.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from libs.events.catalogue import EventType
from libs.events.envelope import EventPayload, uuid7
from libs.events.registry import event_model

# Subjects the router serves besides the catalogue's RpcSubject.ROUTER_INFER and WorkSubject.INFERENCE.
ROUTER_SCOREBOARD_SUBJECT = "podway.rpc.router.scoreboard"
ROUTER_STATUS_SUBJECT = "podway.rpc.router.status"
# Every router process answers it (no queue group): `podway router status` shows the whole fleet.
ROUTER_FLEET_STATUS_SUBJECT = "podway.router.status"
INFERENCE_FEEDBACK_SUBJECT = "podway.inference.feedback"
# Router processes share budgets and PT capacity through one JetStream key-value bucket (a ledger per budget).
ROUTER_LEDGER_BUCKET = "podway_router_ledger"
ROUTER_LEDGER_STREAM = f"KV_{ROUTER_LEDGER_BUCKET}"
ROUTER_EXPERIMENTS_BUCKET = "podway_router_experiments"
ROUTER_EXPERIMENTS_STREAM = f"KV_{ROUTER_EXPERIMENTS_BUCKET}"
# Router processes tell each other what their breakers heard (core NATS, every process subscribes).
ROUTER_OUTCOMES_SUBJECT = "podway.router.outcomes"

# Streaming replies: every message to the caller's inbox names its frame in this header.
STREAM_HEADER = "Podway-Stream"
FRAME_CHUNK = "chunk"
FRAME_END = "end"
FRAME_ERROR = "error"

# Producer name of the router's events.
ROUTER_PRODUCER = "llm_router"
# A request id is the correlation id of the request's events, which the audit log holds in 128 characters.
MAX_REQUEST_ID_LENGTH = 128


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- audit events -----------------------------------------------------------------------------------------


class _Move(EventPayload):
    request_id: str = Field(description="The inference request (also the correlation id)")
    feature: str = Field(description="Product feature the request belongs to")
    from_deployment: str = Field(description="Deployment the request leaves")
    to_deployment: str = Field(description="Deployment the request is dispatched to next")
    reason: str = Field(
        description="Normalised reason, e.g. pt_capacity, breaker_open, pt_exhausted, unavailable, timeout"
    )
    code: str | None = Field(default=None, description="Provider error code of the failed attempt, if any")
    status: int | None = Field(default=None, description="HTTP status of the failed attempt, if any")
    elapsed_ms: float = Field(description="Time since the request began")
    dispatch_ms: float | None = Field(
        default=None, description="Time from the failed attempt to this dispatch (None without a failure)"
    )


@event_model
class RouterSpillover(_Move):
    """A sync request left a provisioned-throughput deployment for the same model's on-demand one."""

    TYPE = EventType.ROUTER_SPILLOVER
    model: str = Field(description="Model name whose PT deployment had no room")


@event_model
class RouterFailover(_Move):
    """The request moved to another deployment in any way but a spillover: after a failed attempt, or past a
    deployment its breaker or capacity refused, to another PT deployment, another model or the other cloud."""

    TYPE = EventType.ROUTER_FAILOVER
    breaker_state: str = Field(description="State of the breaker of the deployment the request left")


class _BreakerTransition(EventPayload):
    deployment: str = Field(description="Deployment whose breaker changed state (also the correlation id)")
    from_state: str = Field(description="closed, open or half_open")
    to_state: str = Field(description="closed, open or half_open")
    reason: str = Field(
        description="error_rate, latency_p90, consecutive_failures, probe_*, peer_succeeded, ramp_*"
    )
    window_requests: int = Field(description="Attempts in the sliding window at the transition")
    window_error_rate: float = Field(description="Error rate in the sliding window at the transition")
    open_for_s: float | None = Field(default=None, description="How long it stays open before a probe")


@event_model
class RouterBreakerOpened(_BreakerTransition):
    """A deployment's breaker opened (or stayed open after a failed probe): it admits no traffic."""

    TYPE = EventType.ROUTER_BREAKER_OPENED


@event_model
class RouterBreakerHalfOpened(_BreakerTransition):
    """A probe succeeded: the deployment ramps traffic back up."""

    TYPE = EventType.ROUTER_BREAKER_HALF_OPENED


@event_model
class RouterBreakerClosed(_BreakerTransition):
    """The ramp reached 100%: the deployment is healthy again."""

    TYPE = EventType.ROUTER_BREAKER_CLOSED


@event_model
class RouterPolicyReloaded(EventPayload):
    """A new routing policy is in force."""

    TYPE = EventType.ROUTER_POLICY_RELOADED
    deployments: list[str] = Field(description="Deployments of the new policy")
    features: list[str] = Field(description="Features of the new policy")
    kept_state: list[str] = Field(description="Deployments whose breaker and capacity state carried over")
    reopened_providers: list[str] = Field(
        default_factory=list,
        description="Providers whose definition changed and whose client was opened anew",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What the edit may not have meant, each naming its section (e.g. every API key gone)",
    )


class ExperimentArm(_Part):
    """One route of a concluded A/B split, with its feedback."""

    route_index: int = Field(description="Index of the route in the feature's routes")
    models: list[str] = Field(description="The route's model chain")
    feedback_count: int = Field(description="Feedback scores counted for the route")
    feedback_mean: float = Field(description="Their mean, in [0, 1]")
    lower: float = Field(description="Lower end of the route's interval at the stated confidence")
    upper: float = Field(description="Upper end of the route's interval at the stated confidence")


@event_model
class RouterExperimentConcluded(EventPayload):
    """A feature's A/B split ended by evidence: one route's feedback is better than every other's at the stated
    confidence, and all the feature's traffic goes to it from now on (docs/router.md)."""

    TYPE = EventType.ROUTER_EXPERIMENT_CONCLUDED
    feature: str = Field(description="Feature whose split concluded")
    experiment_key: str = Field(
        default="", description="The experiment: a hash of the feature's name, arms and experiment settings"
    )
    winner_route_index: int = Field(description="The route that takes all the feature's traffic")
    winner_models: list[str] = Field(description="The winning route's model chain")
    confidence: float = Field(description="Probability that the winner is the best route (1 - error bound)")
    arms: list[ExperimentArm] = Field(description="Every route's feedback at the conclusion")


@event_model
class InferenceCompleted(EventPayload):
    """A request was answered."""

    TYPE = EventType.INFERENCE_COMPLETED
    request_id: str = Field(description="The inference request (also the correlation id)")
    feature: str = Field(description="Product feature")
    route_index: int = Field(description="Which arm of the feature's A/B split served it")
    model: str = Field(description="Model name that answered")
    deployment: str = Field(description="Deployment that answered")
    provider: str = Field(description="Provider (cloud account) of that deployment")
    requested_tier: str = Field(description="Tier of the deployment: provisioned or on_demand")
    served_tier: str = Field(description="Capacity the provider says served it")
    input_tokens: int = Field(description="Prompt tokens the provider reported")
    output_tokens: int = Field(description="Answer tokens the provider reported")
    latency_ms: float = Field(description="Whole request, all attempts")
    first_byte_ms: float = Field(description="Time to the first token (streaming) or to the response")
    added_ms: float = Field(description="The router's own time: latency minus time inside provider calls")
    cost: float = Field(description="Price of the answering call, in the account currency")
    attempts: int = Field(description="Attempts made, the answering one included")
    stream: bool = Field(description="Whether the answer was streamed")
    prompt: list[ChatMessage] | None = Field(
        default=None, description="The request's messages, only when its feature sets record_prompts"
    )


class AttemptSummary(_Part):
    """One attempt of a failed request."""

    deployment: str = Field(description="Deployment tried")
    reason: str = Field(description="Normalised failure reason, or ok")
    status: int | None = Field(default=None, description="HTTP status")
    code: str | None = Field(default=None, description="Provider error code")
    elapsed_ms: float = Field(description="Time the attempt took")


@event_model
class InferenceFailed(EventPayload):
    """A request could not be answered: every candidate refused or failed, or the deadline passed."""

    TYPE = EventType.INFERENCE_FAILED
    request_id: str = Field(description="The inference request (also the correlation id)")
    feature: str = Field(description="Product feature")
    reason: str = Field(
        description="no_deployment_available, deadline_exceeded, client_error, client_disconnected, ..."
    )
    detail: str = Field(description="Human-readable explanation")
    attempts: list[AttemptSummary] = Field(default_factory=list, description="Every attempt, in order")
    charged_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Tokens charged to the feature's and the key's budgets (client_disconnected: the prompt "
        "and the text produced before the caller went away)",
    )
    prompt: list[ChatMessage] | None = Field(
        default=None, description="The request's messages, only when its feature sets record_prompts"
    )


@event_model
class InferenceFeedback(EventPayload):
    """A caller's quality score for an answer; it feeds the scoreboard."""

    TYPE = EventType.INFERENCE_FEEDBACK
    request_id: str = Field(description="The answered request (also the correlation id)")
    feature: str = Field(description="Product feature")
    model: str = Field(description="Model that gave the answer")
    score: float = Field(ge=0, le=1, description="Quality score in [0, 1], e.g. thumbs up = 1")
    comment: str | None = Field(default=None, description="Free text from the caller")


# --- interface messages -----------------------------------------------------------------------------------


class ChatMessage(_Part):
    """One chat message."""

    role: Literal["system", "user", "assistant"] = Field(description="Who speaks")
    content: str = Field(description="The text")


class InferenceCall(_Part):
    """A request to the router (sync on `podway.rpc.router.infer`, or inside an InferenceWork)."""

    request_id: str = Field(
        default_factory=lambda: uuid.uuid4().hex,
        min_length=1,
        max_length=MAX_REQUEST_ID_LENGTH,
        description="Correlation id",
    )
    feature: str = Field(min_length=1, description="Product feature; selects the models")
    messages: list[ChatMessage] = Field(min_length=1, description="The conversation")
    max_tokens: int = Field(default=256, ge=1, description="Most answer tokens")
    temperature: float | None = Field(default=None, ge=0, description="Sampling temperature")
    stream: bool = Field(default=False, description="Sync only: answer as chunk frames, then end or error")
    deadline_ms: int | None = Field(default=None, gt=0, description="Can only shorten the feature's deadline")


class InferenceWork(InferenceCall):
    """An async request on the `podway.work.inference` work queue; its outcome is an event."""

    work_id: uuid.UUID = Field(default_factory=uuid7, description="Idempotency key (also the Nats-Msg-Id)")
    submitted_at: datetime = Field(description="When the caller queued it; the deadline counts from here")


class TokenUsage(_Part):
    """Tokens the provider reported."""

    input_tokens: int = Field(description="Prompt tokens")
    output_tokens: int = Field(description="Answer tokens")


class AttemptReport(_Part):
    """One attempt of an answered request: the answer to "why did it fall back?"."""

    deployment: str
    provider: str
    tier: str
    reason: str = Field(description="Normalised failure reason, or ok")
    status: int | None = None
    code: str | None = None
    elapsed_ms: float


class InferenceAnswer(_Part):
    """The `end` frame (and the whole reply of a non-streaming request)."""

    request_id: str
    feature: str
    text: str = Field(description="The whole answer; empty in the end frame of a stream")
    model: str = Field(description="Model name that answered")
    deployment: str = Field(description="Deployment that answered")
    provider: str
    requested_tier: str
    served_tier: str = Field(description="Capacity the provider says served it")
    stop_reason: str | None = None
    usage: TokenUsage
    cost: float
    latency_ms: float = Field(description="Inside the router, all attempts")
    first_byte_ms: float
    added_ms: float = Field(description="The router's own time")
    provider_ms: float = Field(description="Time inside provider calls (latency minus added)")
    attempts: list[AttemptReport]


class InferenceRefusal(_Part):
    """The `error` frame: why no (complete) answer came. Never a silent end."""

    request_id: str | None
    reason: str = Field(
        description="overloaded, budget_exceeded, no_deployment_available, mid_stream_failure, ..."
    )
    message: str
    http_status: int = Field(description="The status an HTTP front would answer")
    retry_after_s: float | None = Field(default=None, description="When to come back (budget, overload)")
    attempts: list[AttemptReport] = Field(default_factory=list)


class FeedbackReport(_Part):
    """What a caller publishes on `podway.inference.feedback`."""

    request_id: str = Field(description="The answered request")
    score: float = Field(ge=0, le=1, description="Quality score in [0, 1]")
    feature: str | None = Field(default=None, description="Needed only if the router no longer remembers it")
    model: str | None = Field(default=None, description="Needed only if the router no longer remembers it")
    comment: str | None = None


class FeedbackRecorded(_Part):
    """The reply to a feedback report sent as a request."""

    request_id: str
    recorded: bool
    feature: str | None = None
    model: str | None = None


class ScoreboardRow(_Part):
    feature: str
    model: str
    requests: int
    failures: int
    error_rate: float
    latency_ms_ewma: float
    first_byte_ms_ewma: float
    latency_ms_max: float
    input_tokens: int
    output_tokens: int
    cost: float
    feedback_count: int
    feedback_mean: float | None


class BreakerRow(_Part):
    deployment: str
    state: str
    ramp_fraction: float
    window_requests: int
    window_error_rate: float
    consecutive_failures: int


class ScoreboardReply(_Part):
    """`podway.rpc.router.scoreboard`: one router replica's figures and its breakers."""

    instance: str = Field(description="Router replica that answered")
    rows: list[ScoreboardRow]
    breakers: list[BreakerRow]


class AttemptOutcomes(_Part):
    """`podway.router.outcomes`: the attempts one router process's breakers heard in its last interval, so
    that every process's breakers see the whole traffic."""

    instance: str = Field(description="Router process that made the attempts")
    outcomes: list[tuple[str, float | None]] = Field(
        description="(deployment, first-byte seconds of a success; null for a failure that counts against it)"
    )


class DeploymentStatus(_Part):
    deployment: str
    provider: str
    tier: str
    state: str = Field(description="Breaker state: closed, open or half_open")
    ramp_fraction: float = Field(description="Share of its traffic the deployment admits")
    ramp_step: int | None = Field(description="Index in the policy's ramp while half-open")
    window_requests: int
    window_error_rate: float
    consecutive_failures: int
    reopens_in_s: float | None = Field(description="Seconds until the probe, while open")
    pt_tokens_per_minute: int | None = Field(default=None, description="Bought PT capacity")
    pt_tokens_in_use: float | None = Field(default=None, description="PT tokens per minute taken now")
    pt_in_flight: int | None = None
    pt_concurrency: int | None = None
    first_byte_ms: float | None = Field(default=None, description="Decayed first-byte time (evidence)")
    evidence_score: float | None = Field(
        default=None, description="How the router ranks it among equivalent deployments: lower is better"
    )
    evidence_samples: float | None = Field(default=None, description="Decayed count of attempts behind it")


class ExperimentArmStatus(_Part):
    route_index: int
    models: list[str]
    feedback_count: int = Field(description="Scores the fleet counted for the route, as this process knows")
    feedback_mean: float | None


class ExperimentStatus(_Part):
    """A feature's A/B experiment as one router process sees the fleet's feedback."""

    feature: str
    key: str
    winner_route_index: int | None
    arms: list[ExperimentArmStatus]


class RecentError(_Part):
    at: datetime
    request_id: str
    feature: str
    deployment: str | None
    reason: str
    code: str | None = None
    status: int | None = None


class BudgetHolder(_Part):
    """Tokens one router process holds of a shared budget."""

    process: str = Field(description="Router process (instance.pid)")
    tokens: float = Field(description="Tokens granted to it and not known to be spent")


class BudgetStatus(_Part):
    """One shared budget's ledger as every router process sees it."""

    key: str = Field(description="Ledger key: feature.<name>, key.<digest of the API key>, pt.<deployment>")
    tokens_per_minute: int = Field(description="The budget")
    pool: float = Field(description="Tokens no process holds yet, at the last grant")
    holders: list[BudgetHolder] = Field(description="Processes holding a share, the whole fleet's")


class RouterStatusReply(_Part):
    """`podway.rpc.router.status`: one router process's deployments and its latest errors, and the fleet's
    shared budgets."""

    instance: str = Field(description="Router process that answered")
    deployments: list[DeploymentStatus]
    recent_errors: list[RecentError]
    budgets: list[BudgetStatus] = Field(
        default_factory=list, description="The shared budgets' ledgers, with every process holding a share"
    )
    experiments: list[ExperimentStatus] = Field(default_factory=list)
