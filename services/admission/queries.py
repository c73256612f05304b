"""Reads for `podway get`, `describe` and `events`."""

from __future__ import annotations

from typing import Any

from libs.core.admission.model import ObjectKey
from libs.db.ports import UnitOfWork
from libs.db.records import StoredObject
from libs.events.rpc import EventsReply, EventsRequest, GetRequest
from services.admission.store import known_from_stored


async def namespace_objects(uow: UnitOfWork, key: ObjectKey) -> list[StoredObject]:
    """Objects a deletion may cascade to or be held by: the namespace's Workloads, PodGroups and Pods."""
    _, namespace, _ = key
    found: list[StoredObject] = []
    for kind in ("Workload", "PodGroup", "Pod"):
        found += await uow.objects.find(kind, namespace)
    return found


async def get_objects(uow: UnitOfWork, request: GetRequest) -> list[dict[str, Any]]:
    """Full manifests, with PodGroup conditions from their own rows folded into status."""
    if request.name is not None:
        stored = await uow.objects.get(request.kind, request.namespace or "", request.name)
        objects = [stored] if stored else []
    else:
        namespace = None if request.all_namespaces else request.namespace
        objects = await uow.objects.find(request.kind, namespace)
    return [await _with_conditions(uow, obj) for obj in objects]


async def _with_conditions(uow: UnitOfWork, obj: StoredObject) -> dict[str, Any]:
    manifest = known_from_stored(obj).manifest
    conditions = await uow.conditions.list_for(obj.uid)
    if conditions:
        status = dict(manifest.get("status") or {})
        status["conditions"] = [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "observedGeneration": c.observed_generation,
            }
            for c in conditions
        ]
        manifest["status"] = status
    return manifest


async def events(uow: UnitOfWork, request: EventsRequest) -> EventsReply:
    """One story from the audit log: by correlation id, or a PodGroup's by NAMESPACE/NAME."""
    correlation = request.correlation_id
    if request.podgroup is not None:
        namespace, _, name = request.podgroup.partition("/")
        group = await uow.objects.get("PodGroup", namespace, name)
        if group is None:
            return EventsReply(events=[])
        correlation = group.uid
    if correlation is None:
        stored = await uow.events.since(request.after_seq, limit=request.limit)
    else:
        stored = [e for e in await uow.events.by_correlation(correlation) if e.seq > request.after_seq]
    items = [{"seq": e.seq, **e.envelope.model_dump(mode="json")} for e in stored[: request.limit]]
    return EventsReply(events=items, last_seq=stored[-1].seq if stored else request.after_seq)
