"""The in-flight cap of one router process: beyond it a request is refused at once with `overloaded`.

Why: the provider SDKs cost ~2 ms of CPU per call (botocore, google-api-core), so one process tops out near
450 requests/s on one core. Past that, work queues up in the event loop, responses that have arrived wait
behind it, and first-byte timeouts fire from the router's own backlog: every deployment looks slow, every
breaker trips, and a CPU problem becomes an outage. Refusing the excess early keeps the admitted requests
inside their SLO, says plainly that this process is full (callers or a load balancer retry elsewhere), and is
not a provider failure, so no breaker hears of it.

The default bounds the worst-case CPU backlog (every request in flight needing its CPU at once) to a third of
the example policy's 1.5 s first-byte timeout. One event loop uses at most one core, so more cores do not raise
it; a CPU quota below one core lowers it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

SDK_CPU_MS_PER_REQUEST = 2.0  # bench/router.py `router_cpu_ms_per_request` on the project's machines
BACKLOG_BUDGET_MS = 500.0
MIN_CAP = 8
OVERLOAD_RETRY_AFTER_S = 1.0
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> float:
    """CPUs this process may use: its affinity, lowered by a cgroup v2 quota if there is one."""
    cpus = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    try:
        quota, period = cpu_max.read_text().split()
    except (OSError, ValueError):
        return cpus
    if quota == "max":
        return cpus
    return min(cpus, int(quota) / int(period))


def default_max_in_flight(cpus: float | None = None) -> int:
    """The cap for this machine (see the module docstring)."""
    share = min(1.0, usable_cpus() if cpus is None else cpus)
    return max(MIN_CAP, int(BACKLOG_BUDGET_MS / SDK_CPU_MS_PER_REQUEST * share))


class Overloaded(Exception):
    """This router process is at its in-flight cap."""

    reason = "overloaded"
    http_status = 503
    retry_after_s = OVERLOAD_RETRY_AFTER_S


class InFlightCap:
    """Counts requests in flight. Sync requests `admit()` (refused at the cap); async work, already bounded by
    its consumer's concurrency, `hold()` unconditionally so that sync requests see the real load."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the in-flight cap must be >= 1")
        self.limit = limit
        self.in_flight = 0
        self.refused = 0

    @contextlib.contextmanager
    def admit(self) -> Iterator[None]:
        """A slot for a sync request, or Overloaded at once."""
        if self.in_flight >= self.limit:
            self.refused += 1
            raise Overloaded(f"router at its in-flight cap of {self.limit}; retry shortly")
        with self.hold():
            yield

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Count a request that was admitted by other means."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
