"""The watched nodes as a new leader reads them: beat counts and the Ready condition the scheduler wrote."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from libs.core.scheduling.inputs import NodeHealthRecord
from libs.core.scheduling.node_health import NodeCondition
from libs.core.scheduling.objects import ApiObject
from libs.db.ports import UnitOfWork

NODE_READY = "Ready"
"""The condition type of a Node's health (its own row, owned by the scheduler)."""


async def node_health_records(
    uow: UnitOfWork, nodes: Iterable[ApiObject], now: datetime
) -> tuple[NodeHealthRecord, ...]:
    """Every node whose agent beat, with its count and its condition (Ready unless written Unknown)."""
    beats = await uow.node_heartbeats.counts()
    names = {node.uid: node.name for node in nodes}
    unknown = {
        names[row.object_uid]: row
        for row in await uow.conditions.with_status(NODE_READY, "Unknown")
        if row.object_uid in names
    }
    records = []
    for name, count in sorted(beats.items()):
        row = unknown.get(name)
        condition = NodeCondition(row.reason) if row is not None else NodeCondition.READY
        since = row.last_transition_time if row is not None and row.last_transition_time else now
        records.append(NodeHealthRecord(name, count, condition, since.timestamp()))
    return tuple(records)
