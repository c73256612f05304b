"""Readings shared by the benchmarks."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable

import psutil


def cpu_seconds(process: psutil.Process) -> float:
    """User plus system CPU time a process has used so far."""
    times = process.cpu_times()
    return float(times.user + times.system)


def postgres_cpu_seconds() -> float:
    """CPU time of the local PostgreSQL server's processes so far (the benchmark's pools are its clients),
    backends that have exited included: the postmaster reaps them, so their time is its children's. Without
    them the reading falls whenever a connection closes."""
    used = 0.0
    servers = {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"}
    for pid in servers:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            times = process.cpu_times()
            used += float(times.user + times.system)
            if process.ppid() not in servers:  # the postmaster
                used += float(getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0))
    return used


def host_cpu_seconds() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of the whole host so far. Stolen is the time the hypervisor gave to other
    machines: a host losing much of it runs everything slower."""
    host = psutil.cpu_times()
    stolen = float(getattr(host, "steal", 0.0))
    busy = float(sum(host) - host.idle - getattr(host, "iowait", 0.0)) - stolen
    return busy, stolen


def percentile(values: Iterable[float], fraction: float) -> float:
    """The nearest-rank percentile of `values` (`fraction` 0.99 for p99), in any order; 0.0 for none."""
    found = percentile_or_none(values, fraction)
    return 0.0 if found is None else found


def percentile_or_none(values: Iterable[float], fraction: float) -> float | None:
    """`percentile`, None when there are no values (a figure that was not measured)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def scheduling_core() -> str:
    """How the scheduling core runs in this environment (and in the services it starts): see
    `libs.core.scheduling.native`."""
    from libs.core import scheduling

    return scheduling.CORE
