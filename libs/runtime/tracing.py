"""OpenTelemetry tracing of the event stream: one trace per story (a gang's cycle, an inference request).

A story's events share a correlation id (the PodGroup's uid, the request id), so its trace id is derived
from it, and every event is a span whose id is derived from its event id: the span of the process that
emitted it, from when it happened until its relay published it, child of the event that caused it
(`causation_id`) when that event belongs to the same story. The relay puts the event's span context in the
message's `traceparent` header (W3C trace context), and a consumer's handling of it is a span under it. So
admission's `podgroup.admitted`, the scheduler's `pods.bound` and the node agent's `pods.running` join one
trace across processes, with no column or field added to the outbox or the envelope.

Off unless an OTLP endpoint is configured (`PODWAY_OTLP_ENDPOINT`, or the standard
`OTEL_EXPORTER_OTLP_ENDPOINT`): the relay then adds no header and consumers open no span.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # OpenTelemetry is imported when tracing is configured: a process without it pays nothing
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter

TRACEPARENT = "traceparent"
_ENDPOINT_VARIABLES = (
    "PODWAY_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)
_next_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("_next_ids", default=None)
_state: dict[str, Any] = {"tracer": None, "service": "podway", "provider": None}


def _story_ids() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class StoryIds(RandomIdGenerator):
        """Random ids, except for an event's span: the ids derived from its story and its event id."""

        def generate_span_id(self) -> int:
            ids = _next_ids.get()
            return ids[1] if ids else super().generate_span_id()

        def generate_trace_id(self) -> int:
            ids = _next_ids.get()
            return ids[0] if ids else super().generate_trace_id()

    return StoryIds()


def trace_id_of(correlation_id: str) -> int:
    """A story's trace id: its correlation id when that is a UUID (PodGroup uids are), else a hash of it."""
    with contextlib.suppress(ValueError):
        return uuid.UUID(correlation_id).int or 1
    return int.from_bytes(hashlib.sha256(correlation_id.encode()).digest()[:16], "big") or 1


def span_id_of(event_id: str) -> int:
    """An event's span id: 64 bits of a hash of its event id (never 0)."""
    return int.from_bytes(hashlib.sha256(str(event_id).encode()).digest()[:8], "big") or 1


def traceparent(correlation_id: str, event_id: str) -> str:
    return f"00-{trace_id_of(correlation_id):032x}-{span_id_of(event_id):016x}-01"


def configure_tracing(
    service: str,
    *,
    endpoint: str | None = None,
    exporter: SpanExporter | None = None,
    processor: SpanProcessor | None = None,
) -> bool:
    """Trace this process as `service` when an OTLP endpoint is set (argument or environment) or an exporter or
    processor is given (tests: an in-memory exporter); returns whether tracing is on."""
    endpoint = endpoint or next((os.environ[v] for v in _ENDPOINT_VARIABLES if os.environ.get(v)), None)
    if processor is None and exporter is None and endpoint is None:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if processor is None:
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            url = endpoint.rstrip("/") if endpoint else ""
            exporter = OTLPSpanExporter(endpoint=url if url.endswith("/v1/traces") else f"{url}/v1/traces")
        processor = BatchSpanProcessor(exporter)
    provider = TracerProvider(resource=Resource.create({"service.name": service}), id_generator=_story_ids())
    provider.add_span_processor(processor)
    _state.update(tracer=provider.get_tracer("podway"), service=service, provider=provider)
    return True


def disable_tracing() -> None:
    provider = _state.get("provider")
    if provider is not None:
        provider.shutdown()
    _state.update(tracer=None, provider=None)


def tracing_enabled() -> bool:
    return _state["tracer"] is not None


def _remote(correlation_id: str, event_id: str) -> Context:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    context = SpanContext(
        trace_id=trace_id_of(correlation_id),
        span_id=span_id_of(event_id),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(context))


def _nanos(when: datetime | str | None) -> int | None:
    if when is None:
        return None
    moment = datetime.fromisoformat(when.replace("Z", "+00:00")) if isinstance(when, str) else when
    return int(moment.timestamp() * 1e9)


def record_published(data: bytes) -> dict[str, str] | None:
    """For an event the relay has just published (its envelope's JSON): record the event's span and return
    the `traceparent` header to send with it; None when tracing is off or the event is unreadable."""
    tracer = _state["tracer"]
    if tracer is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    try:
        envelope = json.loads(data)
        correlation, event_id = str(envelope["correlation_id"]), str(envelope["event_id"])
    except (ValueError, KeyError, TypeError):
        return None
    cause = envelope.get("causation_id")
    subject = envelope.get("subject") or {}
    attributes = {
        "podway.service": str(envelope.get("producer", _state["service"])),
        "podway.event_type": str(envelope.get("type")),
        "podway.correlation_id": correlation,
        "podway.subject": "/".join(
            str(p) for p in (subject.get("kind"), subject.get("namespace"), subject.get("name")) if p
        ),
    }
    _remember(event_id, correlation)
    parent = _remote(correlation, str(cause)) if cause and _same_story(cause, correlation) else None
    token = _next_ids.set((trace_id_of(correlation), span_id_of(event_id)))
    try:
        span = tracer.start_span(
            str(envelope.get("type")),
            context=parent if parent is not None else trace.set_span_in_context(trace.INVALID_SPAN),
            kind=SpanKind.PRODUCER,
            attributes=attributes,
            start_time=_nanos(envelope.get("occurred_at")),
        )
    finally:
        _next_ids.reset(token)
    span.end()
    return {TRACEPARENT: traceparent(correlation, event_id)}


# Causes known to belong to a story: an event is published after the event that caused it, by the same relay
# or another, so the cause of an event of story S is in S if it was published as part of S by this process,
# or it arrived with S's trace id. Kept small: only the latest events are needed.
_STORY_OF: dict[str, str] = {}
_STORY_OF_LIMIT = 100_000


def _same_story(cause: str, correlation: str) -> bool:
    return _STORY_OF.get(str(cause), correlation) == correlation


def _remember(event_id: str, correlation: str) -> None:
    if len(_STORY_OF) >= _STORY_OF_LIMIT:
        _STORY_OF.clear()
    _STORY_OF[event_id] = correlation


@contextlib.contextmanager
def consuming(
    consumer: str, event_type: str, event_id: str, correlation_id: str, headers: Mapping[str, str] | None
) -> Iterator[None]:
    """A span for `consumer` handling one event, under the event's span (from its `traceparent` header)."""
    tracer = _state["tracer"]
    if tracer is None:
        yield
        return
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind

    _remember(event_id, correlation_id)
    header = (headers or {}).get(TRACEPARENT)
    context = _from_header(header) if header else _remote(correlation_id, event_id)
    links = [] if header else [Link(trace.get_current_span(context).get_span_context())]
    with tracer.start_as_current_span(
        f"{consumer} handles {event_type}",
        context=context,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={
            "podway.service": consumer,
            "podway.event_type": event_type,
            "podway.correlation_id": correlation_id,
        },
    ):
        yield


def _from_header(header: str) -> Context:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    try:
        _, trace_hex, span_hex, flags = header.split("-")
        context = SpanContext(
            trace_id=int(trace_hex, 16),
            span_id=int(span_hex, 16),
            is_remote=True,
            trace_flags=TraceFlags(int(flags, 16)),
        )
    except ValueError:
        return trace.set_span_in_context(trace.INVALID_SPAN)
    return trace.set_span_in_context(NonRecordingSpan(context))
