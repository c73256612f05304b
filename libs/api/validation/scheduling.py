"""Validation of `scheduling.k8s.io`: Workload, PodGroup (v1alpha2) and PriorityClass (v1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from libs.api.errors import (
    FieldError,
    FieldPath,
    forbidden,
    invalid,
    required,
    too_many,
)
from libs.api.formats import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    path_segment_name_errors,
)
from libs.api.models.core import PodResourceClaim
from libs.api.models.scheduling import (
    DISRUPTION_MODES,
    HIGHEST_USER_DEFINABLE_PRIORITY,
    PREEMPTION_POLICIES,
    SYSTEM_PRIORITY_CLASSES,
    CompositeDisruptionMode,
    CompositePodGroup,
    CompositePodGroupSchedulingPolicy,
    CompositePodGroupSpec,
    CompositePodGroupTemplate,
    PodGroup,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    PodGroupTemplate,
    PodGroupTemplateReference,
    PriorityClass,
    TypedLocalObjectReference,
    Workload,
    WorkloadReference,
)
from libs.api.validation.common import (
    INT32_MIN,
    check_enum,
    check_item_name,
    check_minimum,
    check_optional_format,
    check_required_format,
    check_unchanged,
)
from libs.api.validation.meta import METADATA, validate_object_meta

SPEC: Final = FieldPath("spec")
MAX_POD_GROUP_TEMPLATES: Final = 8
MAX_TOPOLOGY_CONSTRAINTS: Final = 1
MAX_POD_GROUP_RESOURCE_CLAIMS: Final = 4
SYSTEM_PRIORITY_CLASS_PREFIX: Final = "system-"
MAX_GROUP_TREE_DEPTH: Final = 4
"""Levels of a Workload's group tree, PodGroups included: up to three levels of CompositePodGroups."""
TEMPLATE_LISTS: Final = "`podGroupTemplates`, `compositePodGroupTemplates`"


def validate_workload(workload: Workload) -> list[FieldError]:
    """Every error of a Workload, in the order the API server reports them: metadata, controllerRef, each
    template's name and policy, the template count, then each template's constraints, claims,
    disruption mode and priority."""
    spec = workload.spec
    templates_path = SPEC.child("podGroupTemplates")
    errors = validate_object_meta(workload.metadata, namespaced=True)
    if spec.controller_ref is not None:
        errors += _validate_controller_ref(spec.controller_ref, SPEC.child("controllerRef"))
    if spec.composite_pod_group_templates:
        if spec.pod_group_templates:
            detail = f"exactly one of {TEMPLATE_LISTS} is required, but multiple fields are set"
            errors.append(invalid(SPEC, f"{{{TEMPLATE_LISTS}}}", detail))
        return errors + _validate_composite_templates(
            spec.composite_pod_group_templates, SPEC.child("compositePodGroupTemplates"), set(), 2
        )
    errors += _validate_template_identities(spec.pod_group_templates, templates_path)
    if not spec.pod_group_templates:
        errors.append(required(templates_path, "must have at least one item"))
    elif len(spec.pod_group_templates) > MAX_POD_GROUP_TEMPLATES:
        errors.append(too_many(templates_path, len(spec.pod_group_templates), MAX_POD_GROUP_TEMPLATES))
    for position, template in enumerate(spec.pod_group_templates):
        errors += _validate_group_settings(template, templates_path.index(position))
    return errors


def _validate_composite_templates(
    templates: Sequence[CompositePodGroupTemplate], path: FieldPath, seen: set[str], depth: int
) -> list[FieldError]:
    """A level of CompositePodGroup templates at `depth` (its children one deeper); template names, PodGroup
    templates' included, are unique in the whole tree, since a group's `workloadRef` names one."""
    errors: list[FieldError] = []
    if len(templates) > MAX_POD_GROUP_TEMPLATES:
        errors.append(too_many(path, len(templates), MAX_POD_GROUP_TEMPLATES))
    for position, template in enumerate(templates):
        errors += _validate_composite_template(template, path.index(position), seen, depth)
    return errors


