"""Validation of Kueue's quota kinds in the words its users see from kube-apiserver.

Upstream validates in two stages, and so does this module: the CRD's schema (OpenAPI markers and CEL rules
of `apis/kueue/v1beta2`) first; Kueue's validating webhooks (`pkg/webhooks`) only for an object that passed
it, since the API server calls admission webhooks after schema validation. A CEL rule's error is reported
at the object that carries the rule, as `Invalid value: "object": <message>`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Final, TypeVar

from libs.api.errors import (
    FieldError,
    FieldPath,
    duplicate,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)
from libs.api.formats import label_key_errors, label_value_errors
from libs.api.models.core import TAINT_EFFECTS, Taint, Toleration
from libs.api.models.kueue import (
    ADMISSION_MODES,
    BORROW_WITHIN_COHORT_POLICIES,
    COVERED_RESOURCES_MAX,
    FLAVOR_NODE_LABELS_MAX,
    FLAVOR_RESOURCE_COMBINATIONS_MAX,
    FLAVOR_TAINTS_MAX,
    FLAVOR_TOLERATIONS_MAX,
    FLAVORS_PER_GROUP_MAX,
    FUNGIBILITY_POLICIES,
    FUNGIBILITY_PREFERENCES,
    NEVER,
    QUEUEING_STRATEGIES,
    RECLAIM_WITHIN_COHORT_POLICIES,
    RESOURCE_GROUPS_MAX,
    RESOURCES_PER_FLAVOR_MAX,
    STOP_POLICIES,
    TOTAL_COVERED_RESOURCES_MAX,
    TOTAL_FLAVORS_MAX,
    TRY_NEXT_FLAVOR,
    WITHIN_CLUSTER_QUEUE_POLICIES,
    AdmissionScope,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FairSharing,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from libs.api.quantity import parse_quantity, quantity_error
from libs.api.validation.common import check_enum
from libs.api.validation.meta import validate_labels, validate_object_meta

SPEC: Final = FieldPath("spec")
OBJECT: Final = "object"
"""How a CEL rule's error shows the object it was evaluated on."""
REFERENCE_MAX_LENGTH: Final = 253
REFERENCE_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_REFERENCE_RE: Final = re.compile(REFERENCE_PATTERN)

BORROWING_LIMIT_WITHOUT_COHORT: Final = "borrowingLimit must be nil when cohort is empty"
FLAVOR_RESOURCES_MISMATCH: Final = "flavors must have the same number of resources as the coveredResources"
RECLAIM_NEVER_BORROW: Final = "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
PREFERENCE_NEEDS_TRY_NEXT: Final = (
    "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"
)
LIMIT_WITHOUT = "must be nil when {} is empty"
LENDING_OVER_NOMINAL: Final = "must be less than or equal to the nominalQuota"
NEGATIVE: Final = "must be greater than or equal to 0"
NAME_MISMATCH: Final = "must match the name in coveredResources"
TINY_WEIGHT: Final = "When not 0, weight must be > 10e-9"
NANO: Final = Decimal("1e-9")
LABEL_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")

Item = TypeVar("Item")


def validate_resource_flavor(flavor: ResourceFlavor) -> list[FieldError]:
    """Node labels (at most 8), taints and tolerations (at most 8 each) of a ResourceFlavor."""
    errors = validate_object_meta(flavor.metadata, namespaced=False)
    spec = flavor.spec
    schema = _max_items(len(spec.node_labels), FLAVOR_NODE_LABELS_MAX, SPEC.child("nodeLabels"))
    schema += _flavor_taints_schema(spec.node_taints, SPEC.child("nodeTaints"))
    schema += _tolerations_schema(spec.tolerations, SPEC.child("tolerations"))
    schema += _optional_reference(spec.topology_name, SPEC.child("topologyName"))
    if spec.topology_name and not spec.node_labels:
        schema.append(invalid(SPEC, OBJECT, "at least one nodeLabel is required when topology is set"))
    if schema:
        return errors + schema
    errors += validate_labels(spec.node_labels, SPEC.child("nodeLabels"))
    return errors + _flavor_taints_webhook(spec.node_taints, SPEC.child("nodeTaints"))


def validate_resource_flavor_update(old: ResourceFlavor, new: ResourceFlavor) -> list[FieldError]:
    """A ResourceFlavor's topologyName is immutable once set."""
    if old.spec.topology_name and new.spec.topology_name != old.spec.topology_name:
        return [invalid(SPEC, OBJECT, "topologyName is immutable when topologyName is set")]
    return []


