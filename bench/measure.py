"""Readings shared by the benchmarks."""

from __future__ import annotations

import psutil


def cpu_seconds(process: psutil.Process) -> float:
    """User plus system CPU time a process has used so far."""
    times = process.cpu_times()
    return float(times.user + times.system)
