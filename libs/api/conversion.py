"""v1.35 → v1.36 conversion of documents (plain dicts), accepted on input and answered with warnings.

- `scheduling.k8s.io/v1alpha1` Workload `spec.podGroups[] {name, policy}` becomes v1alpha2
  `spec.podGroupTemplates[] {name, schedulingPolicy}`.
- A Pod's `spec.workloadRef {name, podGroup, podGroupReplicaKey}` becomes `spec.schedulingGroup
  {podGroupName}` naming the PodGroup of that (namespace, workload, podGroup, replicaKey), `W-G` or `W-G-K`;
  the reference is kept in the pod's `podway.io/workload-ref-*` annotations. When the Workload is in the
  same batch, the PodGroup is created here from its template; otherwise admission creates it from the stored
  Workload, at once or when that Workload is admitted (the pods wait for it until then).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from libs.api import annotations as podway
from libs.api.kinds import (
    BETA_SHAPED,
    CORE_V1,
    KUEUE_V1BETA1,
    QUOTA_KINDS,
    SCHEDULING_V1ALPHA1,
    SCHEDULING_V1ALPHA2,
    SCHEDULING_V1ALPHA3,
    SCHEDULING_V1BETA1,
)
from libs.api.kueue_versions import from_kueue_v1beta1
from libs.api.models.scheduling import Workload
from libs.api.podgroups import implied_pod_group
from libs.api.scheduling_versions import as_v1beta1, from_v1beta1

WORKLOAD_CONVERTED: Final = (
    f"{SCHEDULING_V1ALPHA1} Workload is deprecated; converted to {SCHEDULING_V1ALPHA2}"
)
WORKLOAD_REF_CONVERTED: Final = (
    "v1 Pod spec.workloadRef (v1.35) is deprecated; converted to spec.schedulingGroup"
)

KEPT_TEMPLATES: Final = "podway.io/v1alpha2-pod-group-templates"
"""Where a v1alpha1 Workload read back keeps its v1alpha2 templates whole."""

Document = dict[str, Any]
_GroupKey = tuple[str | None, str, str, str | None]


def legacy_pod_group_name(workload: str, pod_group: str, replica_key: str | None = None) -> str:
    """The deterministic name of the PodGroup implied by a v1.35 workloadRef: `W-G` or `W-G-K`."""
    return f"{workload}-{pod_group}-{replica_key}" if replica_key else f"{workload}-{pod_group}"


def convert_document(doc: Mapping[str, Any]) -> tuple[Document, list[str]]:
    """One document in its v1.36 shape (a copy) and the warnings; v1.36 documents come back unchanged."""
    converted = copy_document(doc)
    if converted.get("apiVersion") == SCHEDULING_V1ALPHA1 and converted.get("kind") == "Workload":
        return _convert_workload(converted), [WORKLOAD_CONVERTED]
    if converted.get("apiVersion") in BETA_SHAPED and converted.get("kind") in ("Workload", "PodGroup"):
        return from_v1beta1(converted)
    if converted.get("apiVersion") == KUEUE_V1BETA1 and converted.get("kind") in QUOTA_KINDS:
        return from_kueue_v1beta1(converted)
    if _legacy_reference(converted) is not None:
        return _convert_pod(converted), [WORKLOAD_REF_CONVERTED]
    return converted, []


_ATOMIC: Final = frozenset({str, int, float, bool, type(None)})


def copy_document(doc: Mapping[str, Any]) -> Document:
    """A deep copy of a decoded JSON/YAML document: plain dicts and lists are rebuilt, strings and numbers
    shared, anything else (datetimes, sets from YAML tags) deep-copied. Several times cheaper than
    copy.deepcopy on manifests; unlike it, a dict or list the document holds twice (a YAML alias) comes
    back as two independent copies."""
    copied: Document = {}
    for key, value in doc.items():
        kind = type(value)
        copied[key] = value if kind in _ATOMIC else _copy_value(value, kind)
    return copied


def copy_value(value: Any) -> Any:
    """A deep copy of any decoded JSON/YAML value, as `copy_document` copies."""
    kind = type(value)
    return value if kind in _ATOMIC else _copy_value(value, kind)


def _copy_value(value: Any, kind: type) -> Any:
    if kind is dict:
        copied = {}
        for key, item in value.items():
            item_kind = type(item)
            copied[key] = item if item_kind in _ATOMIC else _copy_value(item, item_kind)
        return copied
    if kind is list:
        return [item if type(item) in _ATOMIC else _copy_value(item, type(item)) for item in value]
    return copy.deepcopy(value)


def convert_documents(docs: Iterable[Mapping[str, Any]]) -> tuple[list[Document], list[str]]:
    """A batch in its v1.36 shape, plus the PodGroups implied by pods' workloadRefs (appended, skipping
    any the batch already holds), and one warning per converted or created object."""
    converted: list[Document] = []
    warnings: list[str] = []
    group_keys: dict[_GroupKey, None] = {}
    for doc in docs:
        reference = _legacy_reference(doc)
        if reference is not None:
            group_keys[reference] = None
        new_doc, doc_warnings = convert_document(doc)
        converted.append(new_doc)
        warnings += doc_warnings
    for key in group_keys:
        pod_group, pod_group_warnings = _implied_pod_group(key, converted)
        if pod_group is not None:
            converted.append(pod_group)
        warnings += pod_group_warnings
    return converted, warnings


def _convert_workload(doc: Document) -> Document:
    doc["apiVersion"] = SCHEDULING_V1ALPHA2
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        return doc  # decoding then reports `spec: Invalid value: ...: must be an object`
    kept = _kept_templates(doc)
    if "podGroups" not in spec and "compositePodGroupTemplates" in spec:
        return doc  # a tree of composite templates, which v1alpha1 passes through as it is
    pod_groups = spec.pop("podGroups", None) or []
    # A non-list is passed through unchanged so that decoding reports it, rather than converting its parts.
    spec["podGroupTemplates"] = (
        [_restored(_convert_pod_group_entry(entry), kept) for entry in pod_groups]
        if isinstance(pod_groups, list)
        else pod_groups
    )
    doc["spec"] = spec
    return doc


def _kept_templates(doc: Document) -> dict[str, Any]:
    """The v1alpha2 templates a v1alpha1 reader was handed in the annotation (consumed), by name."""
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        return {}
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict) or KEPT_TEMPLATES not in annotations:
        return {}
    text = annotations.pop(KEPT_TEMPLATES)
    if not annotations:
        del metadata["annotations"]
    try:
        templates = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return {}
    return {t["name"]: t for t in templates if isinstance(t, dict) and isinstance(t.get("name"), str)}


def _restored(template: Any, kept: dict[str, Any]) -> Any:
    """A converted template with the fields v1alpha1 cannot hold, from the kept template of its name."""
    if not isinstance(template, dict) or template.get("name") not in kept:
        return template
    return {**kept[template["name"]], **template}


def workload_as_v1alpha1(doc: Mapping[str, Any]) -> Document:
    """A stored (v1alpha2) Workload as a v1.35 reader sees it: `podGroupTemplates` as `podGroups {name,
    policy}`; the templates whole in the `podway.io/v1alpha2-pod-group-templates` annotation, so that what the
    reader writes back loses nothing v1alpha1 cannot say."""
    out = copy_document(doc)
    out["apiVersion"] = SCHEDULING_V1ALPHA1
    given = out.get("spec")
    spec: dict[str, Any] = given if isinstance(given, dict) else {}
    templates = [t for t in spec.pop("podGroupTemplates", None) or [] if isinstance(t, dict)]
    if not templates and "compositePodGroupTemplates" in spec:
        return out
    spec["podGroups"] = [
        {"name": t.get("name"), **({"policy": t["schedulingPolicy"]} if "schedulingPolicy" in t else {})}
        for t in templates
    ]
    out["spec"] = spec
    if any(set(t) - {"name", "schedulingPolicy"} for t in templates):
        metadata = out.setdefault("metadata", {})
        annotations = metadata.setdefault("annotations", {})
        annotations[KEPT_TEMPLATES] = json.dumps(templates, sort_keys=True, separators=(",", ":"))
    return out


def _convert_pod_group_entry(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    template = {key: value for key, value in entry.items() if key != "policy"}
    policy = entry.get("policy")
    if isinstance(policy, dict) and isinstance(policy.get("gang"), dict):
        # v1alpha1's desiredCount has no v1alpha2 counterpart.
        policy = {**policy, "gang": {k: v for k, v in policy["gang"].items() if k != "desiredCount"}}
    if policy is not None:
        template["schedulingPolicy"] = policy
    return template


def _legacy_reference(doc: Mapping[str, Any]) -> _GroupKey | None:
    """The PodGroup a v1.35 pod's workloadRef names, for a pod to convert: one that names no
    `schedulingGroup`, or names the same PodGroup there (as `kubectl apply` sends a converted pod again: its
    patch puts back the workloadRef of the last manifest applied). Naming two is left to validation."""
    if doc.get("apiVersion") != CORE_V1 or doc.get("kind") != "Pod":
        return None
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return None
    key = _workload_reference(doc, spec)
    if key is None or "schedulingGroup" not in spec:
        return key
    group = spec.get("schedulingGroup")
    named = group.get("podGroupName") if isinstance(group, dict) else None
    return key if named == legacy_pod_group_name(*key[1:]) else None


def _workload_reference(doc: Mapping[str, Any], spec: Mapping[str, Any]) -> _GroupKey | None:
    reference = spec.get("workloadRef")
    if not isinstance(reference, dict):
        return None
    workload, pod_group = reference.get("name"), reference.get("podGroup")
    if not isinstance(workload, str) or not isinstance(pod_group, str) or not workload or not pod_group:
        return None
    metadata = doc.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    replica_key = reference.get("podGroupReplicaKey") or None
    if not isinstance(namespace, str | None) or not isinstance(replica_key, str | None):
        return None  # malformed: decoding the pod reports it
    return namespace, workload, pod_group, replica_key


def _convert_pod(doc: Document) -> Document:
    spec = doc["spec"]
    reference = spec.pop("workloadRef")
    replica_key = reference.get("podGroupReplicaKey") or None
    name = legacy_pod_group_name(reference["name"], reference["podGroup"], replica_key)
    spec["schedulingGroup"] = {"podGroupName": name}
    metadata = doc.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("annotations") or {}, dict):
        # (anything else is reported by decoding)
        recorded = {
            podway.WORKLOAD_REF_NAME: reference["name"],
            podway.WORKLOAD_REF_POD_GROUP: reference["podGroup"],
        }
        if replica_key:
            recorded[podway.WORKLOAD_REF_REPLICA_KEY] = replica_key
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **recorded}
    return doc


def workload_ref_of(annotations: Any) -> tuple[str, str] | None:
    """The (Workload, template) a converted v1.35 pod's annotations record, if any."""
    if not isinstance(annotations, Mapping):
        return None
    workload = annotations.get(podway.WORKLOAD_REF_NAME)
    template = annotations.get(podway.WORKLOAD_REF_POD_GROUP)
    if isinstance(workload, str) and isinstance(template, str):
        return workload, template
    return None


