"""References admission resolves against the store: a PodGroup's Workload template, and the PodGroup that v1.35
pods' `workloadRef` implies.

As upstream, a PodGroup must name a Workload (and template) that exists and is not being deleted when it is
created; its policy is then the template's. A v1.35 pod names its Workload instead of its PodGroup: when that
Workload exists the implied PodGroup is created from it; otherwise the pod waits, and the PodGroup is created
when the Workload is admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libs.api.conversion import implied_pod_group_warning, workload_ref_of
from libs.api.errors import ROOT, FieldError, not_found
from libs.api.manifests import parse_object
from libs.api.models.core import Pod
from libs.api.models.scheduling import PodGroup, Workload
from libs.api.podgroups import implied_pod_group, with_template_policy
from libs.core.admission.model import AdmissionView, ObjectKey

_WORKLOAD_REF = ROOT.child("spec", "podGroupTemplateRef", "workload")
_COMPOSITE_REF = ROOT.child("spec", "workloadRef")


def live_workload(view: AdmissionView, namespace: str, name: str) -> Workload | None:
    """The stored Workload, unless it does not exist or is being deleted."""
    stored = view.get(("Workload", namespace, name))
    if stored is None or stored.deletion_requested:
        return None
    workload = parse_object(stored.manifest)
    assert isinstance(workload, Workload)
    return workload


def template_ref(doc: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(Workload name, template name) a PodGroup document refers to, if it names a Workload."""
    spec = doc.get("spec")
    ref = ((spec.get("podGroupTemplateRef") or {}) if isinstance(spec, dict) else {}).get("workload")
    if not isinstance(ref, dict) or not isinstance(ref.get("workloadName"), str):
        return None
    template = ref.get("podGroupTemplateName")
    return ref["workloadName"], template if isinstance(template, str) else None


def podgroup_with_template(
    key: ObjectKey, doc: Mapping[str, Any], view: AdmissionView
) -> tuple[Mapping[str, Any], Workload | None, list[FieldError]]:
    """A PodGroup document to validate, completed from the template it refers to; its Workload (when it
    exists); and the errors of a reference to a Workload or template that does not exist."""
    ref = template_ref(doc)
    if ref is None:
        return doc, None, []
    workload_name, template_name = ref
    workload = live_workload(view, key[1], workload_name)
    if workload is None:
        return doc, None, [not_found(_WORKLOAD_REF.child("workloadName"), workload_name)]
    template = workload.spec.template(template_name) if template_name else None
    if template is None:
        if template_name is None:
            return doc, workload, []  # validation reports the missing template name
        return doc, workload, [not_found(_WORKLOAD_REF.child("podGroupTemplateName"), template_name)]
    return with_template_policy(doc, template), workload, []


def composite_with_template(
    key: ObjectKey, doc: Mapping[str, Any], view: AdmissionView
) -> tuple[Mapping[str, Any], list[FieldError]]:
    """A new CompositePodGroup document with the policy fields it leaves out taken from the composite
    template its `workloadRef` names, and the errors of a reference to a Workload or template that does not
    exist."""
    spec = doc.get("spec")
    ref = spec.get("workloadRef") if isinstance(spec, dict) else None
    if (
        not isinstance(spec, dict)
        or not isinstance(ref, dict)
        or not isinstance(ref.get("workloadName"), str)
    ):
        return doc, []  # validation reports what is missing
    workload = live_workload(view, key[1], ref["workloadName"])
    if workload is None:
        return doc, [not_found(_COMPOSITE_REF.child("workloadName"), ref["workloadName"])]
    name = ref.get("templateName")
    template = workload.spec.composite_template(name) if isinstance(name, str) else None
    if template is None:
        return doc, [not_found(_COMPOSITE_REF.child("templateName"), name)] if isinstance(name, str) else []
    children = ("name", "priority", "podGroupTemplates", "compositePodGroupTemplates")
    policy = {key: value for key, value in template.to_wire().items() if key not in children}
    return {**doc, "spec": {**policy, **spec}}, []


def implied_podgroup(pod: Pod, view: AdmissionView) -> tuple[PodGroup | None, str | None]:
    """The PodGroup a v1.35 pod's `workloadRef` implies, to create now from its stored Workload, or the
    warning the pod waits with; (None, None) when there is nothing to create."""
    ref = workload_ref_of(pod.metadata.annotations)
    group_name = pod.spec.scheduling_group.pod_group_name if pod.spec.scheduling_group else None
    namespace = pod.namespace or ""
    if ref is None or not group_name or view.get(("PodGroup", namespace, group_name)) is not None:
        return None, None
    workload_name, template_name = ref
    workload = live_workload(view, namespace, workload_name)
    template = workload.spec.template(template_name) if workload is not None else None
    if workload is None or template is None:
        return None, waiting_warning(pod, workload_name, template_name, workload is None)
    return implied_pod_group(workload, template, group_name), None


def podgroups_awaiting(workload: Workload, view: AdmissionView) -> list[PodGroup]:
    """The PodGroups of pods that waited for this (new) Workload, to create with it, one per PodGroup name."""
    namespace = workload.namespace or ""
    groups: dict[str, PodGroup] = {}
    for pod in view.awaiting(namespace, workload.name):
        ref = workload_ref_of(pod.manifest["metadata"].get("annotations") or {})
        group_name = ((pod.manifest.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        template = workload.spec.template(ref[1]) if ref is not None else None
        if template is None or not isinstance(group_name, str) or group_name in groups:
            continue
        if view.get(("PodGroup", namespace, group_name)) is None:
            groups[group_name] = implied_pod_group(workload, template, group_name)
    return list(groups.values())


def created_warning(group: PodGroup) -> str:
    return implied_pod_group_warning(f"{group.namespace}/{group.name}" if group.namespace else group.name)


def waiting_warning(pod: Pod, workload: str, template: str, missing: bool) -> str:
    where = f"{pod.namespace}/{workload}" if pod.namespace else workload
    if missing:
        return f"Pod {pod.name} waits for Workload {where}, which does not exist yet"
    return f"Pod {pod.name} waits for Workload {where}, which has no podGroupTemplate {template!r}"
