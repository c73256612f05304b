"""Plain values the repositories read and write; no SQLAlchemy in here, so ports and fakes can share them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from libs.events.envelope import Envelope

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class ObjectDraft:
    """An API object as a writer wants it stored; the repository assigns uid, generation and resource_version."""

    kind: str
    api_version: str
    namespace: str
    name: str
    spec: JsonObject = field(default_factory=dict)
    metadata: JsonObject = field(default_factory=dict)
    status: JsonObject = field(default_factory=dict)
    uid: str | None = None


@dataclass(frozen=True)
class StoredObject:
    """An API object as stored. `resource_version` changes on every write; `generation` when the spec changes."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    generation: int
    resource_version: int
    spec: JsonObject
    metadata: JsonObject
    status: JsonObject
    created_at: datetime
    updated_at: datetime
    deletion_requested_at: datetime | None = None
    revision: int | None = field(default=None, compare=False)
    created_revision: int | None = field(default=None, compare=False)
    """The revision of the commit that last wrote it (None until that commit: see repositories/revisions.py)."""

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.metadata.get("labels") or {})


class ObjectVersion(NamedTuple):
    """Which version of an object is stored, without its documents."""

    uid: str
    namespace: str
    name: str
    resource_version: int
    revision: int | None


@dataclass(frozen=True)
class Condition:
    """One condition of one object, owned by the one service that writes that condition type."""

    object_uid: str
    type: str
    status: str
    owner: str
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: datetime | None = None


class ObjectRead(NamedTuple):
    """An object read for a write, with what its reads derive from other rows: the node a pod is bound to,
    and the object's conditions (None when they were not read)."""

    stored: StoredObject
    bound_to: str | None = None
    conditions: list[Condition] | None = None


@dataclass(frozen=True)
class Fence:
    """The lease a leased writer holds: its writes are valid only while the lease still has this epoch."""

    lease: str
    epoch: int


@dataclass(frozen=True)
class Lease:
    """Who is the single active replica of a leased service, and since which epoch."""

    name: str
    holder: str
    epoch: int
    expires_at: datetime

    @property
    def fence(self) -> Fence:
        return Fence(lease=self.name, epoch=self.epoch)


@dataclass(frozen=True)
class PodBinding:
    """A pod bound to a node, written by the scheduler under its lease epoch."""

    pod_uid: str
    node_name: str
    podgroup_uid: str | None
    bound_at: datetime


@dataclass(frozen=True)
class Nomination:
    """Room the preemptor made for a PodGroup on these nodes, held for it until `expires_at`."""

    podgroup_uid: str
    nodes: tuple[str, ...]
    expires_at: datetime
    nominated_at: datetime


@dataclass(frozen=True)
class StoredEvent:
    """An envelope in the audit log with its position; `seq` is also its place in the outbox (commit order; the
    stream keeps it only per process, see libs.messaging.relay)."""

    seq: int
    envelope: Envelope


@dataclass(frozen=True)
class OutboxMessage:
    """One event waiting to be published to JetStream."""

    seq: int
    event_id: uuid.UUID
    subject: str
    data: bytes
    created_at: datetime
    published_at: datetime | None = None


@dataclass(frozen=True)
class RetentionReport:
    """What a retention run deleted, so `podway gc` can say it."""

    events: int
    outbox: int
    inbox: int
    tombstones: int = 0

    @property
    def total(self) -> int:
        return self.events + self.outbox + self.inbox + self.tombstones


@dataclass(frozen=True)
class DeviceHold:
    """A device a claim holds for one request; `exclusive` unless it is a share of a shareable device."""

    device: str
    request: str
    exclusive: bool


@dataclass(frozen=True)
class DeviceShare:
    """How much of one capacity of a shareable device a claim consumes, and the device's total (milli-units)."""

    device: str
    name: str
    total: int
    amount: int


@dataclass(frozen=True, slots=True)
class Change:
    """One object as a watcher sees it: its state after the revision, or as it was when deleted."""

    deleted: bool
    object: StoredObject


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed after a revision, up to `revision` (the last committed one when read)."""

    revision: int
    compacted: int
    changes: list[Change]
    partial_uid: str | None = None
    """Set when the page ends inside `revision`: the rest of it comes after this uid."""
