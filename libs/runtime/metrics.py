"""Prometheus metrics every service has without code of its own: events consumed and dead-lettered, the outbox
relay's backlog and lag, the dead-letter stream's depth, RPCs served, leased services' leadership and passes.

They live on one registry per process (`PROCESS_REGISTRY`); `run_service` serves it (with the service's own
`metrics_registry`, if it has one) on `PODWAY_METRICS_PORT` and reports the port in the service's health beat
(`metrics_port`) and its first log line. The scheduler and the router serve their own registries and add this
one to them.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PROCESS_REGISTRY = CollectorRegistry()

EVENTS_CONSUMED = Counter(
    "podway_events_consumed_total",
    "Events a durable consumer settled, by consumer, event type and outcome "
    "(Processed, Duplicate, Retrying, DeadLettered)",
    ["consumer", "type", "outcome"],
    registry=PROCESS_REGISTRY,
)
EVENTS_DEAD_LETTERED = Counter(
    "podway_events_dead_lettered_total",
    "Events a consumer sent to the dead-letter stream, by reason",
    ["consumer", "reason"],
    registry=PROCESS_REGISTRY,
)
DLQ_DEPTH = Gauge(
    "podway_dlq_depth",
    "Messages in the dead-letter stream (PODWAY_DLQ), read by each consumer every 15 s",
    registry=PROCESS_REGISTRY,
)
RELAY_PUBLISHED = Counter(
    "podway_relay_published_total",
    "Events the outbox relay of this process published and JetStream acknowledged",
    registry=PROCESS_REGISTRY,
)
RELAY_FAILED = Counter(
    "podway_relay_publish_failures_total",
    "Publishes of the outbox relay that failed (retried by a later pass)",
    registry=PROCESS_REGISTRY,
)
RPC_SECONDS = Histogram(
    "podway_rpc_seconds",
    "Time to answer a request on podway.rpc.*, by subject and outcome (ok, error)",
    ["subject", "outcome"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
    registry=PROCESS_REGISTRY,
)
LEADER = Gauge(
    "podway_leader",
    "1 while this replica of a leased service (scheduler, preemptor, DRA allocator) holds its lease",
    ["service"],
    registry=PROCESS_REGISTRY,
)
PASS_SECONDS = Histogram(
    "podway_pass_seconds",
    "Time a leased service took to write one pass (its decisions and the lease renewal, one transaction)",
    ["service"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=PROCESS_REGISTRY,
)


class RelayBacklog(Protocol):
    def backlog(self) -> tuple[int, float | None]:
        """(events committed and not yet acknowledged, wall time the oldest of them was committed)."""
        ...


class _RelayState(Collector):
    """The relays' backlog and lag, read when scraped (the relay's hot path updates nothing)."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.relays: weakref.WeakSet[Any] = weakref.WeakSet()
        self.now = now

    def collect(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily(
            "podway_relay_pending", "Events committed by this process and not yet published by its relay"
        )
        lag = GaugeMetricFamily(
            "podway_relay_lag_seconds",
            "Age of the oldest event this process committed and its relay has not yet published (0: none)",
        )
        waiting, oldest = 0, None
        for relay in list(self.relays):
            count, since = relay.backlog()
            waiting += count
            if since is not None:
                oldest = since if oldest is None else min(oldest, since)
        pending.add_metric([], waiting)
        lag.add_metric([], max(0.0, self.now() - oldest) if oldest is not None else 0.0)
        yield pending
        yield lag


RELAYS = _RelayState()
PROCESS_REGISTRY.register(RELAYS)


class _ListStores(Collector):
    """How many objects the stores that lists read from hold (admission's kept documents, the API server's
    decoded objects): what their memory grows with, read when scraped."""

    def __init__(self) -> None:
        self.stores: dict[str, weakref.WeakSet[Any]] = {}

    def track(self, name: str, store: Any) -> None:
        """Report `store` (anything with a length) as `name`, as long as it lives."""
        self.stores.setdefault(name, weakref.WeakSet()).add(store)

    def collect(self) -> Iterator[Metric]:
        kept = GaugeMetricFamily(
            "podway_list_store_objects",
            "Objects a store that lists read from holds in this process, by store (admission: documents "
            "kept; api_server: objects decoded)",
            labels=["store"],
        )
        for name, stores in sorted(self.stores.items()):
            kept.add_metric([name], sum(len(store) for store in list(stores)))
        yield kept


LIST_STORES = _ListStores()
PROCESS_REGISTRY.register(LIST_STORES)


class Merged(Collector):
    """Several registries served as one."""

    def __init__(self, registries: Iterable[CollectorRegistry]) -> None:
        self.registries = list(registries)

    def collect(self) -> Iterator[Metric]:
        for registry in self.registries:
            yield from registry.collect()


def serve_metrics(port: int, host: str = "127.0.0.1", *extra: CollectorRegistry) -> tuple[Any, int]:
    """Serve the process registry and `extra` on host:port (0 picks a free port); returns (server, port)."""
    registry = Merged([PROCESS_REGISTRY, *extra])
    server, _ = start_http_server(port, addr=host, registry=registry)
    return server, int(server.server_port)
