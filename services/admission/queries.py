"""Reads for `podway get`, `describe` and `events`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple, cast

import orjson

from libs.api.lists import continue_after, continue_token
from libs.core.admission.model import ObjectKey
from libs.core.scheduling.lifecycle import Condition, PodPhase, podgroup_phase
from libs.core.scheduling.waiting import PodFacts
from libs.db.ports import UnitOfWork
from libs.db.records import Condition as StoredCondition
from libs.db.records import StoredEvent, StoredObject
from libs.events.rpc import (
    Change,
    ChangesReply,
    ChangesRequest,
    EventsReply,
    EventsRequest,
    GetReply,
    GetRequest,
)
from libs.kubeapi.events import kube_events, waiting_event, waiting_of
from services.admission import pending
from services.admission.quota_status import QUEUE_KINDS, with_queue_statuses
from services.admission.store import iso, known_from_stored
from services.admission.stored_cache import StoredManifests, copy_for_derived


class WriterKnows(NamedTuple):
    """What the transaction that wrote objects knows of them without reading them again: the objects as it
    wrote them; their conditions (by uid: none for an object it created, which no other transaction sees;
    those it read with an object before writing it); where its pods are bound (`bindings` by pod uid, for the
    pods in `bindings_read`)."""

    written: Mapping[ObjectKey, StoredObject] = {}
    conditions: Mapping[str, list[StoredCondition]] = {}
    bindings: Mapping[str, str] = {}
    bindings_read: AbstractSet[str] = frozenset()


async def namespace_objects(uow: UnitOfWork, namespace: str) -> list[StoredObject]:
    """Objects a deletion may cascade to or be held by: the namespace's Workloads, PodGroups and Pods."""
    found: list[StoredObject] = []
    for kind in ("Workload", "CompositePodGroup", "PodGroup", "Pod"):
        found += await uow.objects.find(kind, namespace)
    return found


async def get_objects(
    uow: UnitOfWork, request: GetRequest, kept: StoredManifests | None = None, *, encoded: bool = False
) -> GetReply:
    """Full manifests as a reader expects them: conditions from their own rows folded into status, a pod's
    node in `spec.nodeName`, a PodGroup's derived phase, placed count (its pods bound now) and domain in
    `status.podway`, a pending pod's or PodGroup's waiting condition (see pending.py), and Kueue's queues'
    status (see quota_status.py). A list with a `limit` is one page, with the token of the next when more
    follow; `kept` keeps what the list read for the next (see stored_cache.py). `encoded`: a list of pods
    carries each already encoded, for `encode_objects` and `encode_framed` only."""
    token = None
    if request.name is not None and request.kind not in ("Namespace", "Event"):
        # One object has its own revision: no list revision to settle.
        stored = await uow.objects.get(request.kind, request.namespace or "", request.name)
        return GetReply(
            items=await _readable(uow, request.kind, [stored] if stored else []),
            revision=(stored.revision or 0) if stored else 0,
            item_revisions=[stored.revision or 0] if stored else [],
        )
    # A list's revision is its first page's (the API server keeps it in its continue token): later pages
    # need not settle one.
    revision = 0 if request.continue_token else (await uow.revisions.current())[0]
    if request.kind == "Namespace":
        return await _namespaces(uow, request, revision)
    if request.kind == "Event":
        return await _kube_events(uow, request, revision)
    namespace = None if request.all_namespaces else request.namespace
    after = continue_after(request.continue_token) if request.continue_token else None
    wanted = request.limit + 1 if request.limit is not None else None
    versions = await uow.objects.find_versions(request.kind, namespace, after=after, limit=wanted)
    if request.limit is not None and len(versions) > request.limit:
        versions = versions[: request.limit]
        token = continue_token(versions[-1].namespace, versions[-1].name)
    kept = kept if kept is not None else StoredManifests(kept=0)
    if request.kind == "Pod" and encoded:
        shared = await kept.read_shared(uow, versions, with_conditions)
        encodings = await _encoded_pods(uow, kept, [(uid, manifest) for uid, manifest, _ in shared])
        return GetReply.model_construct(
            # Each pod's JSON as bytes: written as it is by encode_objects and encode_framed.
            items=cast(list[dict[str, Any]], encodings),
            continue_token=token,
            revision=revision,
            item_revisions=[item_revision or revision for *_, item_revision in shared],
        )
    read = await kept.read(uow, versions, with_conditions)
    return GetReply(
        items=await _derived(uow, request.kind, [manifest for manifest, _ in read]),
        continue_token=token,
        revision=revision,
        item_revisions=[item_revision or revision for _, item_revision in read],
    )