def validate_cluster_queue(queue: ClusterQueue) -> list[FieldError]:
    """Quotas, cohort, queueing, preemption, fungibility and fair sharing of a ClusterQueue."""
    errors = validate_object_meta(queue.metadata, namespaced=False)
    spec = queue.spec
    schema = _resource_groups_schema(spec.resource_groups, SPEC.child("resourceGroups"))
    if not spec.cohort_name and _any_borrowing_limit(spec.resource_groups):
        schema.append(invalid(SPEC, OBJECT, BORROWING_LIMIT_WITHOUT_COHORT))
    schema += _optional_reference(spec.cohort_name, SPEC.child("cohortName"))
    schema += check_enum(spec.queueing_strategy, SPEC.child("queueingStrategy"), QUEUEING_STRATEGIES)
    schema += check_enum(spec.stop_policy, SPEC.child("stopPolicy"), STOP_POLICIES)
    if spec.preemption is not None:
        schema += _preemption_schema(spec.preemption, SPEC.child("preemption"))
    if spec.flavor_fungibility is not None:
        schema += _fungibility_schema(spec.flavor_fungibility, SPEC.child("flavorFungibility"))
    schema += _fair_sharing_schema(spec.fair_sharing, SPEC.child("fairSharing"))
    schema += _admission_scope_schema(spec.admission_scope, SPEC.child("admissionScope"))
    if schema:
        return errors + schema
    groups = SPEC.child("resourceGroups")
    errors += _resource_groups_webhook(
        spec.resource_groups, groups, parent="cohort" if not spec.cohort_name else ""
    )
    if spec.namespace_selector is not None:
        errors += _label_selector(spec.namespace_selector, SPEC.child("namespaceSelector"))
    errors += _fair_sharing_webhook(spec.fair_sharing, SPEC.child("fairSharing"))
    return errors + _totals_webhook(spec.resource_groups, groups)


def _admission_scope_schema(scope: AdmissionScope | None, path: FieldPath) -> list[FieldError]:
    """`admissionMode` is required and one of Kueue's two modes."""
    if scope is None:
        return []
    mode = path.child("admissionMode")
    if not scope.admission_mode:
        return [required(mode)]
    return check_enum(scope.admission_mode, mode, ADMISSION_MODES)


def validate_cohort(cohort: Cohort) -> list[FieldError]:
    """Parent, shared quota and fair sharing of a Cohort; its limits need a parent to borrow from."""
    errors = validate_object_meta(cohort.metadata, namespaced=False)
    spec = cohort.spec
    schema = _resource_groups_schema(spec.resource_groups, SPEC.child("resourceGroups"))
    schema += _optional_reference(spec.parent_name, SPEC.child("parentName"))
    schema += _fair_sharing_schema(spec.fair_sharing, SPEC.child("fairSharing"))
    if schema:
        return errors + schema
    errors += _fair_sharing_webhook(spec.fair_sharing, SPEC.child("fairSharing"))
    parent = "parent" if not spec.parent_name else ""
    return errors + _resource_groups_webhook(
        spec.resource_groups, SPEC.child("resourceGroups"), parent=parent, cohort=True
    )


def validate_local_queue(queue: LocalQueue) -> list[FieldError]:
    """The ClusterQueue reference, stop policy and weight of a LocalQueue."""
    errors = validate_object_meta(queue.metadata, namespaced=True)
    spec = queue.spec
    schema = _optional_reference(spec.cluster_queue, SPEC.child("clusterQueue"))
    schema += check_enum(spec.stop_policy, SPEC.child("stopPolicy"), STOP_POLICIES)
    schema += _fair_sharing_schema(spec.fair_sharing, SPEC.child("fairSharing"))
    if schema:
        return errors + schema
    return errors + _fair_sharing_webhook(spec.fair_sharing, SPEC.child("fairSharing"))


def validate_local_queue_update(old: LocalQueue, new: LocalQueue) -> list[FieldError]:
    """A LocalQueue's ClusterQueue is immutable (CEL `self == oldSelf`)."""
    path = SPEC.child("clusterQueue")
    if old.spec.cluster_queue == new.spec.cluster_queue:
        return []
    return [invalid(path, "string", "field is immutable")] if new.spec.cluster_queue else []


def _any_borrowing_limit(groups: Sequence[ResourceGroup]) -> bool:
    return any(
        quota.borrowing_limit is not None
        for group in groups
        for flavor in group.flavors
        for quota in flavor.resources
    )


