"""One gang's story is one trace across admission, the scheduler and the node agent (spans collected in
memory); the metrics every service has count the story's events; logs carry its correlation id."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from libs.runtime import tracing
from libs.runtime.metrics import PROCESS_REGISTRY, serve_metrics
from tests.integration.lifecycle.conftest import stack  # noqa: F401  (the fixture)
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually

pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.configure_tracing("test", processor=SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        tracing.disable_tracing()


@pytest.fixture
def traced_stack(spans: InMemorySpanExporter, stack: Stack) -> Stack:  # noqa: F811
    return stack


def counted(name: str, **labels: str) -> float:
    return sum(
        sample.value
        for metric in PROCESS_REGISTRY.collect()
        for sample in metric.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


async def test_a_gang_cycle_is_one_trace_across_the_services(
    traced_stack: Stack, spans: InMemorySpanExporter
):
    stack = traced_stack  # noqa: F811
    consumed_before = counted("podway_events_consumed_total", type="pods.bound")
    await stack.client.apply(gang("traced", 4, gpus=2))
    running = await eventually(
        lambda: stack.client.get("Pod", namespace=NAMESPACE),
        lambda pods: len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods),
        timeout_s=30,
    )
    assert running
    (group,) = await stack.client.get("PodGroup", "traced", NAMESPACE)
    trace_id = tracing.trace_id_of(group["metadata"]["uid"])

    def story() -> list:
        return [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]

    def complete(found: list) -> bool:
        names = {s.name for s in found}
        return "pods.running" in names and any("handles pods.running" in n for n in names)

    found = await eventually(lambda: _now(story()), complete, timeout_s=20)
    services = {s.attributes["podway.service"] for s in found}
    assert {"admission", "scheduler"} <= services, services
    assert any(str(service).startswith("node-agent") for service in services), services
    events = {s.name: s for s in found if s.kind.name == "PRODUCER"}
    assert {"podgroup.admitted", "pods.bound", "pods.running"} <= set(events)
    ids = {s.context.span_id for s in found}
    handled = [s for s in found if s.kind.name == "CONSUMER"]
    # Every consumer's span hangs under the span of the event it handled, published by another process's
    # relay: the trace context travelled in the message headers.
    assert handled
    assert all(s.parent is not None and s.parent.span_id in ids for s in handled)
    bound = events["pods.bound"]
    assert bound.attributes["podway.service"] == "scheduler"
    assert bound.parent is not None
    assert bound.parent.span_id in ids  # caused by an event of the story

    assert counted("podway_events_consumed_total", type="pods.bound") > consumed_before
    assert counted("podway_relay_published_total") > 0
    server, port = serve_metrics(0)
    try:
        page = await asyncio.to_thread(_fetch, f"http://127.0.0.1:{port}/metrics")
    finally:
        server.shutdown()
    for name in (
        "podway_relay_lag_seconds",
        "podway_dlq_depth",
        "podway_events_consumed_total",
        "podway_leader",
    ):
        assert name in page


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


async def _now(value):
    return value
