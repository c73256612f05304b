"""The values admission decides over: stored objects as admission sees them, writes, emitted events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from libs.api.annotations import WORKLOAD_REF_NAME
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
    revision: int | None = None
    """The revision of the commit that last wrote it, when read from the store."""

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
    grace_seconds: int | None = None
    """A pod marked: how long it has to stop (shown as `metadata.deletionGracePeriodSeconds`)."""


@dataclass(frozen=True)
class EmittedEvent:
    """An event to write with the state change, in the same transaction."""

    payload: EventPayload
    correlation_id: str
    subject: AggregateRef | None = None


@dataclass
class AdmissionView:
    """What admission knows of the store for one batch: the objects it touches, every PriorityClass, and the
    v1.35 pods that wait for a Workload the batch creates. Decisions update it as they go, so a later
    manifest of the batch sees an earlier one."""

    objects: dict[ObjectKey, KnownObject] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    nodes_of_pods: dict[str, str] = field(default_factory=dict)
    """The node each stored pod of the batch is bound to (its binding is not part of its stored spec)."""
    _awaiting: dict[tuple[str, str], dict[ObjectKey, KnownObject]] = field(default_factory=dict)

    def get(self, key: ObjectKey) -> KnownObject | None:
        return self.objects.get(key)

    def put(self, known: KnownObject) -> None:
        self.objects[known.key] = known
        workload = _awaited_workload(known)
        if workload is not None:
            self._awaiting.setdefault((known.namespace, workload), {})[known.key] = known

    def drop(self, key: ObjectKey) -> None:
        known = self.objects.pop(key, None)
        workload = _awaited_workload(known) if known is not None else None
        if workload is not None:
            self._awaiting.get((key[1], workload), {}).pop(key, None)

    def awaiting(self, namespace: str, workload: str) -> list[KnownObject]:
        """The v1.35 pods whose `workloadRef` names this Workload (see podway.io/workload-ref-name)."""
        return sorted(self._awaiting.get((namespace, workload), {}).values(), key=lambda pod: pod.name)


def _awaited_workload(known: KnownObject) -> str | None:
    if known.kind != "Pod":
        return None
    annotations = (known.manifest.get("metadata") or {}).get("annotations")
    workload = annotations.get(WORKLOAD_REF_NAME) if annotations else None
    return workload if isinstance(workload, str) else None


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
