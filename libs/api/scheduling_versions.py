"""`scheduling.k8s.io/v1beta1` (Kubernetes v1.37) Workload and PodGroup, converted to and from the version
Podway stores them in (v1alpha2's shape, with v1beta1's `preemptionPolicy`). v1alpha3's Workload and PodGroup
have the same shape and go the same way. See docs/scheduling-api.md.

What changed from v1alpha2, as kubernetes/api `scheduling/v1beta1/types.go` has it:

- PodGroup `spec.podGroupTemplateRef.workload {workloadName, podGroupTemplateName}` became
  `spec.workloadRef {workloadName, templateName}`;
- `disruptionMode` went from the string enum (`Pod`, `PodGroup`) to the union `{single: {}}` / `{all: {}}`;
- the condition `PodGroupScheduled` became `PodGroupInitiallyScheduled`, terminal once True. Podway keeps
  both: its own `PodGroupScheduled` (False again while a placed gang that was disrupted waits) and the first
  True in a `PodGroupInitiallyScheduled` of its own, written at each binding but never False. v1beta1 shows
  the latter once there is one, else the former renamed (why a gang never scheduled waits);
- templates and PodGroups gained `preemptionPolicy` (Never, PreemptLowerPriority), which Podway stores and
  its preemptor honours;
- Workloads gained `compositePodGroupTemplates` (a tree of CompositePodGroup templates whose PodGroup
  templates convert as the top-level ones do; a composite's own `disruptionMode` is the union in every
  version) and PodGroups `parentCompositePodGroupName`; both are stored as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Final

from libs.api.errors import ErrorType, FieldError
from libs.api.kinds import SCHEDULING_V1ALPHA2, SCHEDULING_V1BETA1
from libs.api.models.scheduling import DISRUPTION_MODE_POD, DISRUPTION_MODE_POD_GROUP

Document = dict[str, Any]

DISRUPTION_UNION: Final = {DISRUPTION_MODE_POD: "single", DISRUPTION_MODE_POD_GROUP: "all"}
SCHEDULED: Final = "PodGroupScheduled"
INITIALLY_SCHEDULED: Final = "PodGroupInitiallyScheduled"


SERVED_PATHS: Final = (
    ("spec.podGroupTemplateRef.workload.podGroupTemplateName", "spec.workloadRef.templateName"),
    ("spec.podGroupTemplateRef.workload.workloadName", "spec.workloadRef.workloadName"),
    ("spec.podGroupTemplateRef.workload", "spec.workloadRef"),
    ("spec.podGroupTemplateRef", "spec.workloadRef"),
)
"""Stored field paths → their v1beta1 names, longest first, for errors about a v1beta1 document."""
UNION: Final = "{`single`, `all`}"


def v1beta1_errors(errors: Sequence[FieldError]) -> tuple[FieldError, ...]:
    """Errors found in the stored shape of a v1beta1 document, named as v1beta1 names its fields; a
    disruption mode that is not exactly one of the union's members is reported as upstream reports a union."""
    return tuple(dict.fromkeys(_served_error(error) for error in errors))


def _served_error(error: FieldError) -> FieldError:
    path = next(
        (
            served + error.path[len(stored) :]
            for stored, served in SERVED_PATHS
            if error.path.startswith(stored)
        ),
        error.path,
    )
    if path.endswith("disruptionMode") and isinstance(error.value, dict):
        if error.value.keys() - {"single", "all"} or not error.value:
            return invalid_union(path, "must specify one of: `single`, `all`")
        return invalid_union(path, "exactly one of `single`, `all` is required, but multiple fields are set")
    return dataclasses.replace(error, path=path)


def invalid_union(path: str, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, path, UNION, detail)


def from_v1beta1(doc: Document) -> tuple[Document, list[str]]:
    """A v1beta1 Workload or PodGroup (a copy of the caller's, changed in place) in the stored shape, and the
    warnings (none: every v1beta1 field has a stored place)."""
    doc["apiVersion"] = SCHEDULING_V1ALPHA2
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return doc, []  # decoding reports it
    if doc.get("kind") == "Workload":
        _templates_as(spec, _stored_policy)
    else:
        _stored_reference(spec)
        doc["spec"] = _stored_policy(spec)
        if isinstance(doc.get("status"), dict):
            doc["status"] = _with_conditions(doc["status"], stored_conditions)
    return doc, []


