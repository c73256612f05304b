"""How long the services take to come back after a failover, read on the database itself.

A service has recovered once it has written on the new primary: an event it produced (`events.producer`), a
renewal of its lease, or a node heartbeat (the node agent). What each had written is read on the standby
after the primary died and before it is promoted (synchronously replicated, it holds every acknowledged
commit, and nothing writes to it meanwhile), so that anything newer is a write on the new primary.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

Marks = dict[tuple[str, str], float]

_MARKS = """
SELECT 'event', producer, max(seq)::float8 FROM events GROUP BY producer
UNION ALL SELECT 'lease', name, extract(epoch FROM expires_at)::float8 FROM leases
UNION ALL SELECT 'beat', 'node_agent', sum(beats)::float8 FROM node_heartbeats
"""


@dataclass
class Recovery:
    """Seconds from the kill of the primary (None: not within the watch)."""

    first_write_s: float | None = None
    all_written_s: float | None = None
    written_s: dict[str, float] = field(default_factory=dict)
    """When each service first wrote on the new primary."""


async def write_marks(connection: Any) -> Marks:
    """What each service had written: (kind, service) -> the newest event seq, lease expiry or beat count."""
    rows = await connection.fetch(_MARKS)
    return {(kind, _service(writer)): float(mark) for kind, writer, mark in rows if mark is not None}


async def watch_recovery(
    connection: Any,
    before: Marks,
    services: Collection[str],
    *,
    killed_at: float,
    timeout_s: float = 60.0,
    interval_s: float = 0.05,
) -> Recovery:
    """Poll the new primary through `connection` until every one of `services` has written on it."""
    recovery = Recovery()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = time.monotonic() - killed_at
        for (kind, service), mark in (await write_marks(connection)).items():
            if mark > before.get((kind, service), float("-inf")) and service not in recovery.written_s:
                recovery.written_s[service] = round(now, 3)
        if recovery.written_s and recovery.first_write_s is None:
            recovery.first_write_s = min(recovery.written_s.values())
        if all(s in recovery.written_s for s in services):
            recovery.all_written_s = max(recovery.written_s[s] for s in services)
            return recovery
        await asyncio.sleep(interval_s)
    return recovery


def _service(writer: str) -> str:
    """An event producer or lease name as the service's name (`dra-allocator` -> `dra_allocator`)."""
    return writer.replace("-", "_")