async def _encoded_pods(
    uow: UnitOfWork, kept: StoredManifests, pods: list[tuple[str, dict[str, Any]]]
) -> list[bytes]:
    """Pods as `_derived` shows them, each already encoded (for `encode_objects` and `encode_framed`): a pod
    whose kept manifest and derived facts (its node, why it waits) are those of its last reading is sent as
    encoded then; the others are copied, derived and encoded, and kept so."""
    derivations = await _pod_derivations(uow, pods)
    encodings: list[bytes] = []
    reasons: dict[PodFacts, dict[str, str]] = {}
    for uid, manifest in pods:
        derived = derivations[uid]
        encoded = kept.encoded(uid, manifest, derived)
        if encoded is None:
            shown = copy_for_derived(manifest)
            _derive_pod(shown, derived, reasons)
            encoded = orjson.dumps(shown)
            kept.keep_encoded(uid, manifest, derived, encoded)
        encodings.append(encoded)
    return encodings


async def encode_unlisted_pods(uow: UnitOfWork, kept: StoredManifests, most: int) -> int:
    """Encode up to `most` pods kept as created, as a list will show them now (see stored_cache.py); how many.
    A list that finds what they derive changed meanwhile encodes them again."""
    pods = kept.unlisted_pods(most)
    if pods:
        await _encoded_pods(uow, kept, pods)
    return len(pods)


PodDerivation = tuple[str | None, PodFacts | None]
"""What a pod's read derives from other objects: the node it holds, and the facts of why it waits (None when
it does not wait)."""


async def _pod_derivations(
    uow: UnitOfWork, pods: list[tuple[str, dict[str, Any]]], knows: WriterKnows = WriterKnows()
) -> dict[str, PodDerivation]:
    """Each pod's derivation by uid, read for all of them at once (bindings, but those the writer knows,
    then per namespace the PodGroups and Workloads the waiting ones name)."""
    unknown = [uid for uid, _ in pods if uid not in knows.bindings_read]
    bound = {b.pod_uid: b.node_name for b in await uow.bindings.get_many(unknown)} if unknown else {}
    bound |= {uid: knows.bindings[uid] for uid, _ in pods if uid in knows.bindings}
    held = {uid: _held_node(manifest, bound) for uid, manifest in pods}
    facts: dict[str, PodFacts] = {}
    by_namespace: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for uid, m in pods:
        by_namespace.setdefault(m["metadata"].get("namespace", ""), []).append((uid, m))
    for namespace, here in sorted(by_namespace.items()):
        waiting = [(uid, m) for uid, m in here if held[uid] is None and pending.is_pending(m)]
        scope = await pending.load_scope(uow, "Pod", [m for _, m in waiting], namespace)
        facts |= {uid: pending.pod_facts(m, scope) for uid, m in waiting}
    return {uid: (held[uid], facts.get(uid)) for uid, _ in pods}


def _derive_pod(pod: dict[str, Any], derived: PodDerivation, reasons: dict[PodFacts, dict[str, str]]) -> None:
    """Add a pod's derivation to its manifest (`reasons`: the waiting conditions worked out so far)."""
    held, facts = derived
    # As the API server stores a pod it creates: Pending until its node's agent says otherwise.
    pod.setdefault("status", {}).setdefault("phase", "Pending")
    _show_node(pod, held)
    if facts is not None:
        pending.with_pod_waiting(pod, facts, reasons)


async def read_back(
    uow: UnitOfWork, keys: Iterable[ObjectKey], knows: WriterKnows = WriterKnows()
) -> dict[ObjectKey, tuple[dict[str, Any], int]]:
    """Objects by key as `get` reads each (see get_objects), with their revisions: one read for all (a
    namespace's is its own: it is derived from what the namespace holds); in the writing transaction,
    `knows` spares the reads of what it already knows."""
    keys = sorted(keys)
    found = {}
    for kind, namespace, name in [key for key in keys if key[0] == "Namespace"]:
        one = await get_objects(uow, GetRequest(kind=kind, namespace=namespace, name=name))
        if one.items:
            found[(kind, namespace, name)] = (one.items[0], one.item_revisions[0])
    others = [key for key in keys if key[0] != "Namespace"]
    by_kind: dict[str, list[StoredObject]] = {}
    unknown = [key for key in others if key not in knows.written]
    for stored in [
        *(knows.written[k] for k in others if k in knows.written),
        *await uow.objects.get_many(unknown),
    ]:
        by_kind.setdefault(stored.kind, []).append(stored)
    for kind, stored_objects in by_kind.items():
        # Copies: a written object's documents are also the kept copy's (see StoredManifests.keep_created).
        manifests = [
            copy_for_derived(m) for m in await with_conditions(uow, stored_objects, knows.conditions)
        ]
        await _derived(uow, kind, manifests, knows)
        for stored, manifest in zip(stored_objects, manifests, strict=True):
            found[(stored.kind, stored.namespace, stored.name)] = (manifest, stored.revision or 0)
    return found


