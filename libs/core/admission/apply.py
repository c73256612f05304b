"""Apply: validate, default, convert and decide each manifest of a batch against what is stored."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from libs.api.conversion import convert_documents, legacy_pod_group_name, workload_ref_of
from libs.api.errors import (
    FieldError,
    already_exists_status,
    being_deleted_message,
    namespace_terminating_status,
)
from libs.api.jobs import expand_job
from libs.api.kinds import BETA_SHAPED, KUEUE_V1BETA1, is_namespaced, kind_rank
from libs.api.kueue_versions import kueue_v1beta1_errors
from libs.api.manifests import FieldValidation, ManifestError, parse_object, validate_document
from libs.api.models.batch import Job
from libs.api.models.core import Pod
from libs.api.models.meta import ApiObject
from libs.api.models.scheduling import PodGroup, PriorityClass, Workload
from libs.api.podgroups import complete_from_workload, with_stored_policy
from libs.api.scheduling_versions import v1beta1_errors
from libs.core.admission.events import (
    admitted_event,
    correlation_of,
    expanded_event,
    refused_event,
    rejected_event,
    unchanged_job_event,
)
from libs.core.admission.manifests import stored_spec
from libs.core.admission.model import (
    AdmissionView,
    BatchDecision,
    KnownObject,
    Manifest,
    ObjectKey,
    ObjectWrite,
)
from libs.core.admission.references import (
    composite_with_template,
    created_warning,
    implied_podgroup,
    podgroup_with_template,
    podgroups_awaiting,
)
from libs.events.rpc import ObjectResult

# metadata fields the store owns: an apply never sets them and comparing them says nothing about a change
STORE_OWNED_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


@dataclass(frozen=True)
class ApplyContext:
    """What a decision may not read for itself: the time, fresh uids, the request it answers."""

    now: datetime
    new_uid: Callable[[], str]
    request_id: str


def raw_key(doc: Mapping[str, Any]) -> ObjectKey | None:
    """(kind, namespace, name) as the document states them, before validation."""
    kind = doc.get("kind")
    meta = doc.get("metadata")
    if not isinstance(kind, str) or not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return None
    namespace = meta.get("namespace") if is_namespaced(kind) else ""
    return (kind, namespace if isinstance(namespace, str) else "", meta["name"])


@dataclass(frozen=True)
class PreparedBatch:
    """An apply request's documents after v1.35 conversion, with the stored objects it may read."""

    documents: list[dict[str, Any]]
    warnings: list[str]
    keys: set[ObjectKey]
    """Every stored object the batch may read (what it writes included)."""
    writes: frozenset[ObjectKey] = frozenset()
    """The objects the batch may write: its documents and what its Jobs expand to."""
    generated: Mapping[ObjectKey, frozenset[ObjectKey]] = field(default_factory=dict)
    """What each Job of the batch expands to, by the Job's key."""
    create_only: bool = False
    """Objects that exist are left as they are (`kubectl create`, without the error)."""
    field_validation: FieldValidation = "Warn"
    """What unknown fields in the batch's documents do (the API server's `fieldValidation`)."""
    written_as: tuple[str | None, ...] = ()
    """The apiVersion each document was written in, before conversion (None for what conversion added)."""

    @property
    def reads_everything(self) -> bool:
        """Whether the batch changes how every object is admitted (it writes a PriorityClass, which every
        decision reads): it must then be decided alone."""
        return any(kind == "PriorityClass" for kind, _, _ in self.writes)


def prepare_batch(
    docs: list[dict[str, Any]], *, create_only: bool = False, field_validation: FieldValidation = "Warn"
) -> PreparedBatch:
    """Convert once; name every stored object the batch may read and write."""
    converted, warnings = convert_documents(docs)
    reads, writes, generated = footprint(converted)
    unique_warnings = list(dict.fromkeys(warnings))
    written_as = tuple(
        doc.get("apiVersion") if isinstance(doc.get("apiVersion"), str) else None for doc in docs
    )
    return PreparedBatch(
        converted,
        unique_warnings,
        reads,
        frozenset(writes),
        generated,
        create_only,
        field_validation,
        written_as,
    )


