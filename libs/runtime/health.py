"""Liveness beacons: a service touches its health file; the supervisor reads how fresh it is."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path


def process_name(service: str, instance: str) -> str:
    """The name one replica of a service beats under: the service's own for instance 0, `service-N` else."""
    return service if instance == "0" else f"{service}-{instance}"


def health_file(run_dir: Path, service: str) -> Path:
    return run_dir / f"{service}.health"


BEAT_DETAIL: dict[str, object] = {}
"""What every beat of this process carries besides its own detail (`run_service` puts `metrics_port` here)."""


def beat(path: Path, *, now: float | None = None, detail: dict[str, object] | None = None) -> None:
    """Record that the service is alive; written atomically so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {"pid": os.getpid(), "at": time.time() if now is None else now, **BEAT_DETAIL, **(detail or {})}
        )
    )
    os.replace(tmp, path)


def last_beat(path: Path) -> float | None:
    """Wall time of the last beat, or None if the service never beat."""
    try:
        return float(json.loads(path.read_text())["at"])
    except (OSError, ValueError, KeyError):
        return None


async def beat_forever(
    path: Path,
    interval_s: float = 1.0,
    *,
    alive: Callable[[], bool] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    connections: Callable[[], Awaitable[dict[str, object]]] | None = None,
) -> None:
    """Beat every `interval_s` until cancelled, while `alive()` says the service can still do its work (its
    connections are up or coming back); run it as a task beside the service. A service that stops beating
    is restarted by its supervisor. Each beat carries what `connections()` says of the service's NATS and
    database connections (a readiness probe reads them: `libs.runtime.probe`). The file is written on a
    worker thread: on some filesystems a write and rename take milliseconds, which on the event loop would
    delay every request in flight."""
    with suppress(asyncio.CancelledError):
        while True:
            if alive is None or alive():
                detail = await connections() if connections is not None else None
                await asyncio.to_thread(beat, path, detail=detail)
            await sleep(interval_s)