# The CRD's schema.


def _resource_groups_schema(groups: Sequence[ResourceGroup], path: FieldPath) -> list[FieldError]:
    errors = _each(groups, _resource_group_schema, path)
    return errors + _max_items(len(groups), RESOURCE_GROUPS_MAX, path)


def _resource_group_schema(group: ResourceGroup, path: FieldPath) -> list[FieldError]:
    covered = path.child("coveredResources")
    errors = _min_items(len(group.covered_resources), covered)
    errors += _max_items(len(group.covered_resources), COVERED_RESOURCES_MAX, covered)
    flavors = path.child("flavors")
    errors += _each(group.flavors, _flavor_quotas_schema, flavors)
    errors += _min_items(len(group.flavors), flavors)
    errors += _max_items(len(group.flavors), FLAVORS_PER_GROUP_MAX, flavors)
    if any(len(flavor.resources) != len(group.covered_resources) for flavor in group.flavors):
        errors.append(invalid(path, OBJECT, FLAVOR_RESOURCES_MISMATCH))
    return errors


def _flavor_quotas_schema(flavor: FlavorQuotas, path: FieldPath) -> list[FieldError]:
    name = path.child("name")
    errors = [required(name)] if not flavor.name else _optional_reference(flavor.name, name)
    resources = path.child("resources")
    errors += _each(flavor.resources, _resource_quota_schema, resources)
    errors += _min_items(len(flavor.resources), resources)
    errors += _max_items(len(flavor.resources), RESOURCES_PER_FLAVOR_MAX, resources)
    return errors


def _resource_quota_schema(quota: ResourceQuota, path: FieldPath) -> list[FieldError]:
    errors = [required(path.child("name"))] if not quota.name else []
    if quota.nominal_quota is None:
        errors.append(required(path.child("nominalQuota")))
    for field, value in (
        ("nominalQuota", quota.nominal_quota),
        ("borrowingLimit", quota.borrowing_limit),
        ("lendingLimit", quota.lending_limit),
    ):
        problem = quantity_error(value) if value is not None else None
        if problem is not None:
            errors.append(invalid(path.child(field), value, problem))
    return errors


def _preemption_schema(preemption: ClusterQueuePreemption, path: FieldPath) -> list[FieldError]:
    errors = check_enum(
        preemption.reclaim_within_cohort, path.child("reclaimWithinCohort"), RECLAIM_WITHIN_COHORT_POLICIES
    )
    errors += check_enum(
        preemption.within_cluster_queue, path.child("withinClusterQueue"), WITHIN_CLUSTER_QUEUE_POLICIES
    )
    borrow = preemption.borrow_within_cohort
    if borrow is not None:
        errors += check_enum(
            borrow.policy, path.child("borrowWithinCohort", "policy"), BORROW_WITHIN_COHORT_POLICIES
        )
        if preemption.reclaim_within_cohort == NEVER and (borrow.policy or NEVER) != NEVER:
            errors.append(invalid(path, OBJECT, RECLAIM_NEVER_BORROW))
    return errors


def _fungibility_schema(fungibility: FlavorFungibility, path: FieldPath) -> list[FieldError]:
    errors = check_enum(fungibility.when_can_borrow, path.child("whenCanBorrow"), FUNGIBILITY_POLICIES)
    errors += check_enum(fungibility.when_can_preempt, path.child("whenCanPreempt"), FUNGIBILITY_POLICIES)
    errors += check_enum(fungibility.preference, path.child("preference"), FUNGIBILITY_PREFERENCES)
    both_try_next = fungibility.when_can_borrow == fungibility.when_can_preempt == TRY_NEXT_FLAVOR
    if fungibility.preference is not None and not both_try_next:
        errors.append(invalid(path, OBJECT, PREFERENCE_NEEDS_TRY_NEXT))
    return errors


def _fair_sharing_schema(fair_sharing: FairSharing | None, path: FieldPath) -> list[FieldError]:
    weight = fair_sharing.weight if fair_sharing is not None else None
    problem = quantity_error(weight) if weight is not None else None
    return [invalid(path.child("weight"), weight, problem)] if problem is not None else []