def as_v1beta1(stored: Document, api_version: str = SCHEDULING_V1BETA1) -> Document:
    """A stored Workload or PodGroup as v1beta1 shows it (or v1alpha3, whose Workload and PodGroup are
    v1beta1's)."""
    doc = {**stored, "apiVersion": api_version}
    spec = stored.get("spec")
    if not isinstance(spec, dict):
        return doc
    if stored.get("kind") == "Workload":
        doc["spec"] = dict(spec)
        _templates_as(doc["spec"], _served_policy)
        return doc
    served = dict(_served_policy(spec))
    ref = served.pop("podGroupTemplateRef", None)
    workload = ref.get("workload") if isinstance(ref, dict) else None
    if isinstance(workload, dict):
        served["workloadRef"] = {
            k: v
            for k, v in (
                ("workloadName", workload.get("workloadName")),
                ("templateName", workload.get("podGroupTemplateName")),
            )
            if v is not None
        }
    doc["spec"] = served
    if isinstance(stored.get("status"), dict):
        doc["status"] = _with_conditions(stored["status"], served_conditions)
    return doc


def _templates_as(level: Document, policy: Callable[[Any], Any]) -> None:
    """Every PodGroup template of a Workload spec (or of a composite template below it, copied) with its
    disruption mode converted by `policy`."""
    templates = level.get("podGroupTemplates")
    if isinstance(templates, list):
        level["podGroupTemplates"] = [policy(t) for t in templates]
    composites = level.get("compositePodGroupTemplates")
    if isinstance(composites, list):
        level["compositePodGroupTemplates"] = [_composite_as(c, policy) for c in composites]


def _composite_as(template: Any, policy: Callable[[Any], Any]) -> Any:
    if not isinstance(template, dict):
        return template
    copied = dict(template)
    _templates_as(copied, policy)
    return copied


def _stored_reference(spec: Document) -> None:
    ref = spec.pop("workloadRef", None)
    if not isinstance(ref, dict):
        if ref is not None:
            spec["podGroupTemplateRef"] = ref  # decoding reports what is not an object
        return
    workload = {
        k: v
        for k, v in (
            ("workloadName", ref.get("workloadName")),
            ("podGroupTemplateName", ref.get("templateName")),
        )
        if v is not None
    }
    spec["podGroupTemplateRef"] = {"workload": workload}


def _stored_policy(group: Any) -> Any:
    """A template or PodGroup spec with its disruption mode as the stored string. A union that is not exactly
    one of `single` and `all` is left as it is, for validation to report."""
    if not isinstance(group, dict) or not isinstance(group.get("disruptionMode"), dict):
        return group
    chosen = [mode for mode, name in DISRUPTION_UNION.items() if name in group["disruptionMode"]]
    if len(chosen) != 1 or len(group["disruptionMode"]) != 1:
        return group
    return {**group, "disruptionMode": chosen[0]}


def _served_policy(group: Any) -> Any:
    if not isinstance(group, dict) or group.get("disruptionMode") not in DISRUPTION_UNION:
        return group
    return {**group, "disruptionMode": {DISRUPTION_UNION[group["disruptionMode"]]: {}}}


def served_conditions(conditions: list[Any]) -> list[Any]:
    """A stored PodGroup's conditions as v1beta1 shows them: `PodGroupInitiallyScheduled` True once the gang
    was first scheduled, whatever became of it since, and Podway's `PodGroupScheduled` left out (v1alpha2
    shows it); until then `PodGroupScheduled` under v1beta1's name, saying why the gang waits."""
    if any(_is_type(c, INITIALLY_SCHEDULED) and c.get("status") == "True" for c in conditions):
        return [c for c in conditions if not _is_type(c, SCHEDULED)]
    return [{**c, "type": INITIALLY_SCHEDULED} if _is_type(c, SCHEDULED) else c for c in conditions]


def stored_conditions(conditions: list[Any]) -> list[Any]:
    """v1beta1 conditions in the stored shape: a `PodGroupInitiallyScheduled` that is not True is the
    stored `PodGroupScheduled` it was shown from."""
    return [
        {**c, "type": SCHEDULED} if _is_type(c, INITIALLY_SCHEDULED) and c.get("status") != "True" else c
        for c in conditions
    ]


def _with_conditions(status: Document, shown: Callable[[list[Any]], list[Any]]) -> Document:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return status
    return {**status, "conditions": shown(conditions)}


def _is_type(condition: Any, type_: str) -> bool:
    return isinstance(condition, dict) and condition.get("type") == type_
