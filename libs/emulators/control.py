"""The knobs of one cloud emulator and the decisions they drive: capacity pools, latency, injected errors,
outages, mid-stream failures and counters, and the latest requests as received (so a test sees what reached the
provider). Time comes from an injectable clock so capacity windows can be driven by tests.

Pools are `provisioned` and `on_demand`; a model without a configured limit in a pool has unlimited room there.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RECEIVED_REQUESTS = 64
Pool = Literal["provisioned", "on_demand"]
PROVISIONED: Pool = "provisioned"
ON_DEMAND: Pool = "on_demand"


class _Knob(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CapacityKnob(_Knob):
    """Capacity of one model in one pool (token rate, request rate, concurrency); all null removes the limit."""

    model: str
    pool: Pool
    tokens_per_minute: float | None = Field(default=None, gt=0)
    requests_per_second: float | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, ge=0)


class LatencyKnob(_Knob):
    """Time to first token and per further output token, plus uniform jitter; model null = every model."""

    model: str | None = None
    ttft_ms: float = Field(default=0.0, ge=0)
    per_token_ms: float = Field(default=0.0, ge=0)
    jitter_ms: float = Field(default=0.0, ge=0)


class ErrorKnob(_Knob):
    """Answer `status`/`code` to the next `count` requests, or to a `rate` share of them (neither: every
    request until reset)."""

    status: int = Field(ge=400, le=599)
    code: str
    message: str | None = None
    model: str | None = None
    count: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0, le=1)


class OutageKnob(_Knob):
    """A full outage (503) from `start_in_s` for `duration_s` (null = until cleared)."""

    model: str | None = None
    start_in_s: float = Field(default=0.0, ge=0)
    duration_s: float | None = Field(default=None, gt=0)


class MidStreamKnob(_Knob):
    """Break the next `count` streams after `after_chunks` text chunks (0 = before any text)."""

    model: str | None = None
    after_chunks: int = Field(default=1, ge=0)
    count: int = Field(default=1, ge=1)
    code: str | None = None


class OutputKnob(_Knob):
    """How many output tokens each answer has (capped by the request's maximum)."""

    tokens: int = Field(ge=1)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An error to answer instead of serving; `kind` lets each cloud word it its own way."""

    status: int
    code: str | None
    message: str
    kind: Literal["capacity", "injected", "outage", "invalid"]
    pool: Pool | None = None


class _Bucket:
    """Refills at `per_second` up to `size`; emulator time comes from the control's clock."""

    __slots__ = ("level", "per_second", "size", "updated_at")

    def __init__(self, size: float, per_second: float, now: float) -> None:
        self.size = size
        self.per_second = per_second
        self.level = size
        self.updated_at = now

    def has(self, amount: float, now: float) -> bool:
        self.level = min(self.size, self.level + (now - self.updated_at) * self.per_second)
        self.updated_at = now
        return self.level >= amount


class _Limit:
    __slots__ = ("concurrency", "in_flight", "requests", "tokens")

    def __init__(self, knob: CapacityKnob, now: float) -> None:
        tpm, rps = knob.tokens_per_minute, knob.requests_per_second
        self.tokens = _Bucket(tpm, tpm / 60.0, now) if tpm is not None else None
        self.requests = _Bucket(rps, rps, now) if rps is not None else None
        self.concurrency = knob.concurrency
        self.in_flight = 0

    def try_acquire(self, tokens: int, now: float) -> bool:
        if self.concurrency is not None and self.in_flight >= self.concurrency:
            return False
        if self.tokens is not None and not self.tokens.has(tokens, now):
            return False
        if self.requests is not None and not self.requests.has(1, now):
            return False
        if self.tokens is not None:
            self.tokens.level -= tokens
        if self.requests is not None:
            self.requests.level -= 1
        self.in_flight += 1
        return True


@dataclass(slots=True)
class Grant:
    """Capacity held for one request in one pool; release it when the answer is complete."""

    pool: Pool
    limit: _Limit | None
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            if self.limit is not None:
                self.limit.in_flight -= 1


@dataclass(slots=True)
class _Injection:
    knob: ErrorKnob
    remaining: int | None


@dataclass(slots=True)
class _Outage:
    model: str | None
    start: float
    end: float | None


@dataclass(slots=True)
class _MidStream:
    knob: MidStreamKnob
    remaining: int


@dataclass(slots=True)
class _Stats:
    per_model: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, model: str, key: str, amount: int = 1) -> None:
        self.per_model[model][key] += amount

    def as_dict(self) -> dict[str, Any]:
        total: Counter[str] = Counter()
        for counts in self.per_model.values():
            total.update(counts)
        return {"total": dict(total), "models": {m: dict(c) for m, c in self.per_model.items()}}


