"""The values admission decides over: stored objects as admission sees them, writes, emitted events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from libs.api.models.scheduling import PriorityClass
from libs.events.envelope import AggregateRef, EventPayload
from libs.events.rpc import ObjectResult

ObjectKey = tuple[str, str, str]
"""(kind, namespace, name); namespace is "" for cluster-scoped kinds."""

Manifest = dict[str, Any]


@dataclass(frozen=True)
class KnownObject:
    """A stored object: its identity, version, and the full manifest (metadata, spec, status)."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: int
    manifest: Manifest
    deletion_requested: bool = False

    @property
    def key(self) -> ObjectKey:
        return (self.kind, self.namespace, self.name)


@dataclass(frozen=True)
class ObjectWrite:
    """Store this object; `expected_resource_version` 0 means it must not exist yet."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    spec: Manifest
    metadata: Manifest
    status: Manifest
    expected_resource_version: int

    @property
    def key(self) -> ObjectKey:
        return (self.kind, self.namespace, self.name)


@dataclass(frozen=True)
class ObjectRemoval:
    """Delete this object, or only mark it (a PodGroup whose pods still run)."""

    kind: str
    namespace: str
    name: str
    uid: str
    expected_resource_version: int
    mark_only: bool = False


@dataclass(frozen=True)
class EmittedEvent:
    """An event to write with the state change, in the same transaction."""

    payload: EventPayload
    correlation_id: str
    subject: AggregateRef | None = None


@dataclass
class AdmissionView:
    """What admission knows of the store for one batch: the objects it touches, and every PriorityClass.
    Decisions update it as they go, so a later manifest of the batch sees an earlier one."""

    objects: dict[ObjectKey, KnownObject] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)

    def get(self, key: ObjectKey) -> KnownObject | None:
        return self.objects.get(key)

    def put(self, known: KnownObject) -> None:
        self.objects[known.key] = known

    def drop(self, key: ObjectKey) -> None:
        self.objects.pop(key, None)


@dataclass
class BatchDecision:
    """The answer to one apply request: a result per manifest (in request order), writes and events."""

    results: list[ObjectResult] = field(default_factory=list)
    writes: list[ObjectWrite] = field(default_factory=list)
    removals: list[ObjectRemoval] = field(default_factory=list)
    events: list[EmittedEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def known_from_mapping(kind: str, namespace: str, name: str, data: Mapping[str, Any]) -> KnownObject:
    """A KnownObject from a stored manifest (used by fakes and tests)."""
    meta = data.get("metadata") or {}
    return KnownObject(
        kind=kind,
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid", "")),
        resource_version=int(meta.get("resourceVersion") or 1),
        manifest=dict(data),
    )
