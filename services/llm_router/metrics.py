"""Prometheus metrics of the router, per feature and deployment, on a registry of its own.

Counters and histograms are fed from the router's events (every path, sync, streamed, async or HTTP, goes
through them); breaker state and the in-flight count are read from the router when scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from libs.core.routing import BreakerSnapshot, BreakerState, SkipReason
from libs.events.catalogue import EventType
from libs.router import RouterEvent
from libs.runtime.http_server import HttpServer
from libs.runtime.metrics import PROCESS_REGISTRY

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0, 60.0)
ADDED_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)
BREAKER_STATE_VALUE = {BreakerState.CLOSED: 0.0, BreakerState.HALF_OPEN: 1.0, BreakerState.OPEN: 2.0}
# Spillover reasons that follow a failed PT attempt (the others skip PT without calling it).
SPILLS_AFTER_A_FAILED_ATTEMPT = {"pt_exhausted", "not_ready", "quota"}
# Failover reasons that passed a deployment over without calling it (its breaker or its capacity refused).
MOVES_WITHOUT_AN_ATTEMPT = {reason.value for reason in SkipReason}
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _LiveState(Collector):
    """Breaker state, ramp fraction, load and audit drops, read at scrape time so they are never stale and
    the request path never updates a metric for them."""

    def __init__(
        self,
        breakers: Callable[[], Mapping[str, BreakerSnapshot]],
        in_flight: Callable[[], int],
        buffered: Callable[[], int],
        dropped: Callable[[], Mapping[str, int]],
    ) -> None:
        self._breakers = breakers
        self._in_flight = in_flight
        self._buffered = buffered
        self._dropped = dropped

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "podway_router_breaker_state",
            "Circuit breaker per deployment: 0 closed, 1 half-open (ramping), 2 open",
            labels=["deployment"],
        )
        ramp = GaugeMetricFamily(
            "podway_router_breaker_ramp_fraction",
            "Share of its traffic a deployment admits (1 when closed, 0 when open)",
            labels=["deployment"],
        )
        for name, snapshot in sorted(self._breakers().items()):
            state.add_metric([name], BREAKER_STATE_VALUE[snapshot.state])
            ramp.add_metric([name], snapshot.ramp_fraction)
        yield state
        yield ramp
        yield GaugeMetricFamily("podway_router_in_flight", "Requests in flight", value=self._in_flight())
        yield GaugeMetricFamily(
            "podway_router_audit_buffered",
            "Audit events waiting for the group commit",
            value=self._buffered(),
        )
        dropped = CounterMetricFamily(
            "podway_router_audit_dropped",
            "Audit events never written: buffer_full (the buffer was full), backlog_full (the database kept "
            "failing and the oldest events waiting for a retry were given up)",
            labels=["reason"],
        )
        for reason, count in sorted(self._dropped().items()):
            dropped.add_metric([reason], count)
        yield dropped


class _HttpState(Collector):
    """The HTTP front's connections and what it refused or cut short, read at scrape time."""

    def __init__(self, server: HttpServer) -> None:
        self._server = server

    def collect(self) -> Iterator[Metric]:
        stats = self._server.stats
        yield GaugeMetricFamily(
            "podway_router_http_connections", "Client connections open", value=len(self._server.connections)
        )
        yield CounterMetricFamily(
            "podway_router_http_connections_refused",
            "Connections refused (503) because the process held its maximum",
            value=stats.refused_connections,
        )
        timeouts = CounterMetricFamily(
            "podway_router_http_read_timeouts",
            "Requests answered 408 and closed: headers or body not received in time",
            labels=["part"],
        )
        timeouts.add_metric(["headers"], stats.header_timeouts)
        timeouts.add_metric(["body"], stats.body_timeouts)
        yield timeouts
        yield CounterMetricFamily(
            "podway_router_http_pipeline_pauses",
            "Times a connection's reading paused because its pipelined requests reached the maximum",
            value=stats.paused_pipelines,
        )