def _validate_composite_template(
    template: CompositePodGroupTemplate, at: FieldPath, seen: set[str], depth: int
) -> list[FieldError]:
    errors = check_item_name(template.name, at, seen, dns1123_label_errors)
    errors += _validate_composite_settings(template, at)
    groups, composites = template.pod_group_templates, template.composite_pod_group_templates
    if not groups and not composites:
        detail = f"at least one of {TEMPLATE_LISTS} must be set"
        return [*errors, required(at.child("podGroupTemplates"), detail)]
    if depth >= MAX_GROUP_TREE_DEPTH and composites:
        detail = f"must not nest groups deeper than {MAX_GROUP_TREE_DEPTH} levels"
        errors.append(forbidden(at.child("compositePodGroupTemplates"), detail))
        composites = []
    groups_path = at.child("podGroupTemplates")
    if len(groups) > MAX_POD_GROUP_TEMPLATES:
        errors.append(too_many(groups_path, len(groups), MAX_POD_GROUP_TEMPLATES))
    for position, group in enumerate(groups):
        where = groups_path.index(position)
        errors += check_item_name(group.name, where, seen, dns1123_label_errors)
        errors += validate_scheduling_policy(group.scheduling_policy, where.child("schedulingPolicy"))
        errors += _validate_group_settings(group, where)
    return errors + _validate_composite_templates(
        composites, at.child("compositePodGroupTemplates"), seen, depth + 1
    )


def _validate_composite_settings(
    group: CompositePodGroupTemplate | CompositePodGroupSpec, path: FieldPath
) -> list[FieldError]:
    """What a composite template and a CompositePodGroup both say: policy, constraints, disruption, priority."""
    errors = _validate_composite_policy(group.scheduling_policy, path.child("schedulingPolicy"))
    if group.scheduling_constraints is not None:
        errors += _validate_constraints(group.scheduling_constraints, path.child("schedulingConstraints"))
    if group.disruption_mode is not None:
        errors += _validate_composite_disruption(group.disruption_mode, path.child("disruptionMode"))
    return errors + _validate_priority_settings(group, path)


def _validate_priority_settings(
    group: PodGroupTemplate | PodGroupSpec | CompositePodGroupTemplate | CompositePodGroupSpec,
    path: FieldPath,
) -> list[FieldError]:
    """What every group says of its priority: class name, value and preemption policy."""
    errors: list[FieldError] = []
    if group.priority_class_name:
        errors += check_optional_format(
            group.priority_class_name, path.child("priorityClassName"), dns1123_subdomain_errors
        )
    if group.priority is not None:
        errors += validate_priority_value(group.priority, path.child("priority"))
    if group.preemption_policy is not None:
        errors += check_enum(group.preemption_policy, path.child("preemptionPolicy"), PREEMPTION_POLICIES)
    return errors


def _validate_composite_policy(
    policy: CompositePodGroupSchedulingPolicy | None, path: FieldPath
) -> list[FieldError]:
    """Exactly one of `basic` or `gang`; a gang needs `minGroupCount >= 1`."""
    gang = policy.gang if policy is not None else None
    count = gang.min_group_count if gang is not None else None
    return _basic_or_gang(policy.basic if policy else None, gang, count, path, "minGroupCount")


def _validate_composite_disruption(mode: CompositeDisruptionMode, path: FieldPath) -> list[FieldError]:
    chosen = [name for name in ("single", "all") if getattr(mode, name) is not None]
    if not chosen:
        return [invalid(path, "", "must specify one of: `single`, `all`")]
    if len(chosen) > 1:
        detail = "exactly one of `single`, `all` is required, but multiple fields are set"
        return [invalid(path, "{`single`, `all`}", detail)]
    return []