def footprint(
    converted: list[dict[str, Any]],
) -> tuple[set[ObjectKey], set[ObjectKey], dict[ObjectKey, frozenset[ObjectKey]]]:
    """What a converted batch may read (the objects themselves, PodGroups' Workloads, Pods' PodGroups, and
    the objects a Job expands to), what of that it may write, and what each Job expands to."""
    reads: set[ObjectKey] = set()
    writes: set[ObjectKey] = set()
    generated: dict[ObjectKey, frozenset[ObjectKey]] = {}
    for doc in converted:
        key = raw_key(doc)
        if key is None:
            continue
        writes.add(key)
        if key[1]:
            reads.add(namespace_key(key[1]))  # a namespace being deleted takes nothing new
        if key[0] == "Job":
            generated[key] = frozenset(_job_keys(doc))
            writes.update(generated[key])
        else:
            reads.update(_referenced_keys(key, doc))
            writes.update(_implied_keys(key, doc))
    reads |= writes
    return reads, writes, generated


def _referenced_keys(key: ObjectKey, doc: Mapping[str, Any]) -> set[ObjectKey]:
    kind, namespace, _ = key
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    if kind == "PodGroup":
        ref = ((spec.get("podGroupTemplateRef") or {}).get("workload") or {}).get("workloadName")
        return {("Workload", namespace, ref)} if isinstance(ref, str) else set()
    if kind == "CompositePodGroup":
        ref = (spec.get("workloadRef") or {}).get("workloadName")
        return {("Workload", namespace, ref)} if isinstance(ref, str) else set()
    if kind == "Pod":
        group = (spec.get("schedulingGroup") or {}).get("podGroupName")
        ref = workload_ref_of((doc.get("metadata") or {}).get("annotations") or {})
        keys = {("PodGroup", namespace, group)} if isinstance(group, str) else set()
        return keys | ({("Workload", namespace, ref[0])} if ref else set())
    return set()


def _implied_keys(key: ObjectKey, doc: Mapping[str, Any]) -> set[ObjectKey]:
    """The PodGroups a v1.35 pod, or a Workload v1.35 pods wait for, may make admission create (those with a
    replica key are not known before the pods are read)."""
    kind, namespace, name = key
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    if kind == "Pod" and workload_ref_of((doc.get("metadata") or {}).get("annotations") or {}):
        group = (spec.get("schedulingGroup") or {}).get("podGroupName")
        return {("PodGroup", namespace, group)} if isinstance(group, str) else set()
    if kind == "Workload" and isinstance(spec.get("podGroupTemplates"), list):
        templates = [t.get("name") for t in spec["podGroupTemplates"] if isinstance(t, dict)]
        return {
            ("PodGroup", namespace, legacy_pod_group_name(name, t)) for t in templates if isinstance(t, str)
        }
    return set()


def _job_keys(doc: Mapping[str, Any]) -> set[ObjectKey]:
    try:
        job = parse_object(doc)
    except (ManifestError, ValueError):
        return set()
    if not isinstance(job, Job):
        return set()
    expansion = expand_job(job)
    objs: list[ApiObject] = [o for o in (expansion.workload, expansion.podgroup) if o is not None]
    return {(o.KIND, o.namespace or "", o.name) for o in [*objs, *expansion.pods]}


def admit_batch(batch: PreparedBatch, view: AdmissionView, ctx: ApplyContext) -> BatchDecision:
    """Decide every manifest of one prepared apply request (see prepare_batch), each on its own, as kubectl
    applies a file object by object: one refused object does not stop the others.

    1. Take the documents in dependency order of kinds, so a PodGroup sees the Workload of the same batch.
    2. Refuse a document that would create an object whose name an object being deleted holds (a Job: or
       any object it expands to, since a Job is expanded whole or not at all).
    3. Validate the others against their stored version; store what changed; answer each in request order.

    A gang written out by hand (Workload, PodGroup, Pods) needs no all-or-nothing here: the scheduler binds
    none of its pods before minCount of them exist, so an apply that lands part of it binds nothing."""
    decision = BatchDecision()
    converted = batch.documents
    decision.warnings.extend(batch.warnings)
    results: list[ObjectResult | None] = [None] * len(converted)
    for index in sorted(range(len(converted)), key=lambda i: kind_rank(str(converted[i].get("kind")))):
        doc = converted[index]
        key = raw_key(doc)
        existing = view.get(key) if key is not None else None
        held = name_held_by_deletion(key, existing, batch, view)
        if key is not None and existing is None and _terminating(view, key[1]):
            results[index] = _refused_in_terminating(doc, key, decision, ctx)
        elif held is not None:
            results[index] = _refused(doc, held, decision, ctx)
        elif existing is not None and batch.create_only:
            results[index] = _left_as_it_is(existing)
        else:
            results[index] = admit_document(
                doc,
                view,
                decision,
                ctx,
                field_validation=batch.field_validation,
                written_as=batch.written_as[index] if index < len(batch.written_as) else None,
            )
    decision.results = [r for r in results if r is not None]
    return decision


