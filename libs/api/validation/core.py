"""Validation of `core/v1` Pod and Node: the fields Podway schedules on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import Any, Final

from libs.api.errors import (
    FieldError,
    FieldPath,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    required,
)
from libs.api.formats import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
)
from libs.api.models.base import PODWAY_STATUS
from libs.api.models.core import (
    TAINT_EFFECTS,
    TOLERATION_OPERATORS,
    Container,
    Namespace,
    Node,
    Pod,
    PodSpec,
    Taint,
    Toleration,
)
from libs.api.models.scheduling import PREEMPTION_POLICIES
from libs.api.quantity import QuantityError, parse_quantity
from libs.api.validation.common import (
    INT32_MAX,
    INT32_MIN,
    check_enum,
    check_item_name,
    check_minimum,
    check_optional_format,
    check_required_format,
    check_unchanged,
)
from libs.api.validation.meta import validate_labels, validate_object_meta
from libs.api.validation.scheduling import validate_claim_source

SPEC: Final = FieldPath("spec")
POD_RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")


def validate_pod(pod: Pod) -> list[FieldError]:
    """Metadata and spec of a Pod."""
    errors = validate_object_meta(pod.metadata, namespaced=True)
    errors += validate_pod_spec(pod.spec, SPEC)
    return errors + check_enum(pod.spec.restart_policy, SPEC.child("restartPolicy"), POD_RESTART_POLICIES)


def validate_pod_spec(spec: PodSpec, path: FieldPath) -> list[FieldError]:
    """A pod spec at `path` (`spec` of a Pod, `spec.template.spec` of a Job)."""
    # Checks of empty lists and maps are skipped outright below (they would find nothing).
    claim_names: set[str] = set()
    errors: list[FieldError] = []
    if spec.resource_claims:
        claim_names = {claim.name for claim in spec.resource_claims if claim.name}
        errors += _validate_pod_claims(spec, path.child("resourceClaims"))
    if not spec.containers:
        errors.append(required(path.child("containers")))
    seen: set[str] = set()
    for field, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for position, container in enumerate(containers):
            errors += _validate_container(container, path.child(field).index(position), seen, claim_names)
    errors += _validate_scheduling_fields(spec, path)
    if spec.node_selector:
        errors += validate_labels(spec.node_selector, path.child("nodeSelector"))
    for position, toleration in enumerate(spec.tolerations):
        errors += _validate_toleration(toleration, path.child("tolerations").index(position))
    return errors


def _validate_pod_claims(spec: PodSpec, path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for position, claim in enumerate(spec.resource_claims):
        at = path.index(position)
        errors += check_item_name(claim.name, at, seen, dns1123_label_errors)
        errors += validate_claim_source(claim, at)
    return errors


def _validate_scheduling_fields(spec: PodSpec, path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    if spec.scheduling_group is not None:
        group_path = path.child("schedulingGroup", "podGroupName")
        errors += check_required_format(
            spec.scheduling_group.pod_group_name, group_path, dns1123_subdomain_errors
        )
    if spec.workload_ref is not None:
        detail = (
            "may not be set together with `schedulingGroup`"
            if spec.scheduling_group is not None
            else "replaced by `schedulingGroup` in v1.36; convert the manifest (podway convert)"
        )
        errors.append(forbidden(path.child("workloadRef"), detail))
    # Each check is skipped outright when its field is unset (it would find nothing).
    if spec.scheduler_name:
        errors += check_optional_format(
            spec.scheduler_name, path.child("schedulerName"), dns1123_subdomain_errors
        )
    if spec.priority_class_name:
        errors += check_optional_format(
            spec.priority_class_name, path.child("priorityClassName"), dns1123_subdomain_errors
        )
    if spec.priority is not None:
        errors += check_minimum(spec.priority, path.child("priority"), INT32_MIN)
        if spec.priority > INT32_MAX:
            errors.append(
                invalid(path.child("priority"), spec.priority, f"must be less than or equal to {INT32_MAX}")
            )
    if spec.preemption_policy is not None:
        errors += check_enum(spec.preemption_policy, path.child("preemptionPolicy"), PREEMPTION_POLICIES)
    if spec.node_name:
        errors += check_optional_format(spec.node_name, path.child("nodeName"), dns1123_subdomain_errors)
    return errors


def _validate_container(
    container: Container, path: FieldPath, seen: set[str], claim_names: set[str]
) -> list[FieldError]:
    errors = check_item_name(container.name, path, seen, dns1123_label_errors)
    if not container.image:
        errors.append(required(path.child("image")))
    resources_path = path.child("resources")
    resources = container.resources
    requests, limits = resources.requests, resources.limits
    if limits:
        errors += validate_resource_list(limits, resources_path.child("limits"))
    if requests:
        errors += validate_resource_list(requests, resources_path.child("requests"))
        errors += _validate_requests_within_limits(requests, limits, resources_path.child("requests"))
    if resources.claims:
        errors += _validate_container_claims(container, resources_path.child("claims"), claim_names)
    return errors


def validate_resource_list(resources: Mapping[str, str], path: FieldPath) -> list[FieldError]:
    """Quantities of a resource list: parseable, not negative, whole for extended resources."""
    errors: list[FieldError] = []
    for name, text in resources.items():
        try:
            detail = _quantity_problem(name, text)
        except TypeError:  # unhashable: judge it uncached
            detail = _quantity_problem.__wrapped__(name, text)
        if detail is not None:
            errors.append(invalid(path.key(name), text, detail))
    return errors


@lru_cache(maxsize=4096, typed=True)
def _quantity_problem(name: str, text: str) -> str | None:
    # The same few (resource, quantity) pairs come back on every pod: the verdict is cached.
    try:
        amount = parse_quantity(text)
    except QuantityError as error:
        return str(error)
    if amount < 0:
        return "must be greater than or equal to 0"
    if _is_extended_resource(name) and amount != amount.to_integral_value():
        return "must be an integer"
    return None


def _is_extended_resource(name: str) -> bool:
    domain = name.partition("/")[0] if "/" in name else ""
    return bool(domain) and domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def _validate_requests_within_limits(
    requests: Mapping[str, str], limits: Mapping[str, str], path: FieldPath
) -> list[FieldError]:
    errors: list[FieldError] = []
    if not limits:  # nothing to exceed
        return errors
    for name, text in requests.items():
        request, limit = _amount(text), _amount(limits.get(name))
        if request is not None and limit is not None and request > limit:
            detail = f"must be less than or equal to {name} limit of {limits[name]}"
            errors.append(invalid(path.key(name), text, detail))
    return errors


def _amount(text: str | None) -> Decimal | None:
    if text is None:
        return None
    try:
        return parse_quantity(text)
    except QuantityError:
        return None


def _validate_container_claims(
    container: Container, path: FieldPath, claim_names: set[str]
) -> list[FieldError]:
    errors: list[FieldError] = []
    used: set[tuple[str, str]] = set()
    for position, claim in enumerate(container.resources.claims):
        at = path.index(position)
        name = claim.name or ""
        if not name:
            errors.append(required(at.child("name")))
            continue
        if (name, claim.request or "") in used:
            errors.append(duplicate(at, name))
        used.add((name, claim.request or ""))
        if name not in claim_names:
            errors.append(not_found(at, name, _claim_names_detail(claim_names)))
    return errors


def _claim_names_detail(claim_names: set[str]) -> str:
    detail = "must be one of the names in pod.spec.resourceClaims"
    return f"{detail} which is empty" if not claim_names else f"{detail}: {', '.join(sorted(claim_names))}"


def _validate_toleration(toleration: Toleration, path: FieldPath) -> list[FieldError]:
    errors = check_optional_format(toleration.key, path.child("key"), label_key_errors)
    operator = toleration.operator or "Equal"
    if not toleration.key and operator != "Exists":
        detail = 'operator must be Exists when `key` is empty, which means "match all values and all keys"'
        errors.append(invalid(path.child("operator"), operator, detail))
    if operator == "Exists" and toleration.value:
        detail = "value must be empty when `operator` is 'Exists'"
        errors.append(invalid(path.child("operator"), toleration.to_wire(), detail))
    elif operator == "Equal" and toleration.value:
        errors += [
            invalid(path.child("value"), toleration.value, m) for m in label_value_errors(toleration.value)
        ]
    errors += check_enum(toleration.operator or None, path.child("operator"), TOLERATION_OPERATORS)
    errors += check_enum(toleration.effect or None, path.child("effect"), TAINT_EFFECTS)
    return errors


POD_UPDATE_FORBIDDEN: Final = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def validate_pod_update(old: Pod, new: Pod) -> list[FieldError]:
    """A pod keeps its schedulingGroup, and its spec but for the fields upstream lets an update change
    (`ValidatePodUpdate`): what it asks of a node was counted when it was placed, and is never counted again."""
    errors = check_unchanged(
        old.spec.scheduling_group, new.spec.scheduling_group, SPEC.child("schedulingGroup")
    )
    old_spec, new_spec = old.spec.to_wire(), new.spec.to_wire()
    if new_spec.get("nodeName") in (None, _node_ran_on(old)):
        # A binding is not part of the stored spec: `podway get` shows it as spec.nodeName, so a manifest
        # read back from it names the node the pod is on, and one written by hand names none. Neither
        # asks for a change.
        _take(new_spec, old_spec, "nodeName")
    if _without_mutable_fields(new_spec, old_spec) != old_spec:
        errors.append(forbidden(SPEC, POD_UPDATE_FORBIDDEN))
    return errors


def _node_ran_on(pod: Pod) -> str | None:
    block = (pod.status.model_extra or {}).get(PODWAY_STATUS)
    node = block.get("nodeName") if isinstance(block, dict) else None
    return node if isinstance(node, str) else None


def _without_mutable_fields(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """`new` with what an update may change taken back from `old` (schedulingGroup too: it is reported on
    its own), so that any difference left is forbidden."""
    spec = {**new}
    for field in ("containers", "initContainers"):
        old_containers, new_containers = old.get(field) or [], spec.get(field) or []
        if new_containers and len(old_containers) == len(new_containers):
            spec[field] = [
                _with_image_of(container, before)
                for container, before in zip(new_containers, old_containers, strict=True)
            ]
    old_tolerations, new_tolerations = old.get("tolerations") or [], spec.get("tolerations") or []
    if all(toleration in new_tolerations for toleration in old_tolerations):
        _take(spec, old, "tolerations")
    grace, old_grace = spec.get("terminationGracePeriodSeconds"), old.get("terminationGracePeriodSeconds")
    if grace == 1 and isinstance(old_grace, int) and old_grace < 0:
        _take(spec, old, "terminationGracePeriodSeconds")
    for field in ("activeDeadlineSeconds", "schedulingGroup"):
        _take(spec, old, field)
    return spec


def _with_image_of(container: Any, old: Any) -> Any:
    if not isinstance(container, dict) or not isinstance(old, dict):
        return container
    changed = {**container, "image": old.get("image")}
    return changed if "image" in old else {k: v for k, v in changed.items() if k != "image"}


def _take(spec: dict[str, Any], old: dict[str, Any], field: str) -> None:
    if field in old:
        spec[field] = old[field]
    else:
        spec.pop(field, None)


def validate_node(node: Node) -> list[FieldError]:
    """Metadata, taints and resources of a Node."""
    errors = validate_object_meta(node.metadata, namespaced=False)
    errors += _validate_taints(node.spec.taints, SPEC.child("taints"))
    status = FieldPath("status")
    errors += validate_resource_list(node.status.capacity, status.child("capacity"))
    return errors + validate_resource_list(node.status.allocatable, status.child("allocatable"))


def _validate_taints(taints: Sequence[Taint], path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for position, taint in enumerate(taints):
        at = path.index(position)
        errors += check_required_format(taint.key, at.child("key"), label_key_errors)
        if taint.value:
            errors += [invalid(at.child("value"), taint.value, m) for m in label_value_errors(taint.value)]
        if not taint.effect:
            errors.append(required(at.child("effect")))
        elif taint.effect not in TAINT_EFFECTS:
            errors.append(not_supported(at.child("effect"), taint.effect, TAINT_EFFECTS))
        if (taint.key or "", taint.effect or "") in seen:
            errors.append(duplicate(at.child("effect"), taint.effect))
        seen.add((taint.key or "", taint.effect or ""))
    return errors


def validate_namespace(namespace: Namespace) -> list[FieldError]:
    """A Namespace's name is an RFC 1123 label (it is part of DNS names), as upstream's."""
    return validate_object_meta(namespace.metadata, namespaced=False, name_check=dns1123_label_errors)
