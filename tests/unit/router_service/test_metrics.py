"""The router's Prometheus metrics, fed from its events."""

from __future__ import annotations

from libs.events.catalogue import EventType
from libs.routing_engine import RouterEvent
from services.llm_router.metrics import RouterMetrics


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
