"""Liveness beacons: a service touches its health file; the supervisor reads how fresh it is."""

from __future__ import annotations

import asyncio
import json
import os
import time
from contextlib import suppress
from pathlib import Path


def health_file(run_dir: Path, service: str) -> Path:
    return run_dir / f"{service}.health"


def beat(path: Path, *, now: float | None = None, detail: dict[str, object] | None = None) -> None:
    """Record that the service is alive; written atomically so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps({"pid": os.getpid(), "at": time.time() if now is None else now, **(detail or {})})
    )
    os.replace(tmp, path)


def last_beat(path: Path) -> float | None:
    """Wall time of the last beat, or None if the service never beat."""
    try:
        return float(json.loads(path.read_text())["at"])
    except (OSError, ValueError, KeyError):
        return None


async def beat_forever(path: Path, interval_s: float = 1.0) -> None:
    """Beat every `interval_s` until cancelled; run it as a task beside the service."""
    with suppress(asyncio.CancelledError):
        while True:
            beat(path)
            await asyncio.sleep(interval_s)
