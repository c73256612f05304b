"""Builders for the quota core's tests: one GPU flavor per name, queues with a GPU quota, gangs of 1-GPU pods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from libs.core.quota.model import (
    AdmittedWorkload,
    ClusterQueueQuota,
    CohortQuota,
    Flavor,
    PodSetRequest,
    Preemption,
    Quota,
    ResourceGroupQuota,
    WorkloadRequest,
)
from libs.core.quota.snapshot import QuotaSnapshot

GPU = "nvidia.com/gpu"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def make_queue(
    name: str,
    nominal: int | dict[str, int],
    *,
    cohort: str | None = "research",
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
    preemption: Preemption = Preemption(),
    **fields,
) -> ClusterQueueQuota:
    per_flavor = nominal if isinstance(nominal, dict) else {"a100": nominal}
    return ClusterQueueQuota(
        name,
        (ResourceGroupQuota((GPU,), tuple(per_flavor)),),
        {(f, GPU): Quota(n, borrowing_limit, lending_limit) for f, n in per_flavor.items()},
        cohort=cohort,
        preemption=preemption,
        **fields,
    )


def make_cohort(name: str, parent: str | None = None, gpus: int = 0, **fields) -> CohortQuota:
    return CohortQuota(name, parent, {("a100", GPU): Quota(gpus, **fields)} if gpus or fields else {})


def running(name: str, queue: str, gpus: int, *, priority: int = 0, minute: int = 0, flavor: str = "a100"):
    return AdmittedWorkload(name, queue, priority, at(minute), at(minute), {(flavor, GPU): gpus})


def gang(
    queue: str,
    gpus: int,
    *,
    priority: int = 0,
    minute: int = 100,
    name: str = "incoming",
    local_queue: str = "",
    **pod_set,
):
    return WorkloadRequest(
        name, queue, priority, at(minute), (PodSetRequest("main", gpus, {GPU: 1}, **pod_set),), local_queue
    )


def snapshot(queues, workloads=(), cohorts=(), flavors=("a100", "h100")) -> QuotaSnapshot:
    return QuotaSnapshot([Flavor(f) for f in flavors], cohorts, queues, workloads)