def _flavor_taints_schema(taints: Sequence[Taint], path: FieldPath) -> list[FieldError]:
    errors = _max_items(len(taints), FLAVOR_TAINTS_MAX, path)
    for position, taint in enumerate(taints):
        at = path.index(position)
        if not taint.key:
            errors.append(required(at.child("key")))
        if not taint.effect:
            errors.append(required(at.child("effect")))
    if any(taint.effect and taint.effect not in TAINT_EFFECTS for taint in taints):
        detail = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"
        errors.append(invalid(path, "array", detail))
    return errors


def _tolerations_schema(tolerations: Sequence[Toleration], path: FieldPath) -> list[FieldError]:
    errors = _max_items(len(tolerations), FLAVOR_TOLERATIONS_MAX, path)
    rules: tuple[tuple[Callable[[Toleration], bool], str], ...] = (
        (
            lambda t: bool(t.key) or t.operator == "Exists",
            "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        ),
        (
            lambda t: t.toleration_seconds is None or t.effect == "NoExecute",
            "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        ),
        (
            lambda t: t.operator in (None, "Equal", "Exists"),
            "supported toleration values: 'Equal'(default), 'Exists'",
        ),
        (
            lambda t: t.operator != "Exists" or not t.value,
            "a value must be empty when 'operator' is 'Exists'",
        ),
        (
            lambda t: t.effect in (None, *TAINT_EFFECTS),
            "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        ),
    )
    errors += [
        invalid(path, "array", message) for holds, message in rules if not all(holds(t) for t in tolerations)
    ]
    return errors


# Kueue's webhooks.


def _resource_groups_webhook(
    groups: Sequence[ResourceGroup], path: FieldPath, *, parent: str, cohort: bool = False
) -> list[FieldError]:
    """`validateResourceGroups`: resource names, resources and flavors in one group each, quotas not
    negative, limits only with a cohort (a parent, for a Cohort), lending within the nominal quota (for a
    ClusterQueue: a Cohort's quota adds to what its members lend)."""
    errors: list[FieldError] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for group_index, group in enumerate(groups):
        at = path.index(group_index)
        for position, name in enumerate(group.covered_resources):
            covered = at.child("coveredResources").index(position)
            errors += [invalid(covered, name, message) for message in label_key_errors(name)]
            errors += [duplicate(covered, name)] if name in seen_resources else []
            seen_resources.add(name)
        for position, flavor in enumerate(group.flavors):
            flavor_path = at.child("flavors").index(position)
            errors += _flavor_quotas_webhook(flavor, group.covered_resources, flavor_path, parent, cohort)
            errors += (
                [duplicate(flavor_path.child("name"), flavor.name)] if flavor.name in seen_flavors else []
            )
            seen_flavors.add(flavor.name or "")
    return errors


def _flavor_quotas_webhook(
    flavor: FlavorQuotas, covered: Sequence[str], path: FieldPath, parent: str, cohort: bool
) -> list[FieldError]:
    errors: list[FieldError] = []
    for position, quota in enumerate(flavor.resources[: len(covered)]):
        at = path.child("resources").index(position)
        if quota.name != covered[position]:
            errors.append(invalid(at.child("name"), quota.name, NAME_MISMATCH))
        errors += _not_negative(quota.nominal_quota, at.child("nominalQuota"))
        if quota.borrowing_limit is not None:
            errors += _limit_without_parent(quota.borrowing_limit, at.child("borrowingLimit"), parent)
            errors += _not_negative(quota.borrowing_limit, at.child("borrowingLimit"))
        if quota.lending_limit is not None:
            lending = at.child("lendingLimit")
            errors += _not_negative(quota.lending_limit, lending)
            errors += _limit_without_parent(quota.lending_limit, lending, parent)
            if not cohort and parse_quantity(quota.lending_limit) > parse_quantity(
                quota.nominal_quota or "0"
            ):
                errors.append(invalid(lending, quota.lending_limit, LENDING_OVER_NOMINAL))
    return errors


def _limit_without_parent(limit: str, path: FieldPath, parent: str) -> list[FieldError]:
    return [invalid(path, limit, LIMIT_WITHOUT.format(parent))] if parent else []


def _not_negative(quantity: str | None, path: FieldPath) -> list[FieldError]:
    if quantity is None or parse_quantity(quantity) >= 0:
        return []
    return [invalid(path, quantity, NEGATIVE)]


def _fair_sharing_webhook(fair_sharing: FairSharing | None, path: FieldPath) -> list[FieldError]:
    """`validateFairSharing`: the weight is reported at `fairSharing` itself, as upstream does."""
    if fair_sharing is None or fair_sharing.weight is None:
        return []
    weight = parse_quantity(fair_sharing.weight)
    if weight < 0:
        return [invalid(path, fair_sharing.weight, NEGATIVE)]
    if 0 < weight <= NANO:
        return [invalid(path, fair_sharing.weight, TINY_WEIGHT)]
    return []


def _totals_webhook(groups: Sequence[ResourceGroup], path: FieldPath) -> list[FieldError]:
    flavors = sum(len(group.flavors) for group in groups)
    covered = sum(len(group.covered_resources) for group in groups)
    errors = []
    if flavors > TOTAL_FLAVORS_MAX:
        detail = (
            f"total number of flavors across all resourceGroups must be ≤ {TOTAL_FLAVORS_MAX}, got {flavors}"
        )
        errors.append(invalid(path, flavors, detail))
    if covered > TOTAL_COVERED_RESOURCES_MAX:
        detail = (
            f"total number of covered resources across all resourceGroups must be ≤ "
            f"{TOTAL_COVERED_RESOURCES_MAX}, got {covered}"
        )
        errors.append(invalid(path, covered, detail))
    for position, group in enumerate(groups):
        combinations = sum(len(flavor.resources) for flavor in group.flavors)
        if combinations > FLAVOR_RESOURCE_COMBINATIONS_MAX:
            detail = (
                "number of flavor-resource combinations in a resourceGroup must be ≤ "
                f"{FLAVOR_RESOURCE_COMBINATIONS_MAX}, got {combinations}"
            )
            errors.append(invalid(path.index(position), combinations, detail))
    return errors


def _flavor_taints_webhook(taints: Sequence[Taint], path: FieldPath) -> list[FieldError]:
    """`validateNodeTaints`: keys are label names, values label values, one taint per key and effect."""
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for position, taint in enumerate(taints):
        at = path.index(position)
        errors += [
            invalid(at.child("key"), taint.key, message) for message in label_key_errors(taint.key or "")
        ]
        value_errors = label_value_errors(taint.value or "")
        if value_errors:
            errors.append(invalid(at.child("value"), taint.value, ";".join(value_errors)))
        key = (taint.key or "", taint.effect or "")
        if key in seen:
            error = duplicate(at, taint.to_wire())
            errors.append(dataclasses.replace(error, detail="taints must be unique by key and effect pair"))
            continue
        seen.add(key)
    return errors


def _label_selector(selector: LabelSelector, path: FieldPath) -> list[FieldError]:
    """`ValidateLabelSelector`: matchLabels as labels; each expression's operator, and values only for In and
    NotIn (where they are required)."""
    errors = validate_labels(selector.match_labels, path.child("matchLabels"))
    for position, requirement in enumerate(selector.match_expressions):
        at = path.child("matchExpressions").index(position)
        operator = requirement.operator or ""
        if operator in ("In", "NotIn") and not requirement.values:
            errors.append(
                required(at.child("values"), "must be specified when `operator` is 'In' or 'NotIn'")
            )
        elif operator in ("Exists", "DoesNotExist") and requirement.values:
            detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            errors.append(invalid(at.child("values"), requirement.values, detail))
        elif operator not in LABEL_SELECTOR_OPERATORS:
            errors.append(not_supported(at.child("operator"), operator, LABEL_SELECTOR_OPERATORS))
        errors += [
            invalid(at.child("key"), requirement.key, m) for m in label_key_errors(requirement.key or "")
        ]
    return errors


# Shared shapes of schema errors.


def _optional_reference(name: str | None, path: FieldPath) -> list[FieldError]:
    if not name:
        return []
    errors = [too_long(path, REFERENCE_MAX_LENGTH)] if len(name) > REFERENCE_MAX_LENGTH else []
    if not _REFERENCE_RE.match(name):
        errors.append(invalid(path, name, f"{path} in body should match '{REFERENCE_PATTERN}'"))
    return errors


def _min_items(count: int, path: FieldPath) -> list[FieldError]:
    # A required list (MinItems=1, omitempty) that is empty is not sent at all: `Required value`.
    return [required(path)] if count == 0 else []


def _max_items(count: int, maximum: int, path: FieldPath) -> list[FieldError]:
    return [too_many(path, count, maximum)] if count > maximum else []


def _each(
    items: Sequence[Item], check: Callable[[Item, FieldPath], list[FieldError]], path: FieldPath
) -> list[FieldError]:
    errors: list[FieldError] = []
    for position, item in enumerate(items):
        errors += check(item, path.index(position))
    return errors
