"""The persistence ports services depend on, as Protocols, so unit tests can pass fakes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Protocol, Self

from libs.db.records import (
    Changes,
    Condition,
    DeviceHold,
    DeviceShare,
    Fence,
    JsonObject,
    Lease,
    Nomination,
    ObjectDraft,
    ObjectRead,
    ObjectVersion,
    OutboxMessage,
    PodBinding,
    StoredEvent,
    StoredObject,
)
from libs.events.envelope import Envelope
from libs.runtime.clock import Clock, utc_now

__all__ = ["Clock", "utc_now"]  # the clock ports take, as every service uses it


class ObjectRepository(Protocol):
    """API objects keyed by (kind, namespace, name), with optimistic concurrency on `resource_version`."""

    async def get(self, kind: str, namespace: str, name: str) -> StoredObject | None: ...

    async def get_many(self, keys: Iterable[tuple[str, str, str]]) -> list[StoredObject]: ...

    async def get_many_with_facts(
        self, keys: Iterable[tuple[str, str, str]], *, every_of: str | None = None
    ) -> list[ObjectRead]: ...

    async def create_many(self, drafts: Sequence[ObjectDraft]) -> list[StoredObject]: ...

    async def get_by_uid(self, uid: str) -> StoredObject | None: ...

    async def find(
        self,
        kind: str,
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
        *,
        marked_for_deletion: bool = False,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
        podgroups: Collection[str] | None = None,
    ) -> list[StoredObject]: ...

    async def find_versions(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
    ) -> list[ObjectVersion]: ...

    async def get_by_uids(self, uids: Sequence[str]) -> list[StoredObject]: ...

    async def namespaces(self) -> list[str]: ...

    async def emptying_namespaces(self) -> set[str]: ...

    async def find_marked(self, kinds: Sequence[str]) -> list[StoredObject]: ...

    async def controllers_of(
        self, keys: Iterable[tuple[str, str, str]], controller_kind: str
    ) -> set[tuple[str, str]]: ...

    async def find_awaiting_workloads(self, workloads: Iterable[tuple[str, str]]) -> list[StoredObject]: ...

    async def upsert(
        self, draft: ObjectDraft, *, expected_resource_version: int | None = None
    ) -> StoredObject: ...

    async def replace_many_at(
        self, replacements: Sequence[tuple[ObjectDraft, int]]
    ) -> list[StoredObject]: ...

    async def update_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        status: JsonObject,
        *,
        expected_resource_version: int | None = None,
    ) -> StoredObject: ...

    async def update_statuses(
        self, changes: Sequence[tuple[StoredObject, JsonObject]]
    ) -> list[StoredObject]: ...

    async def request_deletion(
        self,
        kind: str,
        namespace: str,
        name: str,
        *,
        expected_uid: str | None = None,
        expected_resource_version: int | None = None,
        grace_seconds: int | None = None,
    ) -> StoredObject: ...

    async def delete(
        self,
        kind: str,
        namespace: str,
        name: str,
        *,
        expected_resource_version: int | None = None,
        expected_uid: str | None = None,
    ) -> bool: ...

    async def delete_by_uids(self, uids: Sequence[str]) -> int: ...


class ConditionRepository(Protocol):
    """Conditions in their own rows keyed by (object uid, type), so writers never overwrite each other."""

    async def set(self, condition: Condition) -> Condition: ...

    async def set_many(self, many: Sequence[Condition]) -> list[Condition]: ...

    async def get(self, object_uid: str, type_: str) -> Condition | None: ...

    async def list_for(self, object_uid: str) -> list[Condition]: ...

    async def with_status(self, type_: str, status: str) -> list[Condition]: ...

    async def list_for_many(self, object_uids: Iterable[str]) -> dict[str, list[Condition]]: ...


class BindingRepository(Protocol):
    """Pod to node bindings, the nodes pods hold now: the database refuses a second binding of a pod and a
    stale-epoch binding; a binding goes with its pod and is released when the pod ends."""

    async def bind(self, binding: PodBinding, *, fence: Fence) -> None: ...

    async def bind_many(self, bindings: Sequence[PodBinding], *, fence: Fence) -> list[str]: ...

    async def release_many(self, pod_uids: Iterable[str]) -> int: ...

    async def get(self, pod_uid: str) -> PodBinding | None: ...

    async def get_many(self, pod_uids: Iterable[str]) -> list[PodBinding]: ...

    async def list_for_podgroup(self, podgroup_uid: str) -> list[PodBinding]: ...

    async def list_for_node(self, node_name: str) -> list[PodBinding]: ...

    async def list_for_nodes(self, node_names: Iterable[str]) -> list[PodBinding]: ...

    async def unbind(self, pod_uid: str, *, fence: Fence) -> bool: ...


class NominationRepository(Protocol):
    """The preemptor's nominations, read by a scheduler that loads its world."""

    async def put(self, nomination: Nomination) -> None: ...

    async def active(self, now: datetime) -> list[Nomination]: ...

    async def clear(self, podgroup_uid: str) -> bool: ...


