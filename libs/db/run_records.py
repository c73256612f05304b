"""What a run left behind, read for the invariant check (libs/core/invariants): every object, binding, device
allocation and audit event, in one transaction."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from libs.core.invariants import BindingRow, DeviceAllocationRow, RecordedEvent, Records
from libs.core.scheduling.objects import ApiObject
from libs.db.engine import create_engine
from libs.db.schema import conditions, device_allocations, events, objects, pod_bindings


async def load_records(database_url: str, expected_requests: frozenset[str] = frozenset()) -> Records:
    """Every object, binding, device allocation and audit event (in commit order), read in one transaction."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection, connection.begin():
            object_rows = (await connection.execute(sa.select(objects))).all()
            condition_rows = (await connection.execute(sa.select(conditions))).all()
            binding_rows = (await connection.execute(sa.select(pod_bindings))).all()
            device_rows = (await connection.execute(sa.select(device_allocations))).all()
            event_rows = (
                await connection.execute(
                    sa.select(
                        events.c.event_id,
                        events.c.type,
                        events.c.correlation_id,
                        events.c.causation_id,
                        events.c.payload,
                    ).order_by(events.c.seq)
                )
            ).all()
    finally:
        await engine.dispose()
    written: dict[str, list[dict[str, Any]]] = {}
    for row in condition_rows:
        written.setdefault(row.object_uid, []).append(
            {"type": row.type, "status": row.status, "reason": row.reason, "message": row.message}
        )
    return Records(
        objects=[_api_object(row, written.get(row.uid, [])) for row in object_rows],
        bindings=[BindingRow(row.pod_uid, row.node_name) for row in binding_rows],
        events=[
            RecordedEvent(row.type, row.correlation_id, row.payload, str(row.event_id), row.causation_id)
            for row in event_rows
        ],
        expected_requests=expected_requests,
        device_allocations=[DeviceAllocationRow(row.claim, row.device, row.exclusive) for row in device_rows],
    )


def _api_object(row: Any, written: list[dict[str, Any]]) -> ApiObject:
    """The object as its readers see it: the conditions of their own rows in `status.conditions`."""
    status = row.status
    if written:
        types = {condition["type"] for condition in written}
        kept = [c for c in status.get("conditions") or [] if c.get("type") not in types]
        status = {**status, "conditions": kept + written}
    return ApiObject(
        kind=row.kind,
        namespace=row.namespace,
        name=row.name,
        uid=row.uid,
        metadata=row.metadata,
        spec=row.spec,
        status=status,
        created_at=row.created_at.timestamp(),
        resource_version=row.resource_version,
    )
