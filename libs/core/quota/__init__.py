"""Quotas and fair sharing as Kueue has them, pure and deterministic: a snapshot of cohorts, ClusterQueues
and flavors with their usage (snapshot.py), quota reservation and flavor assignment for a whole gang
(admission.py), dominant resource shares (fair_sharing.py), preemption targets (preemption.py) and the
queues' status (status.py).
See docs/quotas.md."""

from libs.core.quota.admission import admit
from libs.core.quota.fair_sharing import DominantResourceShare, dominant_resource_share
from libs.core.quota.model import (
    AdmittedWorkload,
    ClusterQueueQuota,
    CohortQuota,
    FairSharingStrategy,
    Flavor,
    LocalQueueQuota,
    Mode,
    PodSetRequest,
    PreemptionReason,
    PreemptionTarget,
    Quota,
    QuotaDecision,
    WorkloadRequest,
)
from libs.core.quota.preemption import preemption_targets
from libs.core.quota.snapshot import QuotaSnapshot
from libs.core.quota.status import QueuedWorkload, QueueStatuses

__all__ = [
    "AdmittedWorkload",
    "ClusterQueueQuota",
    "CohortQuota",
    "DominantResourceShare",
    "FairSharingStrategy",
    "Flavor",
    "LocalQueueQuota",
    "Mode",
    "PodSetRequest",
    "PreemptionReason",
    "PreemptionTarget",
    "QueueStatuses",
    "QueuedWorkload",
    "Quota",
    "QuotaDecision",
    "QuotaSnapshot",
    "WorkloadRequest",
    "admit",
    "dominant_resource_share",
    "preemption_targets",
]
