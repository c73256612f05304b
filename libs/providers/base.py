"""What every provider adapter takes and returns, and the Protocol the router calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

from libs.core.routing import FailureReason, Tier

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message; `system` messages become the provider's system prompt."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One call to one deployment: the model id (a PT ARN on Bedrock) and the tier decide the wire details."""

    model: str
    tier: Tier
    messages: tuple[Message, ...]
    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the provider reports."""

    input_tokens: int
    output_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole answer. `served_tier` is what the provider says served it (Vertex trafficType, Bedrock
    serviceTier) or else the tier that was asked for; `first_byte_s` is the time to the response."""

    text: str
    usage: Usage
    served_tier: str
    stop_reason: str | None
    first_byte_s: float


@dataclass(frozen=True, slots=True)
class Chunk:
    """A text delta; the last chunk of a stream carries `usage` and `served_tier` (and may have no text)."""

    text: str
    usage: Usage | None = None
    served_tier: str | None = None
    stop_reason: str | None = None


class ProviderError(Exception):
    """A provider failure, normalised: `reason` drives spill/failover/breaker; status and code are kept for
    the audit trail."""

    def __init__(
        self, reason: FailureReason, message: str, *, status: int | None = None, code: str | None = None
    ):
        super().__init__(message)
        self.reason = reason
        self.status = status
        self.code = code

    def __repr__(self) -> str:
        return (
            f"ProviderError({self.reason.value}, status={self.status}, code={self.code!r}, {self.args[0]!r})"
        )


class Provider(Protocol):
    """A cloud's generative API. Retries are off: the router is the only retry loop."""

    name: str

    async def complete(self, request: ProviderRequest) -> Completion:
        """One non-streaming call; raises ProviderError."""
        ...

    def stream(self, request: ProviderRequest) -> AsyncIterator[Chunk]:
        """Text chunks as they arrive, usage on the last; raises ProviderError before or during the stream."""
        ...

    async def aclose(self) -> None:
        """Release pooled connections."""
        ...


def split_system(messages: tuple[Message, ...]) -> tuple[list[str], list[Message]]:
    """System prompts apart from the conversation, as both Converse and generateContent want them."""
    system = [m.content for m in messages if m.role == "system"]
    return system, [m for m in messages if m.role != "system"]