def validate_composite_pod_group(group: CompositePodGroup) -> list[FieldError]:
    """Metadata, Workload reference, parent and policy of a CompositePodGroup."""
    spec = group.spec
    errors = validate_object_meta(group.metadata, namespaced=True)
    if spec.workload_ref is None:
        errors.append(required(SPEC.child("workloadRef")))
    else:
        errors += _validate_workload_ref(spec.workload_ref, SPEC.child("workloadRef"))
    errors += check_optional_format(
        spec.parent_composite_pod_group_name,
        SPEC.child("parentCompositePodGroupName"),
        dns1123_subdomain_errors,
    )
    return errors + _validate_composite_settings(spec, SPEC)


def _validate_workload_ref(ref: WorkloadReference, path: FieldPath) -> list[FieldError]:
    errors = check_required_format(ref.workload_name, path.child("workloadName"), dns1123_subdomain_errors)
    return errors + check_required_format(ref.template_name, path.child("templateName"), dns1123_label_errors)


def validate_composite_pod_group_update(old: CompositePodGroup, new: CompositePodGroup) -> list[FieldError]:
    """Every CompositePodGroup spec field is immutable."""
    old_spec, new_spec = old.spec.to_wire(), new.spec.to_wire()
    errors: list[FieldError] = []
    for field in sorted(old_spec.keys() | new_spec.keys()):
        errors += check_unchanged(old_spec.get(field), new_spec.get(field), SPEC.child(field))
    return errors


