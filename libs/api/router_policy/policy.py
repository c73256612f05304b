"""The routing policy: providers, deployments (provider x model x capacity tier), features and breaker settings."""

from __future__ import annotations

import itertools
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class ProviderKind(StrEnum):
    """Which cloud API a provider speaks."""

    BEDROCK = "bedrock"
    VERTEX = "vertex"


class Tier(StrEnum):
    """The capacity tier of a deployment: bought throughput or the shared pay-as-you-go pool."""

    PROVISIONED = "provisioned"
    ON_DEMAND = "on_demand"


class LatencyClass(StrEnum):
    """Sync features run on provisioned throughput first; async features go straight to on-demand."""

    SYNC = "sync"
    ASYNC = "async"


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProviderSpec(_Spec):
    """One cloud account/region; endpoints are null for the real cloud and set for the emulators."""

    kind: ProviderKind
    region: str | None = Field(default=None, description="Bedrock region")
    endpoint_url: str | None = Field(default=None, description="Bedrock endpoint override (emulator)")
    project: str | None = Field(default=None, description="Vertex project")
    location: str | None = Field(default=None, description="Vertex location")
    api_endpoint: str | None = Field(default=None, description="Vertex endpoint override (emulator)")

    @model_validator(mode="after")
    def _kind_fields(self) -> Self:
        if self.kind is ProviderKind.BEDROCK and not self.region:
            raise ValueError("region: required for kind bedrock")
        if self.kind is ProviderKind.VERTEX:
            for field in ("project", "location"):
                if not getattr(self, field):
                    raise ValueError(f"{field}: required for kind vertex")
        return self


class Capacity(_Spec):
    """What was bought for a provisioned deployment."""

    tokens_per_minute: int = Field(gt=0)
    concurrency: int | None = Field(default=None, gt=0)


class Cost(_Spec):
    """Price per 1000 tokens, in the account currency."""

    input_per_1k: float = Field(default=0.0, ge=0)
    output_per_1k: float = Field(default=0.0, ge=0)

    def of(self, input_tokens: int, output_tokens: int) -> float:
        """The price of one call."""
        return (input_tokens * self.input_per_1k + output_tokens * self.output_per_1k) / 1000.0


class Deployment(_Spec):
    """A provider x model x capacity tier; for Bedrock PT the model is the provisioned-model ARN."""

    provider: str
    model: str = Field(min_length=1)
    tier: Tier
    capacity: Capacity | None = None
    cost: Cost = Cost()


class Route(_Spec):
    """One arm of a feature's A/B split: a weight and an ordered chain of model names."""

    weight: float = Field(gt=0)
    models: tuple[str, ...] = Field(min_length=1)


class Budget(_Spec):
    """A feature's token allowance; beyond it callers get 429."""

    tokens_per_minute: int = Field(gt=0)


class Experiment(_Spec):
    """How a feature's A/B split may end by evidence: once the feedback scores show one route better than
    every other at `confidence`, with at least `min_feedback` scores on each, all traffic goes to it."""

    confidence: float = Field(default=0.95, gt=0, lt=1)
    min_feedback: int = Field(default=100, ge=1)


class Feature(_Spec):
    """A product feature: latency class, time limits and its ranked model chains."""

    latency: LatencyClass
    deadline_ms: int = Field(gt=0)
    first_byte_timeout_ms: int | None = Field(default=None, gt=0)
    routes: tuple[Route, ...] = Field(min_length=1)
    experiment: Experiment | None = Field(
        default=None,
        description="End the A/B split by evidence (feedback scores); without it the weights hold for ever",
    )
    budget: Budget | None = None
    record_prompts: bool = Field(
        default=False,
        description="Keep each request's messages in its audit events (they may hold personal data); off by default",
    )

    @model_validator(mode="after")
    def _experiment_arms(self) -> Self:
        firsts = [route.models[0] for route in self.routes]
        if self.experiment is not None and (len(firsts) < 2 or len(set(firsts)) != len(firsts)):
            raise ValueError(
                "experiment: needs two or more routes, each starting with a different model (feedback counts "
                "for the route whose first model gave the answer)"
            )
        return self


class BreakerSettings(_Spec):
    """Thresholds of the per-deployment circuit breaker (docs/router.md)."""

    window_s: float = Field(default=10.0, gt=0)
    min_requests: int = Field(default=20, ge=1)
    error_rate: float = Field(default=0.5, gt=0, le=1)
    consecutive_failures: int = Field(default=5, ge=1)
    latency_p90_ms: float = Field(default=1000.0, gt=0)
    open_s: float = Field(default=5.0, gt=0)
    open_s_max: float = Field(default=60.0, gt=0)
    ramp: tuple[float, ...] = Field(default=(0.01, 0.05, 0.25, 1.0), min_length=1)
    ramp_step_s: float = Field(default=2.0, ge=0)
    ramp_min_requests: int = Field(default=20, ge=0)

    @field_validator("ramp")
    @classmethod
    def _ramp_increases_to_one(cls, ramp: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0 < step <= 1 for step in ramp):
            raise ValueError("every step must be in (0, 1]")
        if any(b <= a for a, b in itertools.pairwise(ramp)):
            raise ValueError("steps must increase")
        if ramp[-1] != 1.0:
            raise ValueError("the last step must be 1.0")
        return ramp

    @model_validator(mode="after")
    def _open_bounds(self) -> Self:
        if self.open_s_max < self.open_s:
            raise ValueError("open_s_max: must be >= open_s")
        return self


class RateLimit(_Spec):
    """A caller's request allowance; beyond it callers get 429."""

    requests_per_minute: int = Field(gt=0)


class ApiKey(_Spec):
    """A caller of the OpenAI-compatible front, the features it may use, and its own allowances (shared by every
    router process, as feature budgets are)."""

    features: tuple[str, ...] = Field(min_length=1)
    budget: Budget | None = None
    rate_limit: RateLimit | None = None


class RoutingPolicy(_Spec):
    """The whole policy document."""

    providers: dict[str, ProviderSpec] = Field(min_length=1)
    deployments: dict[str, Deployment] = Field(min_length=1)
    features: dict[str, Feature] = Field(min_length=1)
    models: dict[str, tuple[str, ...]] = Field(min_length=1)
    breaker: BreakerSettings = BreakerSettings()
    api_keys: dict[str, ApiKey] = Field(default_factory=dict)
