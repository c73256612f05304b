"""Stored rows as the scheduling core sees objects (`ApiObject`)."""

from __future__ import annotations

from libs.core.scheduling.objects import ApiObject
from libs.db.records import StoredObject


def api_object(stored: StoredObject) -> ApiObject:
    """A stored row as the core sees the object (a deletion request shows as `deletionTimestamp`)."""
    metadata = stored.metadata
    if stored.deletion_requested_at is not None:
        metadata = {**metadata, "deletionTimestamp": stored.deletion_requested_at.isoformat()}
    return ApiObject(
        kind=stored.kind,
        namespace=stored.namespace,
        name=stored.name,
        uid=stored.uid,
        metadata=metadata,
        spec=stored.spec,
        status=stored.status,
        created_at=stored.created_at.timestamp(),
        resource_version=stored.resource_version,
    )