BUILT_IN_NAMESPACES = ("default", "kube-public", "kube-system")
"""Namespaces that exist in every cluster; any other exists while it holds an object or is stored (a
Namespace created or applied), whichever comes first."""


async def _namespaces(uow: UnitOfWork, request: GetRequest, revision: int) -> GetReply:
    stored = {obj.name: obj for obj in await uow.objects.find("Namespace")}
    names = sorted({*BUILT_IN_NAMESPACES, *await uow.objects.namespaces(), *stored})
    if request.name is not None:
        names = [request.name] if request.name in names else []
    emptying = await uow.objects.emptying_namespaces()
    items = [_namespace(name, stored.get(name), name in emptying) for name in names]
    revisions = [(stored[n].revision or revision) if n in stored else revision for n in names]
    return GetReply(items=items, revision=revision, item_revisions=revisions)


def _namespace(name: str, stored: StoredObject | None, emptying: bool) -> dict[str, Any]:
    """A namespace as upstream shows it (see `_as_namespace`), Terminating while what it holds is being
    deleted; a stored one with its own metadata."""
    if stored is None:
        implicit = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "uid": f"namespace-{name}"},
        }
        return _as_namespace(implicit, terminating=emptying)
    return _as_namespace(known_from_stored(stored).manifest, terminating=emptying)


def _as_namespace(manifest: dict[str, Any], *, terminating: bool = False) -> dict[str, Any]:
    """Its name as the `kubernetes.io/metadata.name` label, the `kubernetes` finalizer, and its phase."""
    metadata = manifest["metadata"]
    metadata["labels"] = {**(metadata.get("labels") or {}), "kubernetes.io/metadata.name": metadata["name"]}
    spec = manifest.get("spec") or {}
    manifest["spec"] = {**spec, "finalizers": spec.get("finalizers") or ["kubernetes"]}
    terminating = terminating or "deletionTimestamp" in metadata
    manifest["status"] = {"phase": "Terminating" if terminating else "Active"}
    return manifest


KUBE_EVENTS = 5000
"""How many of the newest audited events the Kubernetes API's Events are made from."""


async def _kube_events(uow: UnitOfWork, request: GetRequest, revision: int) -> GetReply:
    """Kubernetes Events made from the newest audited events (libs/kubeapi/events.py), in one namespace or all."""
    stored = await _audited(uow, request) if request.involved else await uow.events.latest(KUBE_EVENTS)
    items = [
        event
        for audited in stored
        for event in kube_events(audited.seq, audited.envelope.model_dump(mode="json"))
        if request.all_namespaces or event["metadata"]["namespace"] == (request.namespace or "default")
    ]
    if request.involved:
        items += await _waiting_events(uow, request.namespace or "", request.involved)
    elif request.name is not None and (waiting := waiting_of(request.name)) is not None:
        items += await _waiting_events(uow, request.namespace or "", waiting)
    elif request.name is None:
        items += await _every_waiting_event(
            uow, None if request.all_namespaces else request.namespace or "default"
        )
    if request.name is not None:
        items = [event for event in items if event["metadata"]["name"] == request.name]
    return GetReply(items=items, revision=revision, item_revisions=[revision] * len(items))


async def _waiting_events(uow: UnitOfWork, namespace: str, name: str) -> list[dict[str, Any]]:
    """A pending pod's or PodGroup's reason for waiting, as the scheduler's `FailedScheduling` event."""
    found = []
    for kind in ("Pod", "PodGroup"):
        obj = await uow.objects.get(kind, namespace, name)
        if obj is not None:
            (manifest,) = await _readable(uow, kind, [obj])
            found += _waiting_of(manifest)
    return found


