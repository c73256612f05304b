"""Load shedding for one router process: beyond its in-flight cap, or while its event loop runs late, a sync
request is refused at once with `overloaded`.

Why: the provider SDKs cost ~2 ms of CPU per call and the service's NATS, JSON and audit work about as much
again (bench/router.py `nats_service_cpu_ms_per_request`), so one process tops out at a few hundred requests/s
on one core. Past that, work queues up in the event loop, responses that have arrived wait behind it, and
first-byte timeouts fire from the router's own backlog: every deployment looks slow, every breaker trips, and
a CPU problem becomes an outage. Refusing the excess early keeps the admitted requests inside their SLO, says
plainly that this process is full (callers or a load balancer retry elsewhere), and is not a provider failure,
so no breaker hears of it.

Two signals, because neither is enough alone. The in-flight cap bounds the worst case, every request in flight
needing its CPU at once (a burst of answers after a provider stall): by default to a third of the example
policy's 1.5 s first-byte timeout. One event loop uses at most one core, so more cores do not raise it; a CPU
quota below one core lowers it. But the cap cannot know how busy the host is, nor how long providers take, so
the event loop's own lateness is watched too: when timers run more than `max_lag_s` late on average, the CPU
backlog is already eating into first-byte timeouts, whatever the in-flight count.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

SERVICE_CPU_MS_PER_REQUEST = (
    5.0  # bench/router.py `nats_service_cpu_ms_per_request` on the project's machines
)
BACKLOG_BUDGET_MS = 500.0
MIN_CAP = 8
DEFAULT_MAX_LAG_S = 0.1
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
    return max(MIN_CAP, int(BACKLOG_BUDGET_MS / SERVICE_CPU_MS_PER_REQUEST * share))


class Overloaded(Exception):
    """This router process is shedding load."""

    reason = "overloaded"
    http_status = 503
    retry_after_s = OVERLOAD_RETRY_AFTER_S


class EventLoopLag:
    """How late the event loop runs a timer, smoothed so that one pause (a collection, a lazy import) does not
    shed load but a sustained backlog does; `run()` samples it every `interval_s`."""

    def __init__(self, interval_s: float = 0.02, smoothing: float = 0.1) -> None:
        self.interval_s = interval_s
        self.lag_s = 0.0
        self._smoothing = smoothing

    def record(self, late_s: float) -> None:
        """One sample: how much later than asked a timer ran."""
        self.lag_s += self._smoothing * (max(0.0, late_s) - self.lag_s)

    async def run(self) -> None:
        """Sample until cancelled. A bare timer callback, not a task's sleep: the sampler itself must cost
        next to nothing on an idle loop."""
        loop = asyncio.get_running_loop()
        handle: list[asyncio.TimerHandle] = []

        def sample(asked: float) -> None:
            now = loop.time()
            self.record(now - asked - self.interval_s)
            handle[:] = [loop.call_later(self.interval_s, sample, now)]

        handle.append(loop.call_later(self.interval_s, sample, loop.time()))
        try:
            await asyncio.Event().wait()
        finally:
            handle[0].cancel()


class InFlightCap:
    """Counts requests in flight. Sync requests `admit()` (refused at the cap, or while the loop lags more than
    `max_lag_s`); async work, already bounded by its consumer's concurrency, `hold()` unconditionally so that
    sync requests see the real load."""

    def __init__(
        self, limit: int, *, lag: Callable[[], float] = lambda: 0.0, max_lag_s: float = DEFAULT_MAX_LAG_S
    ) -> None:
        if limit < 1:
            raise ValueError("the in-flight cap must be >= 1")
        self.limit = limit
        self.in_flight = 0
        self.refused = 0
        self._lag = lag
        self._max_lag_s = max_lag_s

    @property
    def sheds_on_lag(self) -> bool:
        """Whether the event loop's lateness can refuse a request."""
        return bool(self._max_lag_s)

    def shedding(self) -> Overloaded | None:
        """Why a sync request arriving now would be refused, if it would."""
        if self.in_flight >= self.limit:
            return Overloaded(f"router at its in-flight cap of {self.limit}; retry shortly")
        if self._max_lag_s and self._lag() > self._max_lag_s:
            return Overloaded(
                f"router CPU-bound (event loop {self._lag() * 1000:.0f} ms late); retry shortly"
            )
        return None

    @contextlib.contextmanager
    def admit(self) -> Iterator[None]:
        """A slot for a sync request, or Overloaded at once."""
        refusal = self.shedding()
        if refusal is not None:
            self.refused += 1
            raise refusal
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
