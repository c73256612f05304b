"""Making PodGroups from Workload templates (for Job expansion and v1.35 conversion)."""

from __future__ import annotations

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
        }
    )


def complete_from_workload(pod_group: PodGroup, workload: Workload) -> PodGroup:
    """A PodGroup made from a v1.35 `workloadRef` before its Workload was known, with its policy now
    copied from the referenced template. Unchanged when the template does not exist."""
    ref = pod_group.spec.pod_group_template_ref
    template_name = (
        ref.workload.pod_group_template_name if ref is not None and ref.workload is not None else None
    )
    template = workload.spec.template(template_name) if template_name else None
    if template is None:
        return pod_group
    return pod_group.model_copy(update={"spec": copy_template_policy(template, pod_group.spec)}, deep=True)


def workload_missing_warning(pod_group: PodGroup) -> str | None:
    """The warning a PodGroup is admitted with when its Workload does not exist (yet); None when it names
    no Workload. The scheduler does not try such a group until the Workload appears."""
    workload_name = pod_group.spec.workload_name
    if not workload_name:
        return None
    where = f"{pod_group.namespace}/{pod_group.name}" if pod_group.namespace else pod_group.name
    return f'PodGroup {where} waits for Workload "{workload_name}", which does not exist yet'
