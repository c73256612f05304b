"""Readings shared by the benchmarks."""

from __future__ import annotations

import contextlib

import psutil


def cpu_seconds(process: psutil.Process) -> float:
    """User plus system CPU time a process has used so far."""
    times = process.cpu_times()
    return float(times.user + times.system)


def postgres_cpu_seconds() -> float:
    """CPU time of the local PostgreSQL server's processes so far (the benchmark's pools are its clients)."""
    used = 0.0
    for process in psutil.process_iter(["name"]):
        if process.info["name"] == "postgres":
            with contextlib.suppress(psutil.Error):
                used += cpu_seconds(process)
    return used


def host_cpu_seconds() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of the whole host so far. Stolen is the time the hypervisor gave to other
    machines: a host losing much of it runs everything slower."""
    host = psutil.cpu_times()
    stolen = float(getattr(host, "steal", 0.0))
    busy = float(sum(host) - host.idle - getattr(host, "iowait", 0.0)) - stolen
    return busy, stolen