def admit_submission(batch: PreparedBatch, view: AdmissionView, ctx: ApplyContext) -> BatchDecision:
    """Decide Jobs submitted as events (`job.submitted`), as admit_batch decides an apply, and answer a Job
    submitted again as it is stored with an event too: a submitter has no reply to learn it from."""
    decision = admit_batch(batch, view, ctx)
    for result in decision.results:
        known = view.get((result.kind or "", result.namespace or "", result.name or ""))
        if result.kind == "Job" and result.outcome == "unchanged" and known is not None:
            decision.events.append(unchanged_job_event(known, ctx.request_id))
    return decision


def _left_as_it_is(existing: KnownObject) -> ObjectResult:
    return ObjectResult(
        kind=existing.kind,
        namespace=existing.namespace or None,
        name=existing.name,
        uid=existing.uid,
        outcome="unchanged",
        message="already exists",
    )


def name_held_by_deletion(
    key: ObjectKey | None, existing: KnownObject | None, batch: PreparedBatch, view: AdmissionView
) -> KnownObject | None:
    """The object being deleted whose name a document would create again: the document's own, or, for a
    new Job, that of an object it expands to."""
    if existing is not None and existing.deletion_requested:
        return existing
    if key is not None and existing is None:
        for generated in sorted(batch.generated.get(key, ())):
            child = view.get(generated)
            if child is not None and child.deletion_requested:
                return child
    return None


def namespace_key(namespace: str) -> ObjectKey:
    return ("Namespace", "", namespace)


def _terminating(view: AdmissionView, namespace: str) -> bool:
    """Whether the namespace is being deleted (marked, waiting for what is in it to go)."""
    stored = view.get(namespace_key(namespace)) if namespace else None
    return stored is not None and stored.deletion_requested


def _refused_in_terminating(
    doc: Mapping[str, Any], key: ObjectKey, decision: BatchDecision, ctx: ApplyContext
) -> ObjectResult:
    """A create in a namespace being deleted, refused as upstream's NamespaceLifecycle refuses it."""
    kind, namespace, name = key
    status = namespace_terminating_status(kind, name, namespace)
    result = ObjectResult(
        kind=kind,
        namespace=namespace,
        name=name,
        outcome="rejected",
        message=status["message"],
        status=status,
    )
    decision.events.append(refused_event(result, ctx.request_id))
    return result


def _refused(
    doc: Mapping[str, Any], held: KnownObject, decision: BatchDecision, ctx: ApplyContext
) -> ObjectResult:
    """A document answered as the API server answers the create that hit `held` (AlreadyExists)."""
    message = being_deleted_message(held.kind, held.name)
    kind, namespace, name = raw_key(doc) or (str(doc.get("kind") or ""), "", "")
    result = ObjectResult(
        kind=kind or None,
        namespace=namespace or None,
        name=name or None,
        outcome="rejected",
        message=message,
        status=already_exists_status(held.kind, held.name, message),
    )
    decision.events.append(refused_event(result, ctx.request_id))
    return result


def write_runs(decisions: list[BatchDecision]) -> list[BatchDecision]:
    """Decisions of one group commit joined into as few writes as keep their order.

    A store writes a decision's removals before its writes, so a decision that removes something starts a new
    run: joined with an earlier one, its removal would land before the earlier decision's writes."""
    runs: list[BatchDecision] = []
    for decision in decisions:
        if not runs or decision.removals:
            runs.append(BatchDecision(removals=list(decision.removals)))
        run = runs[-1]
        run.writes.extend(decision.writes)
        run.events.extend(decision.events)
    return runs