def _implied_pod_group(key: _GroupKey, batch: list[Document]) -> tuple[Document | None, list[str]]:
    namespace, workload_name, template_name, replica_key = key
    name = legacy_pod_group_name(workload_name, template_name, replica_key)
    where = f"{namespace}/{name}" if namespace else name
    if _find(batch, "PodGroup", namespace, name) is not None:
        return None, []
    workload = _parse_workload(_find(batch, "Workload", namespace, workload_name))
    template = workload.spec.template(template_name) if workload is not None else None
    if workload is not None and template is not None:
        pod_group = implied_pod_group(workload, template, name)
        return pod_group.to_wire(), [implied_pod_group_warning(where)]
    return None, []


def implied_pod_group_warning(where: str) -> str:
    """The warning a PodGroup created for pods' v1.35 `spec.workloadRef` is answered with."""
    return f"created PodGroup {where} for pods' spec.workloadRef"


def _find(batch: list[Document], kind: str, namespace: str | None, name: str) -> Document | None:
    for doc in batch:
        metadata = doc.get("metadata") or {}
        if (
            doc.get("kind") == kind
            and metadata.get("name") == name
            and metadata.get("namespace") == namespace
        ):
            return doc
    return None


def _parse_workload(doc: Document | None) -> Workload | None:
    if doc is None or doc.get("apiVersion") != SCHEDULING_V1ALPHA2:
        return None
    try:
        return Workload.model_validate(doc)
    except ValidationError:
        return None


