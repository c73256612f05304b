"""Readings shared by the benchmarks."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

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


class DiskSyncProbe:
    """How long the host's disk takes to make a small write durable while a phase runs: a thread writes 4 kB
    to a file in `directory` and `fdatasync`s it every `interval_s`. A database commit waits for the same
    disk (when `directory` is on the database's), so a stall here is one every commit met."""

    def __init__(self, directory: Path, interval_s: float = 0.01) -> None:
        self._path = directory / "disk-sync-probe"
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="disk-sync-probe", daemon=True)
        self._descriptor = -1
        self.syncs: list[tuple[float, float]] = []
        """(when it ended, perf_counter seconds; how long it took, ms)."""

    def __enter__(self) -> DiskSyncProbe:
        self._descriptor = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o600)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self._descriptor)
        with contextlib.suppress(OSError):
            self._path.unlink()

    def sync_once(self) -> None:
        os.pwrite(self._descriptor, b"\0" * 4096, 0)
        started = time.perf_counter()
        os.fdatasync(self._descriptor)
        ended = time.perf_counter()
        self.syncs.append((ended, (ended - started) * 1000))

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sync_once()

    def summary(self, prefix: str) -> dict[str, float | int]:
        took = [ms for _, ms in self.syncs]
        return {
            f"{prefix}_disk_sync_ms_p50": round(percentile(took, 0.5), 2),
            f"{prefix}_disk_sync_ms_max": round(max(took, default=0.0), 1),
            f"{prefix}_disk_syncs_over_20ms": sum(1 for ms in took if ms > 20),
        }