def admit_document(
    doc: Mapping[str, Any],
    view: AdmissionView,
    decision: BatchDecision,
    ctx: ApplyContext,
    *,
    generated_uid: str | None = None,
    own_policy: bool = False,
    field_validation: FieldValidation = "Ignore",
    written_as: str | None = None,
) -> ObjectResult:
    """Decide one document, appending its write and events to `decision`. The server assigns the uid of a
    new object (a uid in the document is ignored), except that a controller's `generated_uid` is kept. A
    PodGroup takes its policy from its template, unless a controller gave it its `own_policy`.

    `field_validation` is for documents a user sent; what a controller makes from an admitted object was
    checked with that object, hence Ignore by default. `written_as`: the apiVersion the user wrote, when its
    errors name fields as another version does."""
    key = raw_key(doc)
    existing = view.get(key) if key else None
    if existing is not None and existing.kind == "Pod":
        doc = _without_current_node(doc, existing, view)
    workload: Workload | None = None
    reference_errors: list[FieldError] = []
    if key is not None and key[0] == "PodGroup":
        # The template is the policy of a PodGroup being created; afterwards the PodGroup's own is (a
        # resized minCount survives re-applying its manifest), and its reference is not checked again.
        if existing is None:
            doc, workload, reference_errors = podgroup_with_template(key, doc, view)
        else:
            doc = with_stored_policy(doc, existing.manifest.get("spec") or {})
    elif key is not None and key[0] == "CompositePodGroup" and existing is None:
        doc, reference_errors = composite_with_template(key, doc, view)
    result = validate_document(
        doc,
        old=existing.manifest if existing else None,
        priority_classes=view.priority_classes,
        converted=True,
        field_validation=field_validation,
    )
    if reference_errors and result.problem is None:
        result = dataclasses.replace(result, obj=None, errors=(*result.errors, *reference_errors))
    if written_as in BETA_SHAPED and result.errors:
        result = dataclasses.replace(result, errors=v1beta1_errors(result.errors))
    if written_as == KUEUE_V1BETA1 and result.errors:
        result = dataclasses.replace(result, errors=kueue_v1beta1_errors(result.errors))
    if result.obj is None:
        decision.events.append(rejected_event(result, ctx.request_id))
        return ObjectResult(
            kind=result.kind or None,
            namespace=result.namespace,
            name=result.name or None,
            outcome="rejected",
            message=result.message,
            status=result.status(),
            warnings=list(result.warnings),
        )
    obj, warnings = result.obj, list(result.warnings)
    if isinstance(obj, PodGroup) and workload is not None and not own_policy:
        obj = complete_from_workload(obj, workload)
    if isinstance(obj, Pod):
        warnings += _implied_podgroup(obj, view, decision, ctx)
    return store_object(obj, existing, view, decision, ctx, warnings, generated_uid=generated_uid)


def _without_current_node(doc: Mapping[str, Any], pod: KnownObject, view: AdmissionView) -> Mapping[str, Any]:
    """A pod's manifest read back names the node it is bound to in `spec.nodeName`; that binding is not part
    of its stored spec, so naming it asks for no change (naming another node still does)."""
    spec = doc.get("spec")
    if not isinstance(spec, dict) or "nodeName" not in spec:
        return doc
    ran_on = ((pod.manifest.get("status") or {}).get("podway") or {}).get("nodeName")
    named = spec["nodeName"]
    if named is None or named not in (view.nodes_of_pods.get(pod.uid), ran_on):
        return doc
    if (pod.manifest.get("spec") or {}).get("nodeName") == named:
        return doc  # the pod named its node when it was created
    return {**doc, "spec": {k: v for k, v in spec.items() if k != "nodeName"}}


def _implied_podgroup(pod: Pod, view: AdmissionView, decision: BatchDecision, ctx: ApplyContext) -> list[str]:
    """A v1.35 pod's implied PodGroup, created from its stored Workload, or the warning the pod waits with."""
    group, waiting = implied_podgroup(pod, view)
    if group is None:
        return [waiting] if waiting else []
    created = admit_document(group.to_wire(), view, decision, ctx)
    return [created_warning(group)] if created.outcome == "created" else []


