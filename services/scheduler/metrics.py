"""Prometheus metrics of the scheduler, on a registry of its own (two replicas may share a test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from libs.runtime.metrics import serve_metrics

CYCLE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.cycle_seconds = Histogram(
            "podway_scheduler_cycle_seconds",
            "Time inside one PodGroup scheduling cycle, by result",
            ["result"],
            buckets=CYCLE_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "podway_scheduler_queue_depth", "PodGroups in the scheduling queue", registry=self.registry
        )
        self.pods_bound = Counter(
            "podway_scheduler_pods_bound", "Pods bound to nodes", registry=self.registry
        )
        self.leader = Gauge(
            "podway_scheduler_leader",
            "1 while this replica holds the scheduler lease",
            registry=self.registry,
        )
        self._server: object | None = None

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Expose these metrics and the process's (libs.runtime.metrics) on host:`port` (0 picks a free
        port); returns the port."""
        server, bound = serve_metrics(port, host, self.registry)
        self._server = server
        return bound

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()  # type: ignore[attr-defined]
            self._server.server_close()  # type: ignore[attr-defined]
            self._server = None
