"""Tracing is off without an endpoint; logs carry the correlation id of their story."""

from __future__ import annotations

import json
import logging

from libs.runtime import tracing
from libs.runtime.logging import JsonFormatter, correlated


def test_tracing_is_off_without_an_endpoint(monkeypatch):
    for variable in (
        "PODWAY_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ):
        monkeypatch.delenv(variable, raising=False)
    assert tracing.configure_tracing("admission") is False
    assert not tracing.tracing_enabled()
    assert tracing.record_published(b'{"correlation_id": "x", "event_id": "y"}') is None


def test_logs_carry_the_correlation_id_of_their_story():
    record = logging.makeLogRecord({"msg": "placed", "levelname": "INFO", "name": "scheduler"})
    with correlated("3f1c"):
        inside = json.loads(JsonFormatter("scheduler").format(record))
    outside = json.loads(JsonFormatter("scheduler").format(record))
    assert inside["correlation_id"] == "3f1c"
    assert "correlation_id" not in outside


def test_a_requests_failover_is_one_trace_of_chained_event_spans():
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracing.configure_tracing("llm_router", processor=SimpleSpanProcessor(exporter))
    try:
        request = "req-7f3a"
        story = [
            ("router.spillover", "e1", None),
            ("router.failover", "e2", "e1"),
            ("inference.completed", "e3", "e2"),
        ]
        headers = []
        for type_, event_id, cause in story:
            envelope = {
                "type": type_,
                "event_id": event_id,
                "causation_id": cause,
                "correlation_id": request,
                "producer": "llm_router",
                "occurred_at": "2026-12-01T10:00:00.000000Z",
            }
            headers.append(tracing.record_published(json.dumps(envelope).encode()))
    finally:
        tracing.disable_tracing()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"router.spillover", "router.failover", "inference.completed"}
    assert {s.context.trace_id for s in spans.values()} == {tracing.trace_id_of(request)}
    assert spans["router.spillover"].parent is None
    assert spans["router.failover"].parent.span_id == spans["router.spillover"].context.span_id
    assert spans["inference.completed"].parent.span_id == spans["router.failover"].context.span_id
    assert headers[2] == {"traceparent": tracing.traceparent(request, "e3")}
    assert headers[2]["traceparent"].split("-")[2] == f"{spans['inference.completed'].context.span_id:016x}"
