"""What retention keeps: rows and bytes of the audit log, the outbox and the inbox for `--gangs` gangs (figures
scaled to 10,000 gangs), right after they ran, once the plumbing's horizons passed (an hour later) and once
the audit log's passed (31 days later), under the default policy (`PODWAY_RETENTION_*` unset).

Each gang of `--pods` pods leaves the events of a gang that is admitted, placed, bound, run and finished
(`podgroup.admitted` with its manifest, a `pod.admitted` per pod, `podgroup.cycle.started`,
`podgroup.cycle.placed`, `pods.bound`, `podgroup.scheduled`, `pods.running`, `pods.succeeded`), each in the
outbox (published at once, as the relay does) and in the audit log, and two inbox marks (the node agent's
`pods.bound`, admission's `pods.succeeded`). Bytes are those of the rows' contents (payloads, outbox bodies,
keys), then the SQLite file after VACUUM.

Left out: objects, conditions and bindings (retention does not touch them), claims, preemptions, retries
and inference events, PostgreSQL's page and index overheads (the file size on SQLite stands for them), and
the time a pruning pass takes on a loaded database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from libs.core.retention import RetentionPolicy
from libs.db import migrate
from libs.db.engine import create_engine, create_session_factory
from libs.db.retention import prune
from libs.db.uow import unit_of_work_factory
from libs.events.catalogue import EventType
from libs.events.envelope import AggregateRef, Envelope
from libs.runtime.retention import policy_from
from libs.runtime.settings import PodwaySettings

PER = 10_000
START = datetime(2026, 12, 1, tzinfo=UTC)
CONTENT_BYTES = {
    "events": "coalesce(length(payload), 0) + length(type) + length(correlation_id) + 64",
    "outbox": "length(data) + length(subject) + 24",
    "inbox": "length(consumer) + 24",
}
"""What a row holds, in bytes: its variable columns plus a fixed allowance for ids and times."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gangs", type=int, default=2_000, help="gangs written (figures are per 10,000)")
    parser.add_argument("--pods", type=int, default=8, help="pods per gang")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="podway-bench-retention-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'podway.db'}"
        metrics = asyncio.run(_measure(url, Path(tmp) / "podway.db", args))
    params = {
        "gangs": args.gangs,
        "pods_per_gang": args.pods,
        "database": "sqlite",
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    return {"name": "retention", "params": params, "metrics": metrics}


async def _measure(url: str, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    await migrate.upgrade(url)
    policy = policy_from(PodwaySettings())
    clock = _Clock(START)
    engine = create_engine(url)
    try:
        uow_factory = unit_of_work_factory(create_session_factory(engine), clock=clock)
        started = time.perf_counter()
        await _write_gangs(uow_factory, clock, args)
        write_s = time.perf_counter() - started
        states = {"before": await _sizes(engine, path, args.gangs)}
        pruned: dict[str, float] = {}
        for label, later in (("after_plumbing", timedelta(hours=1)), ("after_audit", timedelta(days=31))):
            pruned[label] = await _prune(uow_factory, policy, clock.now + later)
            states[label] = await _sizes(engine, path, args.gangs)
    finally:
        await engine.dispose()
    return {
        "policy": {
            "events_days": policy.events.days,
            "outbox_s": policy.outbox.total_seconds(),
            "inbox_s": policy.inbox.total_seconds(),
        },
        "per_10k_gangs": states,
        "write_s": round(write_s, 3),
        "prune_ms": pruned,
    }


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def _write_gangs(uow_factory: Any, clock: _Clock, args: argparse.Namespace) -> None:
    for first in range(0, args.gangs, 100):
        async with uow_factory() as uow:
            marks: list[tuple[str, uuid.UUID]] = []
            for index in range(first, min(first + 100, args.gangs)):
                story = _gang_story(index, args.pods, clock.now)
                for envelope in story:
                    uow.emit(envelope)
                marks += [
                    ("node-agent-n0", story[-3].event_id),
                    ("admission-pod-lifecycle", story[-1].event_id),
                ]
            for consumer, event_id in marks:
                await uow.inbox.seen(consumer, event_id)
            await uow.commit()
        async with uow_factory() as uow:
            waiting = await uow.outbox.unpublished(limit=100 * (args.pods + 8))
            await uow.outbox.mark_published([m.seq for m in waiting], clock.now)
            await uow.commit()
        clock.now += timedelta(seconds=1)


def _gang_story(index: int, pods: int, now: datetime) -> list[Envelope]:
    """The events one gang leaves, with payloads the size of the real ones."""
    group = str(uuid.uuid4())
    names = [f"gang-{index}-{pod}" for pod in range(pods)]
    placements = [{"pod": n, "pod_uid": str(uuid.uuid4()), "node": f"n{index % 512}"} for n in names]
    refs = [{"namespace": "ml", "name": p["pod"], "uid": p["pod_uid"], "node": p["node"]} for p in placements]
    ref = {"namespace": "ml", "name": f"gang-{index}", "uid": group}
    pod_spec = {
        "containers": [{"name": "main", "image": "trainer:1", "resources": {"requests": {"cpu": "8"}}}]
    }
    kinds: list[tuple[EventType, dict[str, Any]]] = [
        (
            EventType.PODGROUP_ADMITTED,
            {**ref, "object": {"spec": {"schedulingPolicy": {"gang": {"minCount": pods}}}}},
        ),
        *((EventType.POD_ADMITTED, {"name": n, "object": {"spec": pod_spec}}) for n in names),
        (EventType.PODGROUP_CYCLE_STARTED, {"podgroup": ref, "attempt": 1}),
        (EventType.PODGROUP_CYCLE_PLACED, {"podgroup": ref, "placements": placements}),
        (EventType.PODS_BOUND, {"podgroup": ref, "pods": placements}),
        (EventType.PODGROUP_SCHEDULED, {"podgroup": ref}),
        (EventType.PODS_RUNNING, {"pods": refs}),
        (EventType.PODS_SUCCEEDED, {"pods": refs}),
    ]
    story: list[Envelope] = []
    for kind, payload in kinds:
        story.append(
            Envelope(
                type=kind.value,
                occurred_at=now,
                producer="bench",
                correlation_id=group,
                causation_id=str(story[-1].event_id) if story else None,
                subject=AggregateRef(kind="PodGroup", namespace="ml", name=f"gang-{index}", uid=group),
                payload=payload,
            )
        )
    return story


async def _prune(uow_factory: Any, policy: RetentionPolicy, now: datetime) -> float:
    started = time.perf_counter()
    async with uow_factory() as uow:
        await prune(uow, policy.horizons(now))
    return round((time.perf_counter() - started) * 1000, 1)


async def _sizes(engine: Any, path: Path, gangs: int) -> dict[str, Any]:
    scale = PER / gangs
    sizes: dict[str, Any] = {}
    async with engine.connect() as connection:
        for table, content in CONTENT_BYTES.items():
            rows, size = (
                await connection.execute(
                    sa.text(f"SELECT count(*), coalesce(sum({content}), 0) FROM {table}")
                )
            ).one()
            sizes[f"{table}_rows"] = round(rows * scale)
            sizes[f"{table}_bytes"] = round(size * scale)
    sizes["file_bytes"] = round(await asyncio.to_thread(_vacuumed_size, path) * scale)
    return sizes


def _vacuumed_size(path: Path) -> int:
    """The database file's size once its free pages are given back and its WAL folded in."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return path.stat().st_size