def store_object(
    obj: ApiObject,
    existing: KnownObject | None,
    view: AdmissionView,
    decision: BatchDecision,
    ctx: ApplyContext,
    warnings: list[str],
    *,
    generated_uid: str | None = None,
) -> ObjectResult:
    """Write `obj` unless it equals what is stored; emit its admission event; expand new Jobs."""
    kind, namespace, name = obj.KIND, obj.namespace or "", obj.name
    manifest = obj.to_wire()
    metadata = _metadata(manifest, existing, ctx, generated_uid)
    status = _status(kind, manifest, existing)
    spec = stored_spec(kind, manifest)
    if existing is not None and _unchanged(existing, spec, metadata, status):
        return ObjectResult(
            kind=kind,
            namespace=namespace or None,
            name=name,
            uid=existing.uid,
            outcome="unchanged",
            warnings=warnings,
        )
    write = ObjectWrite(
        kind=kind,
        api_version=str(manifest.get("apiVersion")),
        namespace=namespace,
        name=name,
        uid=str(metadata["uid"]),
        spec=spec,
        metadata=metadata,
        status=status,
        expected_resource_version=existing.resource_version if existing else 0,
    )
    known = _known_after(write, existing, manifest)
    decision.writes.append(write)
    view.put(known)
    if isinstance(obj, PriorityClass):
        view.priority_classes[name] = obj
    outcome: Literal["created", "updated"] = "updated" if existing else "created"
    correlation = correlation_of(known, view)
    decision.events.append(admitted_event(known, outcome, warnings, ctx.request_id, correlation))
    if isinstance(obj, Job) and existing is None:
        _expand(obj, known, view, decision, ctx)
    if isinstance(obj, Workload) and existing is None:
        for group in podgroups_awaiting(obj, view):
            admit_document(group.to_wire(), view, decision, ctx)
    return ObjectResult(
        kind=kind, namespace=namespace or None, name=name, uid=known.uid, outcome=outcome, warnings=warnings
    )


def _metadata(
    manifest: Manifest, existing: KnownObject | None, ctx: ApplyContext, generated_uid: str | None
) -> Manifest:
    given = manifest.get("metadata") or {}
    metadata = {k: v for k, v in given.items() if k not in STORE_OWNED_METADATA}
    # Field managers, as the API server keeps them: a request that names none leaves them as they were.
    if isinstance(given.get("managedFields"), list):
        metadata["managedFields"] = given["managedFields"]
    if existing is not None:
        old = existing.manifest.get("metadata") or {}
        metadata["uid"] = existing.uid
        metadata["creationTimestamp"] = old.get("creationTimestamp")
        if "managedFields" not in metadata and old.get("managedFields"):
            metadata["managedFields"] = old["managedFields"]
    else:
        metadata["uid"] = generated_uid or ctx.new_uid()
        metadata["creationTimestamp"] = ctx.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return metadata


def _status(kind: str, manifest: Manifest, existing: KnownObject | None) -> Manifest:
    # A Node's status is what its agent reports; every other status belongs to a controller, not to apply.
    if kind == "Node":
        return dict(manifest.get("status") or {})
    return dict((existing.manifest.get("status") or {}) if existing else {})


def _comparable(metadata: Manifest) -> Manifest:
    return {k: v for k, v in metadata.items() if k not in STORE_OWNED_METADATA}


def _unchanged(existing: KnownObject, spec: Manifest, metadata: Manifest, status: Manifest) -> bool:
    old = existing.manifest
    return (
        stored_spec(existing.kind, old) == spec
        and _comparable(old.get("metadata") or {}) == _comparable(metadata)
        and (old.get("status") or {}) == status
    )


def _known_after(write: ObjectWrite, existing: KnownObject | None, manifest: Manifest) -> KnownObject:
    old_generation = int((existing.manifest.get("metadata") or {}).get("generation") or 1) if existing else 0
    spec_changed = existing is None or stored_spec(existing.kind, existing.manifest) != write.spec
    metadata = {
        **write.metadata,
        "resourceVersion": str(write.expected_resource_version + 1),
        "generation": old_generation + 1 if spec_changed else old_generation,
    }
    full = {**manifest, "metadata": metadata}
    if write.status:
        full["status"] = write.status
    else:
        full.pop("status", None)
    return KnownObject(
        kind=write.kind,
        namespace=write.namespace,
        name=write.name,
        uid=write.uid,
        resource_version=write.expected_resource_version + 1,
        manifest=full,
    )


def _expand(
    job: Job, known: KnownObject, view: AdmissionView, decision: BatchDecision, ctx: ApplyContext
) -> None:
    """Job controller phase 1: the Job's Workload, PodGroup and Pods go through admission like any manifest."""
    stored_job = job.model_copy(deep=True)
    stored_job.metadata.uid = known.uid
    expansion = expand_job(stored_job)
    generated: list[ApiObject] = [o for o in (expansion.workload, expansion.podgroup) if o is not None]
    for obj in [*generated, *expansion.pods]:
        admit_document(obj.to_wire(), view, decision, ctx, generated_uid=obj.metadata.uid)
    decision.events.append(expanded_event(stored_job, known, expansion, ctx.request_id))