class NodeHeartbeatRepository(Protocol):
    """Beat counts of the nodes the node agents serve."""

    async def beat(self, nodes: Collection[str], agent: str, at: datetime) -> None: ...

    async def counts(self) -> dict[str, int]: ...


class DeviceAllocationRepository(Protocol):
    """Devices held by ResourceClaims: the database refuses a second holder of an exclusive device and a share
    beyond capacity."""

    async def hold(self, holds: Sequence[tuple[str, DeviceHold]], shares: Sequence[DeviceShare]) -> None: ...

    async def release(self, claims: Sequence[str], shares: Sequence[DeviceShare]) -> None: ...

    async def rows(self) -> list[tuple[str, str, bool]]: ...

    async def forget(self, rows: Sequence[tuple[str, str]]) -> None: ...

    async def set_consumed(self, consumed: Sequence[tuple[str, str, int]]) -> None: ...

    async def holders(self, device: str) -> list[str]: ...

    async def consumed(self, device: str, name: str) -> int: ...


class LeaseRepository(Protocol):
    """Leader election with fencing epochs."""

    async def acquire_or_renew(
        self, name: str, holder: str, now: datetime, ttl: timedelta
    ) -> Lease | None: ...

    async def renew(self, fence: Fence, holder: str, now: datetime, ttl: timedelta) -> Lease | None: ...

    async def release(self, name: str, holder: str, now: datetime) -> None: ...

    async def get(self, name: str) -> Lease | None: ...

    async def assert_epoch(self, fence: Fence) -> None: ...


class EventLog(Protocol):
    """The append-only audit log, read in `seq` order."""

    async def by_correlation(self, correlation_id: str) -> list[StoredEvent]: ...

    async def by_type(self, type_: str, *, limit: int = 1000) -> list[StoredEvent]: ...

    async def correlations_with(self, type_: str, correlation_ids: Sequence[str]) -> set[str]: ...

    async def latest_of(
        self, correlation_ids: Collection[str], type_: str | None = None
    ) -> dict[str, str]: ...

    async def since(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]: ...

    async def latest(self, limit: int) -> list[StoredEvent]: ...

    async def get(self, event_id: uuid.UUID) -> StoredEvent | None: ...

    async def delete_older_than(self, cutoff: datetime) -> int: ...


class Outbox(Protocol):
    """Events committed but not yet published, in `seq` order."""

    async def unpublished(
        self, limit: int, *, created_before: datetime | None = None, subjects: Collection[str] | None = None
    ) -> list[OutboxMessage]: ...

    async def any_unpublished(
        self, *, created_before: datetime | None = None, subjects: Collection[str] | None = None
    ) -> bool: ...

    async def mark_published(self, seqs: Sequence[int], at: datetime) -> None: ...

    async def delete_published_before(self, cutoff: datetime) -> int: ...


class Inbox(Protocol):
    """Which events each durable consumer has already processed."""

    async def seen(self, consumer: str, event_id: uuid.UUID) -> bool: ...

    async def seen_many(self, consumer: str, event_ids: Sequence[uuid.UUID]) -> list[bool]: ...

    async def delete_older_than(self, cutoff: datetime) -> int: ...


class RevisionRepository(Protocol):
    """The order of committed object changes (the Kubernetes API's resourceVersion)."""

    async def current(self) -> tuple[int, int]: ...

    async def changes_after(
        self, after: int, *, after_uid: str | None = None, kinds: list[str] | None = None, limit: int = 5000
    ) -> Changes: ...

    async def compact(self, before: int) -> int: ...

    async def compact_deleted_before(self, cutoff: datetime) -> int: ...


class UnitOfWork(Protocol):
    """One transaction: state changes and emitted events commit together or not at all.

    `async with uow: ...; await uow.commit()`; leaving the block without committing rolls back.
    """

    @property
    def objects(self) -> ObjectRepository: ...

    @property
    def conditions(self) -> ConditionRepository: ...

    @property
    def bindings(self) -> BindingRepository: ...

    @property
    def leases(self) -> LeaseRepository: ...

    @property
    def device_allocations(self) -> DeviceAllocationRepository: ...

    @property
    def nominations(self) -> NominationRepository: ...

    @property
    def node_heartbeats(self) -> NodeHeartbeatRepository: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def outbox(self) -> Outbox: ...

    @property
    def inbox(self) -> Inbox: ...

    @property
    def revisions(self) -> RevisionRepository: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def emit(self, envelope: Envelope) -> None: ...

    def record(self, envelope: Envelope) -> None: ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...


UnitOfWorkFactory = Callable[[], UnitOfWork]