async def _every_waiting_event(uow: UnitOfWork, namespace: str | None) -> list[dict[str, Any]]:
    """The waiting events of every pending PodGroup and pod of `namespace` (None: of all), at most
    KUBE_EVENTS, as a list of Events shows the scheduler's `FailedScheduling` events among the others."""
    found: list[dict[str, Any]] = []
    for kind in ("PodGroup", "Pod"):
        for manifest in await _readable(uow, kind, await uow.objects.find(kind, namespace)):
            found += _waiting_of(manifest)
            if len(found) >= KUBE_EVENTS:
                return found[:KUBE_EVENTS]
    return found


def _waiting_of(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        waiting_event(manifest, condition)
        for condition in (manifest.get("status") or {}).get("conditions") or []
        if condition.get("status") == "False" and condition.get("reason")
    ]


async def _audited(uow: UnitOfWork, request: GetRequest) -> list[StoredEvent]:
    """The audited events of the stories an object of that name is in: its own and its PodGroup's."""
    namespace = request.namespace or ""
    found: dict[int, StoredEvent] = {}
    for kind in ("Pod", "PodGroup", "Job", "Workload", "ResourceClaim", "Node"):
        obj = await uow.objects.get(kind, namespace if kind != "Node" else "", str(request.involved))
        if obj is None:
            continue
        stories = [obj.uid]
        group = (obj.spec.get("schedulingGroup") or {}).get("podGroupName") if kind == "Pod" else None
        if group and (podgroup := await uow.objects.get("PodGroup", namespace, str(group))) is not None:
            stories.append(podgroup.uid)
        for story in stories:
            found.update({event.seq: event for event in await uow.events.by_correlation(story)})
    return [found[seq] for seq in sorted(found)]


async def changes(uow: UnitOfWork, request: ChangesRequest) -> ChangesReply:
    """What changed after a revision, in revision order: written objects as `get` reads them (ADDED when
    still at their first version), deleted ones as they were last stored."""
    found = await uow.revisions.changes_after(
        request.after, after_uid=request.after_uid, kinds=request.kinds or None, limit=request.limit
    )
    readable: dict[str, dict[str, Any]] = {}
    kinds = sorted({c.object.kind for c in found.changes if not c.deleted})
    for kind in kinds:
        written = [c.object for c in found.changes if not c.deleted and c.object.kind == kind]
        for obj, manifest in zip(written, await _readable(uow, kind, written), strict=True):
            readable[obj.uid] = manifest
    out = []
    for change in found.changes:
        obj = change.object
        if change.deleted:
            kind, manifest = "DELETED", known_from_stored(obj).manifest
        else:
            kind, manifest = ("ADDED" if obj.resource_version == 1 else "MODIFIED"), readable[obj.uid]
        revision = obj.revision or found.revision
        created = obj.created_revision or revision
        out.append(Change(type=kind, revision=revision, created_revision=created, object=manifest))
    return ChangesReply(
        revision=found.revision, compacted=found.compacted, changes=out, partial_uid=found.partial_uid
    )


async def _readable(uow: UnitOfWork, kind: str, objects: list[StoredObject]) -> list[dict[str, Any]]:
    return await _derived(uow, kind, await with_conditions(uow, objects))


async def _derived(
    uow: UnitOfWork, kind: str, manifests: list[dict[str, Any]], knows: WriterKnows = WriterKnows()
) -> list[dict[str, Any]]:
    """What reads derive from other objects, added to these manifests (conditions folded in already)."""
    if kind == "Namespace":
        return [_as_namespace(manifest) for manifest in manifests]
    if kind == "CompositePodGroup":
        await _with_composite_summaries(uow, manifests)
    if kind in QUEUE_KINDS:
        await with_queue_statuses(uow, kind, manifests)
    if kind == "Pod":
        pods = [(m["metadata"]["uid"], m) for m in manifests]
        derivations = await _pod_derivations(uow, pods, knows)
        reasons: dict[PodFacts, dict[str, str]] = {}
        for uid, pod in pods:
            _derive_pod(pod, derivations[uid], reasons)
        return manifests
    if kind != "PodGroup":
        return manifests
    for namespace in sorted({m["metadata"].get("namespace", "") for m in manifests}):
        here = [m for m in manifests if m["metadata"].get("namespace", "") == namespace]
        scope = await pending.load_scope(uow, kind, here, namespace)
        for group in here:
            await _with_summary(uow, group, scope)
        pending.with_group_waiting(here, scope)
    return manifests


