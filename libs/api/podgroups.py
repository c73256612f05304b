"""Making PodGroups from Workload templates (for Job expansion and v1.35 conversion)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libs.api.annotations import WORKLOAD_REF_NAME
from libs.api.models.meta import ObjectMeta
from libs.api.models.scheduling import (
    PodGroup,
    PodGroupSpec,
    PodGroupTemplate,
    PodGroupTemplateReference,
    Workload,
    WorkloadTemplateReference,
)


def instantiate_pod_group(workload: Workload, template: PodGroupTemplate, name: str) -> PodGroup:
    """A PodGroup named `name` in the Workload's namespace, referring back to the template and carrying
    a copy of its policy, constraints, claims, disruption mode and priority."""
    ref = PodGroupTemplateReference(
        workload=WorkloadTemplateReference(workload_name=workload.name, pod_group_template_name=template.name)
    )
    return PodGroup(
        metadata=ObjectMeta(name=name, namespace=workload.namespace),
        spec=copy_template_policy(template, PodGroupSpec(pod_group_template_ref=ref)),
    )


def implied_pod_group(workload: Workload, template: PodGroupTemplate, name: str) -> PodGroup:
    """The PodGroup Podway creates for v1.35 pods' `workloadRef`: v1.35 has no PodGroup object, so this one
    is marked as the Workload's own and is deleted with it."""
    pod_group = instantiate_pod_group(workload, template, name)
    pod_group.metadata.annotations[WORKLOAD_REF_NAME] = workload.name
    return pod_group


def copy_template_policy(template: PodGroupTemplate, spec: PodGroupSpec) -> PodGroupSpec:
    """`spec` with every policy field copied from the template (its template reference is kept)."""
    copied = template.model_copy(deep=True)
    return spec.model_copy(
        update={
            "scheduling_policy": copied.scheduling_policy,
            "scheduling_constraints": copied.scheduling_constraints,
            "resource_claims": copied.resource_claims,
            "disruption_mode": copied.disruption_mode,
            "priority_class_name": copied.priority_class_name,
            "priority": copied.priority,
            "preemption_policy": copied.preemption_policy,
        }
    )


def complete_from_workload(pod_group: PodGroup, workload: Workload) -> PodGroup:
    """A PodGroup with every policy field copied from the Workload template it refers to (the template is
    the policy). Unchanged when the template does not exist."""
    ref = pod_group.spec.pod_group_template_ref
    template_name = (
        ref.workload.pod_group_template_name if ref is not None and ref.workload is not None else None
    )
    template = workload.spec.template(template_name) if template_name else None
    if template is None:
        return pod_group
    return pod_group.model_copy(update={"spec": copy_template_policy(template, pod_group.spec)}, deep=True)


def with_template_policy(doc: Mapping[str, Any], template: PodGroupTemplate) -> dict[str, Any]:
    """A PodGroup document (a copy) with the policy fields it leaves out taken from its template, so that it
    is validated as it will be stored. The priority is left to be resolved from the priority class."""
    return _with_policy(doc, template.to_wire())


def with_stored_policy(doc: Mapping[str, Any], stored_spec: Mapping[str, Any]) -> dict[str, Any]:
    """A PodGroup update (a copy) with the policy fields it leaves out taken from the stored PodGroup, not
    from its template: once a PodGroup exists its own policy is authoritative, so a minCount it was resized
    to is kept when a manifest that leaves the policy out is applied again."""
    return _with_policy(doc, stored_spec)


def _with_policy(doc: Mapping[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return dict(doc)  # decoding reports it
    policy = {key: value for key, value in source.items() if key in _POLICY_FIELDS}
    return {**doc, "spec": {**policy, **spec}}


_POLICY_FIELDS = frozenset(
    {
        "schedulingPolicy",
        "schedulingConstraints",
        "resourceClaims",
        "disruptionMode",
        "priorityClassName",
        "preemptionPolicy",
    }
)
