"""Defaulting, as the API server applies it before validation (`SetDefaults_*`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from libs.api.models.batch import COMPLETION_MODE_NON_INDEXED, Job
from libs.api.models.core import DEFAULT_SCHEDULER_NAME, Pod, PodSpec
from libs.api.models.kueue import (
    BEST_EFFORT_FIFO,
    MAY_STOP_SEARCH,
    NEVER,
    STOP_NONE,
    TRY_NEXT_FLAVOR,
    BorrowWithinCohort,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FairSharing,
    FlavorFungibility,
    LocalQueue,
)
from libs.api.models.meta import ApiObject
from libs.api.models.resource import (
    ALLOCATION_MODE_EXACT_COUNT,
    DeviceClaim,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimTemplate,
)
from libs.api.models.scheduling import (
    DISRUPTION_MODE_POD,
    PREEMPT_LOWER_PRIORITY,
    PodGroup,
    PriorityClass,
    Workload,
)

DEFAULT_BACKOFF_LIMIT: Final = 6
POD_PHASE_PENDING: Final = "Pending"

Obj = TypeVar("Obj", bound=ApiObject)


def apply_defaults(obj: Obj) -> Obj:
    """A copy of the object with defaults filled in: `disruptionMode: Pod`, `preemptionPolicy:
    PreemptLowerPriority`, Job counts and completion mode, pod scheduler name and requests from limits,
    device request `allocationMode: ExactCount` with `count: 1`. The input is left untouched."""
    return apply_defaults_in_place(obj.model_copy(deep=True))


def apply_defaults_in_place(obj: Obj) -> Obj:
    """apply_defaults without the copy: fills in the defaults of `obj` itself and returns it. For an object
    the caller has just parsed and owns (admission), where the copy would only cost time."""
    defaulter = _DEFAULTERS.get(type(obj))
    if defaulter is not None:
        defaulter(obj)
    return obj


def _default_workload(workload: Workload) -> None:
    for template in workload.spec.all_pod_group_templates():
        template.disruption_mode = template.disruption_mode or DISRUPTION_MODE_POD


def _default_pod_group(pod_group: PodGroup) -> None:
    pod_group.spec.disruption_mode = pod_group.spec.disruption_mode or DISRUPTION_MODE_POD


def _default_priority_class(priority_class: PriorityClass) -> None:
    if priority_class.preemption_policy is None:
        priority_class.preemption_policy = PREEMPT_LOWER_PRIORITY
    if priority_class.global_default is None:
        priority_class.global_default = False


def _default_pod(pod: Pod) -> None:
    default_pod_spec(pod.spec)
    pod.spec.restart_policy = pod.spec.restart_policy or "Always"
    # The API server sets this on create (PrepareForCreate), not in defaulting; same effect here.
    pod.status.phase = pod.status.phase or POD_PHASE_PENDING


def default_pod_spec(spec: PodSpec) -> None:
    """Scheduler name and requests taken from limits where a container sets only limits (in place)."""
    spec.scheduler_name = spec.scheduler_name or DEFAULT_SCHEDULER_NAME
    for container in [*spec.init_containers, *spec.containers]:
        resources = container.resources
        for name, limit in resources.limits.items():
            resources.requests.setdefault(name, limit)


def _default_job(job: Job) -> None:
    spec = job.spec
    if spec.completions is None and spec.parallelism is None:
        spec.completions = 1
    if spec.parallelism is None:
        spec.parallelism = 1
    if spec.backoff_limit is None:
        spec.backoff_limit = DEFAULT_BACKOFF_LIMIT
    spec.completion_mode = spec.completion_mode or COMPLETION_MODE_NON_INDEXED
    if spec.template is not None:
        default_pod_spec(spec.template.spec)
    if spec.pod_failure_policy is not None:
        for rule in spec.pod_failure_policy.rules:
            for pattern in rule.on_pod_conditions:
                pattern.status = pattern.status or "True"


def _default_device_claim(claim: DeviceClaim) -> None:
    for request in claim.requests:
        selections: list[ExactDeviceRequest] = [*request.first_available]
        if request.exactly is not None:
            selections.append(request.exactly)
        for selection in selections:
            _default_device_selection(selection)


def _default_device_selection(selection: ExactDeviceRequest) -> None:
    selection.allocation_mode = selection.allocation_mode or ALLOCATION_MODE_EXACT_COUNT
    # count is a plain int64 in Go: 0 means unset.
    if selection.allocation_mode == ALLOCATION_MODE_EXACT_COUNT and not selection.count:
        selection.count = 1


def _default_cluster_queue(queue: ClusterQueue) -> None:
    """The CRD's `+kubebuilder:default` markers: BestEffortFIFO, stopPolicy None, every preemption policy
    Never, fungibility MayStopSearch when the queue can borrow and TryNextFlavor when it can preempt."""
    spec = queue.spec
    spec.queueing_strategy = spec.queueing_strategy or BEST_EFFORT_FIFO
    spec.stop_policy = spec.stop_policy or STOP_NONE
    preemption = spec.preemption = spec.preemption or ClusterQueuePreemption()
    preemption.reclaim_within_cohort = preemption.reclaim_within_cohort or NEVER
    preemption.within_cluster_queue = preemption.within_cluster_queue or NEVER
    borrow = preemption.borrow_within_cohort = preemption.borrow_within_cohort or BorrowWithinCohort()
    borrow.policy = borrow.policy or NEVER
    fungibility = spec.flavor_fungibility = spec.flavor_fungibility or FlavorFungibility()
    fungibility.when_can_borrow = fungibility.when_can_borrow or MAY_STOP_SEARCH
    fungibility.when_can_preempt = fungibility.when_can_preempt or TRY_NEXT_FLAVOR
    _default_weight(spec.fair_sharing)


def _default_local_queue(queue: LocalQueue) -> None:
    queue.spec.stop_policy = queue.spec.stop_policy or STOP_NONE
    _default_weight(queue.spec.fair_sharing)


def _default_weight(fair_sharing: FairSharing | None) -> None:
    if fair_sharing is not None and fair_sharing.weight is None:
        fair_sharing.weight = "1"


_DEFAULTERS: Final[dict[type[ApiObject], Callable[[Any], None]]] = {
    Workload: _default_workload,
    PodGroup: _default_pod_group,
    PriorityClass: _default_priority_class,
    Pod: _default_pod,
    Job: _default_job,
    ResourceClaim: lambda claim: _default_device_claim(claim.spec.devices),
    ResourceClaimTemplate: lambda template: _default_device_claim(template.spec.spec.devices),
    ClusterQueue: _default_cluster_queue,
    LocalQueue: _default_local_queue,
    Cohort: lambda cohort: _default_weight(cohort.spec.fair_sharing),
}
