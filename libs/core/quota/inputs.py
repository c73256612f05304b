"""From the stored Kueue objects to the quota core's inputs, and which queue a workload is quota-managed by."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from libs.api.models.kueue import (
    DEFAULT_LOCAL_QUEUE,
    NEVER,
    QUEUE_NAME_LABEL,
    STOP_NONE,
    STRICT_FIFO,
    USAGE_BASED_ADMISSION_FAIR_SHARING,
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
)
from libs.api.models.kueue import FairSharing as ApiFairSharing
from libs.api.quantity import canonical_amount, parse_quantity
from libs.core.quota.model import (
    ClusterQueueQuota,
    CohortQuota,
    Flavor,
    FlavorFungibility,
    FlavorResource,
    LocalQueueQuota,
    Preemption,
    Quota,
    ResourceGroupQuota,
)


def flavor_of(flavor: ResourceFlavor) -> Flavor:
    """A ResourceFlavor as the core sees it."""
    spec = flavor.spec
    return Flavor(flavor.name, dict(spec.node_labels), tuple(spec.node_taints), tuple(spec.tolerations))


def cohort_of(cohort: Cohort) -> CohortQuota:
    """A Cohort as the core sees it (admitted, hence valid and defaulted)."""
    spec = cohort.spec
    return CohortQuota(
        cohort.name, spec.parent_name or None, _quotas(spec.resource_groups), _weight(spec.fair_sharing)
    )


def cluster_queue_of(queue: ClusterQueue) -> ClusterQueueQuota:
    """A ClusterQueue as the core sees it (admitted, hence valid and defaulted)."""
    spec = queue.spec
    preemption = spec.preemption
    borrow = preemption.borrow_within_cohort if preemption is not None else None
    fungibility = spec.flavor_fungibility
    return ClusterQueueQuota(
        name=queue.name,
        resource_groups=tuple(
            ResourceGroupQuota(tuple(g.covered_resources), tuple(f.name or "" for f in g.flavors))
            for g in spec.resource_groups
        ),
        quotas=_quotas(spec.resource_groups),
        cohort=spec.cohort_name or None,
        preemption=Preemption(
            within_cluster_queue=(preemption.within_cluster_queue if preemption else None) or NEVER,
            reclaim_within_cohort=(preemption.reclaim_within_cohort if preemption else None) or NEVER,
            borrow_within_cohort=(borrow.policy if borrow else None) or NEVER,
            max_priority_threshold=borrow.max_priority_threshold if borrow else None,
        ),
        fungibility=FlavorFungibility(
            when_can_borrow=(fungibility.when_can_borrow if fungibility else None)
            or FlavorFungibility.when_can_borrow,
            when_can_preempt=(fungibility.when_can_preempt if fungibility else None)
            or FlavorFungibility.when_can_preempt,
        ),
        weight=_weight(spec.fair_sharing),
        stopped=(spec.stop_policy or STOP_NONE) != STOP_NONE,
        strict_fifo=spec.queueing_strategy == STRICT_FIFO,
        admission_fair_sharing=spec.admission_scope is not None
        and spec.admission_scope.admission_mode == USAGE_BASED_ADMISSION_FAIR_SHARING,
    )


def local_queue_of(queue: LocalQueue) -> LocalQueueQuota:
    """A LocalQueue as the core sees it."""
    spec = queue.spec
    stopped = (spec.stop_policy or STOP_NONE) != STOP_NONE
    return LocalQueueQuota(
        queue.namespace or "", queue.name, spec.cluster_queue or "", stopped, _weight(spec.fair_sharing)
    )


def _quotas(groups: Sequence[ResourceGroup]) -> dict[FlavorResource, Quota]:
    quotas: dict[FlavorResource, Quota] = {}
    for group in groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                name = quota.name or ""
                quotas[(flavor.name or "", name)] = Quota(
                    canonical_amount(name, quota.nominal_quota or "0"),
                    _amount(name, quota.borrowing_limit),
                    _amount(name, quota.lending_limit),
                )
    return quotas


def _amount(resource: str, quantity: str | None) -> int | None:
    return canonical_amount(resource, quantity) if quantity is not None else None


def _weight(fair_sharing: ApiFairSharing | None) -> Decimal:
    weight = fair_sharing.weight if fair_sharing is not None else None
    return parse_quantity(weight) if weight is not None else Decimal(1)


def cluster_queue_for(
    namespace: str, labels: Mapping[str, str], local_queues: Iterable[LocalQueue]
) -> str | None:
    """The ClusterQueue a Job, Workload or PodGroup reserves quota in: that of the LocalQueue its
    `kueue.x-k8s.io/queue-name` label names in its namespace, else of its namespace's LocalQueue `default`;
    None when there is no such LocalQueue (the workload is not quota-managed)."""
    wanted = labels.get(QUEUE_NAME_LABEL) or DEFAULT_LOCAL_QUEUE
    for queue in local_queues:
        if queue.namespace == namespace and queue.name == wanted:
            return queue.spec.cluster_queue or None
    return None