def _validate_template_identities(templates: Sequence[PodGroupTemplate], path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for position, template in enumerate(templates):
        at = path.index(position)
        errors += check_item_name(template.name, at, seen, dns1123_label_errors)
        errors += validate_scheduling_policy(template.scheduling_policy, at.child("schedulingPolicy"))
    return errors


def _validate_controller_ref(ref: TypedLocalObjectReference, path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    if ref.api_group:
        errors += [
            invalid(path.child("apiGroup"), ref.api_group, m) for m in dns1123_subdomain_errors(ref.api_group)
        ]
    errors += check_required_format(ref.kind, path.child("kind"), path_segment_name_errors)
    errors += check_required_format(ref.name, path.child("name"), path_segment_name_errors)
    return errors


def validate_scheduling_policy(policy: PodGroupSchedulingPolicy | None, path: FieldPath) -> list[FieldError]:
    """Exactly one of `basic` or `gang`; a gang needs `minCount >= 1` (0 counts as missing)."""
    gang = policy.gang if policy is not None else None
    count = gang.min_count if gang is not None else None
    return _basic_or_gang(policy.basic if policy else None, gang, count, path, "minCount")


def _basic_or_gang(
    basic: object, gang: object, count: int | None, path: FieldPath, field: str
) -> list[FieldError]:
    """The union of a group's (or a composite's) policy: exactly one member; a gang's count at least 1."""
    if basic is None and gang is None:
        return [invalid(path, "", "must specify one of: `basic`, `gang`")]
    if basic is not None and gang is not None:
        detail = "exactly one of `basic`, `gang` is required, but multiple fields are set"
        return [invalid(path, "{`basic`, `gang`}", detail)]
    if gang is None:
        return []
    if not count:
        return [required(path.child("gang", field))]
    return check_minimum(count, path.child("gang", field), 1)


def _validate_group_settings(group: PodGroupTemplate | PodGroupSpec, path: FieldPath) -> list[FieldError]:
    # The settings a template and a PodGroup share, beyond identity and policy.
    # Unset fields and empty lists have nothing to report: their checks are skipped outright.
    errors: list[FieldError] = []
    if group.scheduling_constraints is not None:
        errors += _validate_constraints(group.scheduling_constraints, path.child("schedulingConstraints"))
    if group.resource_claims:
        errors += _validate_group_claims(group.resource_claims, path.child("resourceClaims"))
    if group.disruption_mode is not None:
        errors += check_enum(group.disruption_mode, path.child("disruptionMode"), DISRUPTION_MODES)
    return errors + _validate_priority_settings(group, path)


def _validate_constraints(constraints: PodGroupSchedulingConstraints, path: FieldPath) -> list[FieldError]:
    topology_path = path.child("topology")
    errors: list[FieldError] = []
    for position, constraint in enumerate(constraints.topology):
        errors += check_required_format(
            constraint.key, topology_path.index(position).child("key"), label_key_errors
        )
    if len(constraints.topology) > MAX_TOPOLOGY_CONSTRAINTS:
        errors.append(too_many(topology_path, len(constraints.topology), MAX_TOPOLOGY_CONSTRAINTS))
    return errors


def _validate_group_claims(claims: Sequence[PodGroupResourceClaim], path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for position, claim in enumerate(claims):
        at = path.index(position)
        errors += check_item_name(claim.name, at, seen, dns1123_label_errors)
        errors += validate_claim_source(claim, at)
    if len(claims) > MAX_POD_GROUP_RESOURCE_CLAIMS:
        errors.append(too_many(path, len(claims), MAX_POD_GROUP_RESOURCE_CLAIMS))
    return errors


def validate_claim_source(
    claim: PodGroupResourceClaim | PodResourceClaim, path: FieldPath
) -> list[FieldError]:
    """Exactly one of `resourceClaimName` or `resourceClaimTemplateName`, each a DNS subdomain."""
    claim_name, template_name = claim.resource_claim_name, claim.resource_claim_template_name
    if claim_name is None and template_name is None:
        detail = "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
        return [invalid(path, claim.to_wire(), detail)]
    if claim_name is not None and template_name is not None:
        detail = "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
        return [invalid(path, claim.to_wire(), detail)]
    if claim_name is not None:
        return check_required_format(claim_name, path.child("resourceClaimName"), dns1123_subdomain_errors)
    return check_required_format(
        template_name, path.child("resourceClaimTemplateName"), dns1123_subdomain_errors
    )


def validate_priority_value(priority: int | None, path: FieldPath) -> list[FieldError]:
    """An int32 no higher than the highest user-definable priority (1000000000)."""
    if priority is None:
        return []
    if priority > HIGHEST_USER_DEFINABLE_PRIORITY:
        return [invalid(path, priority, f"must be less than or equal to {HIGHEST_USER_DEFINABLE_PRIORITY}")]
    return check_minimum(priority, path, INT32_MIN)


def validate_pod_group(pod_group: PodGroup) -> list[FieldError]:
    """Metadata, template reference, policy and settings of a PodGroup."""
    spec = pod_group.spec
    errors = validate_object_meta(pod_group.metadata, namespaced=True)
    if spec.pod_group_template_ref is not None:
        errors += _validate_template_ref(spec.pod_group_template_ref, SPEC.child("podGroupTemplateRef"))
    errors += check_optional_format(
        spec.parent_composite_pod_group_name,
        SPEC.child("parentCompositePodGroupName"),
        dns1123_subdomain_errors,
    )
    errors += validate_scheduling_policy(spec.scheduling_policy, SPEC.child("schedulingPolicy"))
    return errors + _validate_group_settings(spec, SPEC)


def _validate_template_ref(ref: PodGroupTemplateReference, path: FieldPath) -> list[FieldError]:
    workload_path = path.child("workload")
    if ref.workload is None:
        return [required(workload_path)]
    errors = check_required_format(
        ref.workload.workload_name, workload_path.child("workloadName"), dns1123_subdomain_errors
    )
    template_path = workload_path.child("podGroupTemplateName")
    return errors + check_required_format(
        ref.workload.pod_group_template_name, template_path, dns1123_label_errors
    )


def validate_workload_update(old: Workload, new: Workload) -> list[FieldError]:
    """Templates may not be added, removed or renamed; a template's fields are immutable except its
    `gang.minCount` (elastic gangs, v1.37). The controllerRef is immutable."""
    templates_path, controller_path = SPEC.child("podGroupTemplates"), SPEC.child("controllerRef")
    old_templates, new_templates = old.spec.pod_group_templates, new.spec.pod_group_templates
    if [t.name for t in old_templates] != [t.name for t in new_templates]:
        errors = check_unchanged(old_templates, new_templates, templates_path)
    else:
        errors = []
        for position, (before, after) in enumerate(zip(old_templates, new_templates, strict=True)):
            errors += _policy_changes(before.to_wire(), after.to_wire(), templates_path.index(position))
    errors += check_unchanged(
        old.spec.composite_pod_group_templates,
        new.spec.composite_pod_group_templates,
        SPEC.child("compositePodGroupTemplates"),
    )
    return errors + check_unchanged(old.spec.controller_ref, new.spec.controller_ref, controller_path)


_POD_GROUP_SPEC_FIELDS: Final = (
    "podGroupTemplateRef",
    "parentCompositePodGroupName",
    "schedulingPolicy",
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
)


def validate_pod_group_update(old: PodGroup, new: PodGroup) -> list[FieldError]:
    """Every PodGroup spec field is immutable except `schedulingPolicy.gang.minCount` (elastic gangs,
    v1.37); a gang stays a gang and a basic group stays basic."""
    return _policy_changes(old.spec.to_wire(), new.spec.to_wire(), SPEC)


def _policy_changes(old: Mapping[str, Any], new: Mapping[str, Any], path: FieldPath) -> list[FieldError]:
    """`field is immutable` for each changed field of a template or PodGroup spec, a gang's minCount aside."""
    errors: list[FieldError] = []
    for field in _POD_GROUP_SPEC_FIELDS:
        before, after = old.get(field), new.get(field)
        if field == "schedulingPolicy" and _without_min_count(before) == _without_min_count(after):
            continue
        errors += check_unchanged(before, after, path.child(field))
    return errors


def _without_min_count(policy: Any) -> Any:
    # Two gang policies differing in minCount alone are the same policy resized.
    if isinstance(policy, Mapping) and isinstance(policy.get("gang"), Mapping):
        return {**policy, "gang": {k: v for k, v in policy["gang"].items() if k != "minCount"}}
    return policy


def validate_priority_class(priority_class: PriorityClass) -> list[FieldError]:
    """Name (system- prefix reserved), value (<= 1000000000 for user classes) and preemption policy."""
    errors = validate_object_meta(priority_class.metadata, namespaced=False)
    name = priority_class.name
    if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        problem = _system_class_problem(priority_class)
        if problem:
            detail = f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are reserved for system use only. error: {problem}"
            errors.append(forbidden(METADATA.child("name"), detail))
    elif priority_class.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        detail = f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
        errors.append(forbidden(FieldPath("value"), detail))
    if priority_class.preemption_policy == "":
        errors.append(required(FieldPath("preemptionPolicy")))
    errors += check_enum(
        priority_class.preemption_policy or None, FieldPath("preemptionPolicy"), PREEMPTION_POLICIES
    )
    return errors


def _system_class_problem(priority_class: PriorityClass) -> str:
    name = priority_class.name
    if name not in SYSTEM_PRIORITY_CLASSES:
        return f"{name} is not a known system priority class"
    if priority_class.value != SYSTEM_PRIORITY_CLASSES[name]:
        return f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
    if priority_class.global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def validate_priority_class_update(old: PriorityClass, new: PriorityClass) -> list[FieldError]:
    """A PriorityClass keeps its value and preemption policy."""
    errors: list[FieldError] = []
    if old.value != new.value:
        errors.append(forbidden(FieldPath("value"), "may not be changed in an update."))
    return errors + check_unchanged(
        old.preemption_policy, new.preemption_policy, FieldPath("preemptionPolicy")
    )
