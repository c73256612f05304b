"""Between the admission core and the database: loading what a batch touches, writing what it decided."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from libs.api.manifests import parse_object
from libs.api.models.scheduling import PriorityClass
from libs.core.admission.manifests import rebuild_manifest
from libs.core.admission.model import AdmissionView, BatchDecision, KnownObject, ObjectKey, ObjectWrite
from libs.db.ports import UnitOfWork
from libs.db.records import Condition, ObjectDraft, StoredObject
from libs.db.repositories.objects import MUST_NOT_EXIST
from libs.events.envelope import Envelope

PRODUCER = "admission"


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def known_from_stored(obj: StoredObject) -> KnownObject:
    """The full manifest of a stored object, with the store-owned metadata filled in."""
    metadata = {
        **obj.metadata,
        "uid": obj.uid,
        "resourceVersion": str(obj.resource_version),
        "generation": obj.generation,
    }
    if "creationTimestamp" not in metadata:
        metadata["creationTimestamp"] = iso(obj.created_at)
    if obj.deletion_requested_at is not None:
        metadata["deletionTimestamp"] = iso(obj.deletion_requested_at)
    return KnownObject(
        kind=obj.kind,
        namespace=obj.namespace,
        name=obj.name,
        uid=obj.uid,
        resource_version=obj.resource_version,
        manifest=rebuild_manifest(obj.kind, obj.api_version, metadata, obj.spec, obj.status),
        deletion_requested=obj.deletion_requested_at is not None,
        revision=obj.revision,
    )


async def load_view(uow: UnitOfWork, keys: Iterable[ObjectKey]) -> AdmissionView:
    """The objects a batch touches, every PriorityClass, and the v1.35 pods that wait for a Workload the batch
    may create (with the PodGroups they name)."""
    return (await load_view_and_conditions(uow, keys))[0]


async def load_view_and_conditions(
    uow: UnitOfWork, keys: Iterable[ObjectKey]
) -> tuple[AdmissionView, dict[str, list[Condition]]]:
    """`load_view`, and the conditions of the objects it read by key (by uid), read with them."""
    view = AdmissionView()
    conditions: dict[str, list[Condition]] = {}
    keys = sorted(keys)
    for read in await uow.objects.get_many_with_facts(keys, every_of="PriorityClass"):
        known = known_from_stored(read.stored)
        view.put(known)
        if read.conditions is not None:
            conditions[known.uid] = read.conditions
        if read.bound_to is not None:
            view.nodes_of_pods[known.uid] = read.bound_to
        if known.kind == "PriorityClass":
            priority_class = parse_object(known.manifest)
            assert isinstance(priority_class, PriorityClass)
            view.priority_classes[known.name] = priority_class
    new_workloads = [
        (ns, name) for kind, ns, name in keys if kind == "Workload" and view.get((kind, ns, name)) is None
    ]
    awaiting = await uow.objects.find_awaiting_workloads(new_workloads)
    groups = {
        ("PodGroup", pod.namespace, str((pod.spec.get("schedulingGroup") or {}).get("podGroupName")))
        for pod in awaiting
    }
    for stored in [*awaiting, *await uow.objects.get_many(sorted(groups))]:
        view.put(known_from_stored(stored))
    return view, conditions


def _draft(write: ObjectWrite) -> ObjectDraft:
    return ObjectDraft(
        kind=write.kind,
        api_version=write.api_version,
        namespace=write.namespace,
        name=write.name,
        spec=write.spec,
        metadata=write.metadata,
        status=write.status,
        uid=write.uid,
    )


def _runs(writes: Iterable[ObjectWrite]) -> list[list[ObjectWrite]]:
    """The writes in order, consecutive ones of one sort (creates, or replacements at the versions read)
    together, each run naming an object once."""
    runs: list[list[ObjectWrite]] = []
    keys: set[ObjectKey] = set()
    for write in writes:
        last = runs[-1] if runs else None
        if last is not None and _creates(write) == _creates(last[0]) and write.key not in keys:
            last.append(write)
        else:
            runs.append([write])
            keys = set()
        keys.add(write.key)
    return runs


def _creates(write: ObjectWrite) -> bool:
    return write.expected_resource_version == MUST_NOT_EXIST


class Written(NamedTuple):
    """The objects decisions wrote, as stored: all of them in the order written, and those created."""

    objects: list[StoredObject]
    created: list[StoredObject]


class AtOnce(NamedTuple):
    """A group's writes as one statement makes them (libs.db.repositories.at_once)."""

    creates: list[ObjectDraft]
    replacements: list[tuple[ObjectDraft, int]]
    events: list[Envelope]


def writes_at_once(decisions: Sequence[BatchDecision], *, now: datetime) -> AtOnce | None:
    """The decisions' writes for one statement, or None when one statement cannot make them: a removal (it
    goes before the writes), or an object written twice (the second write would not see the first)."""
    at_once = AtOnce([], [], [])
    keys: set[ObjectKey] = set()
    for decision in decisions:
        if decision.removals:
            return None
        for write in decision.writes:
            if write.key in keys:
                return None
            keys.add(write.key)
            if _creates(write):
                at_once.creates.append(_draft(write))
            else:
                at_once.replacements.append((_draft(write), write.expected_resource_version))
        at_once.events.extend(_envelopes(decision, now, None))
    return at_once


async def write_decision(
    uow: UnitOfWork, decision: BatchDecision, *, now: datetime, causation_id: str | None = None
) -> Written:
    """Write every object, removal and event of a decision in the unit of work (the caller commits); the
    objects it created and replaced, as stored.

    Removals go first (a recreated pod replaces one of the same name); consecutive creates go in one statement,
    and consecutive replacements at the versions read in another; an object written twice in a group
    (created, then updated) keeps order."""
    for removal in decision.removals:
        # The decision read this incarnation at this version: a write that raced it is a conflict, never a
        # removal of what replaced it.
        uid, version = removal.uid or None, removal.expected_resource_version or None
        key = (removal.kind, removal.namespace, removal.name)
        if removal.mark_only:
            await uow.objects.request_deletion(
                *key, expected_uid=uid, expected_resource_version=version, grace_seconds=removal.grace_seconds
            )
        else:
            await uow.objects.delete(*key, expected_uid=uid, expected_resource_version=version)
    written = Written([], [])
    for run in _runs(decision.writes):
        if _creates(run[0]):
            created = await uow.objects.create_many([_draft(write) for write in run])
            written.objects.extend(created)
            written.created.extend(created)
        else:
            replacements = [(_draft(w), w.expected_resource_version) for w in run]
            written.objects.extend(await uow.objects.replace_many_at(replacements))
    for envelope in _envelopes(decision, now, causation_id):
        uow.emit(envelope)
    return written


def _envelopes(decision: BatchDecision, now: datetime, causation_id: str | None) -> list[Envelope]:
    return [
        Envelope.wrap(
            event.payload,
            producer=PRODUCER,
            correlation_id=event.correlation_id,
            occurred_at=now,
            causation_id=causation_id,
            subject=event.subject,
        )
        for event in decision.events
    ]