async def with_conditions(
    uow: UnitOfWork, objects: list[StoredObject], known: Mapping[str, list[StoredCondition]] = {}
) -> list[dict[str, Any]]:
    """The objects' manifests with the conditions of their own rows folded into `status.conditions` (in
    place of any condition of the same type the status holds); `known`: those already read, by uid."""
    asked = [obj.uid for obj in objects if obj.uid not in known]
    rows = await uow.conditions.list_for_many(asked) if asked else {}
    rows |= {obj.uid: known[obj.uid] for obj in objects if known.get(obj.uid)}
    manifests = []
    for obj in objects:
        manifest = known_from_stored(obj).manifest
        if obj.uid in rows:
            status = dict(manifest.get("status") or {})
            written = [_condition(c) for c in rows[obj.uid]]
            types = {c["type"] for c in written}
            kept = [c for c in status.get("conditions") or [] if c.get("type") not in types]
            status["conditions"] = kept + written
            manifest["status"] = status
        manifests.append(manifest)
    return manifests


def _condition(condition: StoredCondition) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "observedGeneration": condition.observed_generation,
    }
    if condition.last_transition_time is not None:  # required by metav1.Condition readers
        shown["lastTransitionTime"] = iso(condition.last_transition_time)
    return shown


def _held_node(pod: dict[str, Any], bound: dict[str, str]) -> str | None:
    """The node a pod is bound to (whatever its spec says), or, once it ended and released its binding, the
    node its agent recorded when it started it; shown in `spec.nodeName` and `status.podway.nodeName`, and
    only that (never a node the spec names that nothing bound)."""
    ran_on = ((pod.get("status") or {}).get("podway") or {}).get("nodeName")
    held = bound.get(pod["metadata"]["uid"]) or ran_on
    return str(held) if held else None


def _show_node(pod: dict[str, Any], held: str | None) -> None:
    spec = pod.setdefault("spec", {})
    status = pod.setdefault("status", {})
    if held:
        spec["nodeName"] = held
        status["podway"] = {**(status.get("podway") or {}), "nodeName": held}


async def _with_summary(uow: UnitOfWork, group: dict[str, Any], scope: pending.Scope) -> None:
    status = group.setdefault("status", {})
    gang = ((group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    min_count = int(gang.get("minCount") or 1) if isinstance(gang, dict) else None
    conditions = [
        Condition(type=c["type"], status=c["status"] == "True", reason=c.get("reason") or "")
        for c in status.get("conditions") or []
    ]
    pods = scope.pods_of(group["metadata"]["name"])
    phases = [_pod_phase(p.status) for p in pods]
    bound = len(await uow.bindings.list_for_podgroup(group["metadata"]["uid"]))
    domain = ((status.get("placement") or {}).get("domain") or {}).get("value")
    phase = podgroup_phase(conditions, phases, gang_min_count=min_count)
    status["podway"] = {
        "phase": phase.value,
        "placed": bound,
        "pods": len(pods),
        "minCount": min_count,
        "domain": domain,
    }


async def _with_composite_summaries(uow: UnitOfWork, composites: list[dict[str, Any]]) -> None:
    """`status.podway` of CompositePodGroups: phase, how many child PodGroups there are and how many are
    scheduled, minGroupCount and the domain its children share."""
    for namespace in sorted({c["metadata"].get("namespace", "") for c in composites}):
        groups = await uow.objects.find("PodGroup", namespace)
        held = await uow.conditions.list_for_many(g.uid for g in groups)
        for composite in (c for c in composites if c["metadata"].get("namespace", "") == namespace):
            name = composite["metadata"]["name"]
            children = [g for g in groups if (g.spec or {}).get("parentCompositePodGroupName") == name]
            scheduled = sum(
                1
                for g in children
                if any(c.type == "PodGroupScheduled" and c.status == "True" for c in held.get(g.uid, []))
            )
            status = composite.setdefault("status", {})
            initially = any(
                c.get("type") == "CompositePodGroupInitiallyScheduled" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            gang = ((composite.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
            status["podway"] = {
                "phase": "Scheduled" if initially else "Pending",
                "groups": len(children),
                "scheduled": scheduled,
                "minGroupCount": gang.get("minGroupCount") if isinstance(gang, dict) else None,
                "domain": ((status.get("placement") or {}).get("domain") or {}).get("value"),
            }


def _pod_phase(status: dict[str, Any] | None) -> PodPhase:
    try:
        return PodPhase((status or {}).get("phase") or "Pending")
    except ValueError:
        return PodPhase.UNKNOWN


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