class RouterMetrics:
    """The router's metrics; `observe` is called with every router event."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "podway_router_requests",
            "Answered requests",
            ["feature", "deployment", "served_tier"],
            registry=self.registry,
        )
        self.errors = Counter(
            "podway_router_errors",
            "Requests not answered, by reason (overloaded and budget_exceeded included)",
            ["feature", "reason"],
            registry=self.registry,
        )
        self.attempt_failures = Counter(
            "podway_router_attempt_failures",
            "Failed attempts, by deployment and normalised reason",
            ["feature", "deployment", "reason"],
            registry=self.registry,
        )
        self.spillovers = Counter(
            "podway_router_spillovers",
            "PT to OD spillovers",
            ["feature", "from_deployment", "to_deployment", "reason"],
            registry=self.registry,
        )
        self.failovers = Counter(
            "podway_router_failovers",
            "Moves to another deployment that are not spillovers (after a failed attempt, or past refusals)",
            ["feature", "from_deployment", "to_deployment", "reason"],
            registry=self.registry,
        )
        self.breaker_transitions = Counter(
            "podway_router_breaker_transitions",
            "Breaker state changes",
            ["deployment", "to_state", "reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "podway_router_latency_seconds",
            "Whole request, all attempts",
            ["feature", "deployment"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.first_byte = Histogram(
            "podway_router_first_byte_seconds",
            "Time to the first token (streaming) or to the response",
            ["feature", "deployment"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.added = Histogram(
            "podway_router_added_seconds",
            "The router's own time per answered request (latency minus provider calls)",
            ["feature"],
            buckets=ADDED_BUCKETS,
            registry=self.registry,
        )
        self.audit_flush = Histogram(
            "podway_router_audit_flush_seconds",
            "One group commit of audit events",
            buckets=ADDED_BUCKETS,
            registry=self.registry,
        )
        self._answered: dict[tuple[str, str, str], tuple[Counter, Histogram, Histogram, Histogram]] = {}
        self.audit_events = Counter(
            "podway_router_audit_events", "Audit events group-committed", registry=self.registry
        )

    def watch(
        self,
        breakers: Callable[[], Mapping[str, BreakerSnapshot]],
        in_flight: Callable[[], int],
        buffered: Callable[[], int],
        dropped: Callable[[], Mapping[str, int]],
    ) -> None:
        """Also report these live values at every scrape; `dropped` counts audit events by reason."""
        self.registry.register(_LiveState(breakers, in_flight, buffered, dropped))

    def watch_http(self, server: HttpServer) -> None:
        """Also report the HTTP front's connections, refusals and read timeouts at every scrape."""
        self.registry.register(_HttpState(server))

    def observe(self, event: RouterEvent) -> None:
        """Count one router event."""
        p = event.payload
        if event.type is EventType.INFERENCE_COMPLETED:
            key = (p["feature"], p["deployment"], p["served_tier"])
            answered = self._answered.get(key)
            if answered is None:
                answered = self._answered[key] = self._answered_series(*key)
            requests, latency, first_byte, added = answered
            requests.inc()
            latency.observe(p["latency_ms"] / 1000.0)
            first_byte.observe(p["first_byte_ms"] / 1000.0)
            added.observe(p["added_ms"] / 1000.0)
        elif event.type is EventType.INFERENCE_FAILED:
            self.errors.labels(p["feature"], p["reason"]).inc()
            last = p["attempts"][-1] if p["attempts"] else None
            if last is not None and last["reason"] != "ok":
                self.attempt_failures.labels(p["feature"], last["deployment"], last["reason"]).inc()
        elif event.type is EventType.ROUTER_SPILLOVER:
            self.spillovers.labels(p["feature"], p["from_deployment"], p["to_deployment"], p["reason"]).inc()
            if p["reason"] in SPILLS_AFTER_A_FAILED_ATTEMPT:
                self.attempt_failures.labels(p["feature"], p["from_deployment"], p["reason"]).inc()
        elif event.type is EventType.ROUTER_FAILOVER:
            self.failovers.labels(p["feature"], p["from_deployment"], p["to_deployment"], p["reason"]).inc()
            if p["reason"] not in MOVES_WITHOUT_AN_ATTEMPT:
                self.attempt_failures.labels(p["feature"], p["from_deployment"], p["reason"]).inc()
        elif event.type in (
            EventType.ROUTER_BREAKER_OPENED,
            EventType.ROUTER_BREAKER_HALF_OPENED,
            EventType.ROUTER_BREAKER_CLOSED,
        ):
            self.breaker_transitions.labels(p["deployment"], p["to_state"], p["reason"]).inc()

    def _answered_series(
        self, feature: str, deployment: str, tier: str
    ) -> tuple[Counter, Histogram, Histogram, Histogram]:
        # Looked up once per label set: `labels()` costs a lock and a key build per call, four per request.
        return (
            self.requests.labels(feature, deployment, tier),
            self.latency.labels(feature, deployment),
            self.first_byte.labels(feature, deployment),
            self.added.labels(feature),
        )

    def refused(self, feature: str, reason: str, known_features: Container[str] = ()) -> None:
        """A request refused before the router took it (overloaded, malformed, unauthorised). A feature the
        policy does not know is counted as `-`, so callers cannot grow the label set at will."""
        self.errors.labels(feature if feature in known_features else "-", reason).inc()

    def flushed(self, events: int, seconds: float) -> None:
        """One audit group commit."""
        self.audit_events.inc(events)
        self.audit_flush.observe(seconds)

    def exposition(self) -> bytes:
        """The text format for `/metrics`: the router's metrics and the process's (libs.runtime.metrics)."""
        return generate_latest(self.registry) + generate_latest(PROCESS_REGISTRY)
