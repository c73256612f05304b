"""Validation of every kind Podway speaks, reporting all errors at once in the API server's words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from libs.api.errors import FieldError, FieldPath
from libs.api.models.batch import Job
from libs.api.models.core import Namespace, Node, Pod
from libs.api.models.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from libs.api.models.meta import ApiObject
from libs.api.models.resource import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from libs.api.models.scheduling import CompositePodGroup, PodGroup, PriorityClass, Workload
from libs.api.validation.batch import validate_job, validate_job_update
from libs.api.validation.common import check_unchanged
from libs.api.validation.core import validate_namespace, validate_node, validate_pod, validate_pod_update
from libs.api.validation.kueue import (
    validate_cluster_queue,
    validate_cohort,
    validate_local_queue,
    validate_local_queue_update,
    validate_resource_flavor,
    validate_resource_flavor_update,
)
from libs.api.validation.resource import (
    validate_device_class,
    validate_resource_claim,
    validate_resource_claim_template,
    validate_resource_slice,
)
from libs.api.validation.scheduling import (
    validate_composite_pod_group,
    validate_composite_pod_group_update,
    validate_pod_group,
    validate_pod_group_update,
    validate_priority_class,
    validate_priority_class_update,
    validate_workload,
    validate_workload_update,
)

_CREATE: Final[dict[type[ApiObject], Callable[[Any], list[FieldError]]]] = {
    Namespace: validate_namespace,
    Workload: validate_workload,
    PodGroup: validate_pod_group,
    CompositePodGroup: validate_composite_pod_group,
    PriorityClass: validate_priority_class,
    Pod: validate_pod,
    Node: validate_node,
    Job: validate_job,
    DeviceClass: validate_device_class,
    ResourceClaim: validate_resource_claim,
    ResourceClaimTemplate: validate_resource_claim_template,
    ResourceSlice: validate_resource_slice,
    ResourceFlavor: validate_resource_flavor,
    Cohort: validate_cohort,
    ClusterQueue: validate_cluster_queue,
    LocalQueue: validate_local_queue,
}

_UPDATE: Final[dict[type[ApiObject], Callable[[Any, Any], list[FieldError]]]] = {
    Workload: validate_workload_update,
    PodGroup: validate_pod_group_update,
    CompositePodGroup: validate_composite_pod_group_update,
    PriorityClass: validate_priority_class_update,
    Pod: validate_pod_update,
    Job: validate_job_update,
    ResourceClaim: lambda old, new: check_unchanged(old.spec, new.spec, FieldPath("spec")),
    ResourceClaimTemplate: lambda old, new: check_unchanged(old.spec, new.spec, FieldPath("spec")),
    ResourceFlavor: validate_resource_flavor_update,
    LocalQueue: validate_local_queue_update,
}


def validate_object(obj: ApiObject) -> list[FieldError]:
    """Every error of a new object (after defaulting), in the API server's order and words."""
    check = _CREATE.get(type(obj))
    if check is None:
        raise TypeError(f"no validation for {type(obj).__name__}; convert v1.35 objects first")
    return check(obj)


def validate_update(old: ApiObject, new: ApiObject) -> list[FieldError]:
    """Errors of replacing `old` by `new` (same kind and name): immutable fields that changed, and the
    Job rule that a gang's parallelism is fixed. Validate `new` with validate_object as well."""
    check = _UPDATE.get(type(new))
    return check(old, new) if check is not None and type(old) is type(new) else []


__all__ = ["validate_job_update", "validate_object", "validate_update"]
