"""The router's Prometheus metrics, fed from its events."""

from __future__ import annotations

import pytest

from libs.events.catalogue import EventType
from libs.router import EventBuffer, RouterEvent
from services.llm_router.audit import AuditFlusher
from services.llm_router.metrics import RouterMetrics
from tests.unit.router_service.test_audit import FlakyDatabase, completed


def failover(reason: str, code: str | None = None) -> RouterEvent:
    payload = {
        "request_id": "r",
        "feature": "search-answer",
        "from_deployment": "gemini-flash-od",
        "to_deployment": "claude-haiku-pt",
        "reason": reason,
        "code": code,
        "breaker_state": "open",
    }
    return RouterEvent(EventType.ROUTER_FAILOVER, "r", 0.0, payload)


def sample(metrics: RouterMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_failover_past_a_refusal_is_not_counted_as_a_failed_attempt() -> None:
    metrics = RouterMetrics()
    metrics.observe(failover("breaker_open"))
    metrics.observe(failover("unavailable", "ServiceUnavailableException"))
    labels = {"feature": "search-answer", "deployment": "gemini-flash-od"}
    assert sample(metrics, "podway_router_attempt_failures_total", **labels, reason="breaker_open") is None
    assert sample(metrics, "podway_router_attempt_failures_total", **labels, reason="unavailable") == 1.0
    moves = {
        "feature": "search-answer",
        "from_deployment": "gemini-flash-od",
        "to_deployment": "claude-haiku-pt",
    }
    assert sample(metrics, "podway_router_failovers_total", **moves, reason="breaker_open") == 1.0


async def test_audit_events_never_written_are_counted_by_reason() -> None:
    buffer = EventBuffer(max_events=2)
    flusher = AuditFlusher(buffer, FlakyDatabase(), max_pending=1)
    metrics = RouterMetrics()
    metrics.watch(
        dict,
        lambda: 0,
        lambda: len(buffer),
        lambda: {"buffer_full": buffer.dropped, "backlog_full": flusher.dropped},
    )
    for request_id in ("req-1", "req-2", "req-3"):
        buffer(completed(request_id))  # the buffer holds two: req-1 is pushed out
    with pytest.raises(ConnectionError):
        await flusher.flush()  # the database is down and the backlog holds one: req-2 is given up
    assert sample(metrics, "podway_router_audit_dropped_total", reason="buffer_full") == 1.0
    assert sample(metrics, "podway_router_audit_dropped_total", reason="backlog_full") == 1.0
