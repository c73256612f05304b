"""What callers hand the router and what they get back: the request, each attempt, the result, stream events."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from libs.core.routing import FailureReason, Skip, SpilloverDecision, Tier
from libs.providers import Message, Usage

_IDS = random.Random()  # seeded from the OS once per process


def new_request_id() -> str:
    """A fresh request id: 128 random bits in hex, like a uuid4's. Ids need uniqueness, not secrecy, and
    asking the OS for randomness on every request costs a system call."""
    return f"{_IDS.getrandbits(128):032x}"


@dataclass(frozen=True, slots=True)
class InferRequest:
    """One inference for a product feature. `deadline_ms` can only shorten the feature's own deadline."""

    feature: str
    messages: tuple[Message, ...]
    max_tokens: int = 256
    stream: bool = False
    request_id: str = field(default_factory=new_request_id)
    deadline_ms: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    """Sequences that end the answer where they would begin (they are not part of it)."""
    api_key: str | None = field(default=None, repr=False)
    """The caller's key (the HTTP front's bearer key), whose budget and rate limit apply."""

    @property
    def prompt_chars(self) -> int:
        return sum(len(message.content) for message in self.messages)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call to one deployment: the answer to "why did it fall back?"."""

    deployment: str
    provider: str
    model: str
    tier: Tier
    reason: FailureReason | None
    status: int | None
    code: str | None
    started_ms: float
    elapsed_ms: float
    first_byte_ms: float | None
    dispatch_gap_ms: float | None

    @property
    def succeeded(self) -> bool:
        return self.reason is None


@dataclass(frozen=True, slots=True)
class InferResult:
    """An answered request: what answered, on which capacity, at what cost, and how it got there."""

    request_id: str
    feature: str
    route_index: int
    text: str
    model: str
    deployment: str
    provider: str
    requested_tier: Tier
    served_tier: str
    usage: Usage
    cost: float
    stop_reason: str | None
    latency_ms: float
    first_byte_ms: float
    added_ms: float
    attempts: tuple[Attempt, ...]
    skips: tuple[Skip, ...]
    spillovers: tuple[SpilloverDecision, ...]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of streamed text."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamCompleted:
    """The end of a stream: the whole result (usage, deployment, served tier). Always the last event."""

    result: InferResult


StreamEvent = TextDelta | StreamCompleted