class EmulatorControl:
    """Knobs and counters of one emulated cloud (the Python API; the control endpoints call the same)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, seed: int = 0) -> None:
        self.clock = clock
        self._rng = random.Random(seed)
        self.reset()

    def reset(self) -> None:
        """Back to unlimited capacity, no latency, no faults, zero counters."""
        self._limits: dict[tuple[str, Pool], _Limit] = {}
        self._latency: dict[str | None, LatencyKnob] = {None: LatencyKnob()}
        self._injections: list[_Injection] = []
        self._outages: list[_Outage] = []
        self._mid_streams: list[_MidStream] = []
        self.output_tokens = 8
        self._stats = _Stats()
        self._received: deque[tuple[str, dict[str, Any]]] = deque(maxlen=RECEIVED_REQUESTS)

    # Knobs -----------------------------------------------------------------------------------------------

    def set_capacity(self, model: str, pool: Pool, **limits: Any) -> None:
        """Limit `model` in `pool` (tokens_per_minute, requests_per_second, concurrency); none removes the limit."""
        knob = CapacityKnob(model=model, pool=pool, **limits)
        if knob.tokens_per_minute is None and knob.requests_per_second is None and knob.concurrency is None:
            self._limits.pop((model, pool), None)
        else:
            self._limits[(model, pool)] = _Limit(knob, self.clock())

    def set_latency(self, model: str | None = None, **profile: Any) -> None:
        """Latency profile for `model` (None = the default for every model)."""
        self._latency[model] = LatencyKnob(model=model, **profile)

    def inject_error(self, status: int, code: str, **options: Any) -> None:
        """Answer an error for the next `count` requests or a `rate` share of them (see ErrorKnob)."""
        knob = ErrorKnob(status=status, code=code, **options)
        self._injections.append(_Injection(knob, knob.count if knob.rate is None else None))

    def start_outage(self, model: str | None = None, **window: Any) -> None:
        """A full outage window (see OutageKnob)."""
        knob = OutageKnob(model=model, **window)
        start = self.clock() + knob.start_in_s
        end = None if knob.duration_s is None else start + knob.duration_s
        self._outages.append(_Outage(model, start, end))

    def end_outage(self, model: str | None = None) -> None:
        """End the outages of `model` (None = all outages)."""
        self._outages = [o for o in self._outages if model is not None and o.model != model]

    def fail_mid_stream(self, model: str | None = None, **options: Any) -> None:
        """Break the next streams part-way (see MidStreamKnob)."""
        knob = MidStreamKnob(model=model, **options)
        self._mid_streams.append(_MidStream(knob, knob.count))

    def set_output_tokens(self, tokens: int) -> None:
        """Output tokens per answer."""
        self.output_tokens = OutputKnob(tokens=tokens).tokens

    def counters(self) -> dict[str, Any]:
        """Request and outcome counts, in total and per model."""
        return self._stats.as_dict()

    def receive(self, model: str, body: dict[str, Any]) -> None:
        """Keep a request body as it arrived (the latest few)."""
        self._received.append((model, body))

    def requests(self, model: str | None = None) -> list[dict[str, Any]]:
        """The latest request bodies received, oldest first, for `model` (None = every model)."""
        return [body for received, body in self._received if model in (None, received)]

    # Decisions -------------------------------------------------------------------------------------------

    def admit(self, model: str, pools: tuple[Pool, ...], tokens: int) -> Grant | Refusal:
        """Serve from the first pool with room, or refuse (outage, injected error, or no capacity)."""
        self._stats.add(model, "requests")
        refusal = self._outage(model) or self._injected(model)
        if refusal is not None:
            self._stats.add(model, refusal.kind)
            return refusal
        now = self.clock()
        for pool in pools:
            limit = self._limits.get((model, pool))
            if limit is None or limit.try_acquire(tokens, now):
                self._stats.add(model, f"served_{pool}")
                return Grant(pool, limit)
        self._stats.add(model, f"throttled_{pools[-1]}")
        return Refusal(429, None, "capacity exceeded", "capacity", pools[-1])

    def count(self, model: str, key: str) -> None:
        """Count a server-side outcome (e.g. `ok`, `invalid`, `mid_stream_failures`)."""
        self._stats.add(model, key)

    def delays(self, model: str, output_tokens: int) -> tuple[float, float]:
        """Seconds to the first token, and between later tokens, for one answer."""
        knob = self._latency.get(model) or self._latency[None]
        jitter = self._rng.uniform(0, knob.jitter_ms) if knob.jitter_ms else 0.0
        return (knob.ttft_ms + jitter) / 1000.0, knob.per_token_ms / 1000.0 if output_tokens > 1 else 0.0

    def mid_stream_failure(self, model: str) -> MidStreamKnob | None:
        """The mid-stream failure to apply to this stream, if one is armed."""
        for armed in self._mid_streams:
            if armed.knob.model in (None, model) and armed.remaining > 0:
                armed.remaining -= 1
                self._stats.add(model, "mid_stream_failures")
                return armed.knob
        return None

    def _outage(self, model: str) -> Refusal | None:
        now = self.clock()
        for outage in self._outages:
            if (
                outage.model in (None, model)
                and outage.start <= now
                and (outage.end is None or now < outage.end)
            ):
                return Refusal(503, None, "service unavailable (emulated outage)", "outage")
        return None

    def _injected(self, model: str) -> Refusal | None:
        for injection in self._injections:
            knob = injection.knob
            if knob.model not in (None, model):
                continue
            if injection.remaining is not None:
                if injection.remaining <= 0:
                    continue
                injection.remaining -= 1
            elif knob.rate is not None and self._rng.random() >= knob.rate:
                continue
            return Refusal(knob.status, knob.code, knob.message or f"injected {knob.code}", "injected")
        return None


def input_tokens(texts: list[str]) -> int:
    """Emulated prompt tokens: ~4 characters per token."""
    return max(1, math.ceil(sum(len(t) for t in texts) / 4))


WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


def answer_tokens(count: int) -> list[str]:
    """Deterministic output text, one word per token."""
    return [WORDS[i % len(WORDS)] + " " for i in range(count)]


def stopped_answer(count: int, stop_sequences: Sequence[str]) -> tuple[list[str], bool]:
    """The answer's tokens cut where the first stop sequence begins (the sequence is left out, as the real models
    do), and whether one cut it."""
    tokens = answer_tokens(count)
    text = "".join(tokens)
    cut = min((at for sequence in stop_sequences if (at := text.find(sequence)) >= 0), default=-1)
    if cut < 0:
        return tokens, False
    kept: list[str] = []
    length = 0
    for token in tokens:
        if length + len(token) >= cut:
            if cut > length:
                kept.append(token[: cut - length])
            break
        kept.append(token)
        length += len(token)
    return kept, True


def stop_sequences(config: dict[str, Any], field: str, most: int) -> list[str]:
    """The stop sequences of a request's generation config: at most `most` non-empty strings (ValueError)."""
    sequences = config.get(field, [])
    if (
        not isinstance(sequences, list)
        or len(sequences) > most
        or not all(isinstance(s, str) and s for s in sequences)
    ):
        raise ValueError(f"{field} must be a list of at most {most} non-empty strings")
    return sequences


def unit_fraction(config: dict[str, Any], field: str) -> None:
    """A field that must be a number from 0 to 1 when present (ValueError)."""
    value = config.get(field)
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
    ):
        raise ValueError(f"{field} must be a number from 0 to 1")
