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