SERVED_VERSIONS: Final = {
    SCHEDULING_V1ALPHA1: ("Workload",),
    SCHEDULING_V1ALPHA2: ("Workload", "PodGroup"),
    SCHEDULING_V1ALPHA3: ("Workload", "PodGroup", "CompositePodGroup"),
    SCHEDULING_V1BETA1: ("Workload", "PodGroup"),
}
"""The scheduling versions a stored Workload or PodGroup can be shown in."""


def served_as(stored: Mapping[str, Any], api_version: str) -> Document | None:
    """A stored Workload or PodGroup in `api_version`; None when that version has no such kind."""
    kind = str(stored.get("kind"))
    if kind not in SERVED_VERSIONS.get(api_version, ()):
        return None
    if api_version == SCHEDULING_V1ALPHA1:
        return workload_as_v1alpha1(stored)
    if api_version in BETA_SHAPED and kind != "CompositePodGroup":
        return as_v1beta1(dict(stored), api_version)
    return dict(stored)


def documents_as(docs: Iterable[Mapping[str, Any]], api_version: str) -> tuple[list[Document], list[str]]:
    """Manifests with their Workloads and PodGroups in `api_version` (what `podway convert --to` prints):
    v1.35 pods' workloadRefs converted and their PodGroups made; a kind the version lacks is left as it is,
    with a warning."""
    stored, warnings = convert_documents(docs)
    shown = []
    for doc in stored:
        converted = served_as(doc, api_version) if doc.get("kind") in ("Workload", "PodGroup") else doc
        if converted is None:
            warnings.append(
                f"{doc.get('kind')} {doc['metadata'].get('name')}: {api_version} has no {doc.get('kind')}"
            )
        shown.append(converted or doc)
    return shown, list(dict.fromkeys(warnings))
