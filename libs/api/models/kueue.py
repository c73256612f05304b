"""`kueue.x-k8s.io/v1beta2`: ResourceFlavor, ClusterQueue, LocalQueue and Cohort, the quota API of Kueue
(`apis/kueue/v1beta2/*_types.go`), stored in v1beta2's shape. v1beta1 documents are converted on the way in
(libs/api/kueue_versions.py)."""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import Field

from libs.api.kinds import KUEUE_V1BETA2
from libs.api.models.base import NONE_TO_DICT, NONE_TO_LIST, ApiModel, Quantity, StrMap
from libs.api.models.core import Taint, Toleration
from libs.api.models.meta import ApiObject

QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
"""The label by which a Job, Workload or PodGroup names its LocalQueue."""
DEFAULT_LOCAL_QUEUE: Final = "default"
"""The LocalQueue a workload without the label uses, when its namespace has one by that name."""

STRICT_FIFO: Final = "StrictFIFO"
BEST_EFFORT_FIFO: Final = "BestEffortFIFO"
QUEUEING_STRATEGIES: Final = (STRICT_FIFO, BEST_EFFORT_FIFO)

USAGE_BASED_ADMISSION_FAIR_SHARING: Final = "UsageBasedAdmissionFairSharing"
ADMISSION_MODES: Final = (USAGE_BASED_ADMISSION_FAIR_SHARING, "NoAdmissionFairSharing")

STOP_NONE: Final = "None"
STOP_POLICIES: Final = (STOP_NONE, "Hold", "HoldAndDrain")

NEVER: Final = "Never"
ANY: Final = "Any"
LOWER_PRIORITY: Final = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY: Final = "LowerOrNewerEqualPriority"
WITHIN_CLUSTER_QUEUE_POLICIES: Final = (NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL_PRIORITY)
RECLAIM_WITHIN_COHORT_POLICIES: Final = (NEVER, LOWER_PRIORITY, ANY)
BORROW_WITHIN_COHORT_POLICIES: Final = (NEVER, LOWER_PRIORITY)

MAY_STOP_SEARCH: Final = "MayStopSearch"
TRY_NEXT_FLAVOR: Final = "TryNextFlavor"
FUNGIBILITY_POLICIES: Final = (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR)
BORROWING_OVER_PREEMPTION: Final = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING: Final = "PreemptionOverBorrowing"
FUNGIBILITY_PREFERENCES: Final = (BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING)

RESOURCE_GROUPS_MAX: Final = 16
COVERED_RESOURCES_MAX: Final = 64
FLAVORS_PER_GROUP_MAX: Final = 64
RESOURCES_PER_FLAVOR_MAX: Final = 64
TOTAL_FLAVORS_MAX: Final = 256
TOTAL_COVERED_RESOURCES_MAX: Final = 256
FLAVOR_RESOURCE_COMBINATIONS_MAX: Final = 512
FLAVOR_NODE_LABELS_MAX: Final = 8
FLAVOR_TAINTS_MAX: Final = 8
FLAVOR_TOLERATIONS_MAX: Final = 8


class ResourceQuota(ApiModel):
    """The quota of one resource in one flavor: what the queue is entitled to (`nominalQuota`), how much more
    it may borrow (`borrowingLimit`, unlimited when unset) and how much of its unused quota it lends
    (`lendingLimit`, all when unset)."""

    name: str | None = None
    nominal_quota: Quantity | None = None
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(ApiModel):
    """A flavor's quotas, one per covered resource, in coveredResources' order."""

    name: str | None = None
    resources: Annotated[list[ResourceQuota], NONE_TO_LIST] = Field(default_factory=list)


class ResourceGroup(ApiModel):
    """Resources that are assigned a flavor together, and the flavors that provide them, in order of
    preference."""

    covered_resources: Annotated[list[str], NONE_TO_LIST] = Field(default_factory=list)
    flavors: Annotated[list[FlavorQuotas], NONE_TO_LIST] = Field(default_factory=list)


class FairSharing(ApiModel):
    """A queue's or cohort's weight when competing for unused quota (default 1; 0 means always last)."""

    weight: Quantity | None = None


class AdmissionScope(ApiModel):
    """Whether the ClusterQueue orders its workloads by their LocalQueues' recent usage (admission fair
    sharing): `UsageBasedAdmissionFairSharing` or `NoAdmissionFairSharing`."""

    admission_mode: str | None = None


class BorrowWithinCohort(ApiModel):
    """Whether a workload that borrows may preempt in other queues of the cohort, and up to which priority."""

    policy: str | None = None
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(ApiModel):
    """The preemption policies of a ClusterQueue."""

    reclaim_within_cohort: str | None = None
    borrow_within_cohort: BorrowWithinCohort | None = None
    within_cluster_queue: str | None = None


class FlavorFungibility(ApiModel):
    """Whether the search for a flavor goes on past one where the workload must borrow or preempt."""

    when_can_borrow: str | None = None
    when_can_preempt: str | None = None
    preference: str | None = None


class LabelSelectorRequirement(ApiModel):
    """`metav1.LabelSelectorRequirement`."""

    key: str | None = None
    operator: str | None = None
    values: Annotated[list[str], NONE_TO_LIST] = Field(default_factory=list)


class LabelSelector(ApiModel):
    """`metav1.LabelSelector`: matchLabels and matchExpressions, all of which must hold."""

    match_labels: StrMap = Field(default_factory=dict)
    match_expressions: Annotated[list[LabelSelectorRequirement], NONE_TO_LIST] = Field(default_factory=list)


class ClusterQueueSpec(ApiModel):
    """Quotas per resource group, the cohort to borrow from and lend to, queueing and preemption."""

    PASSED_THROUGH = frozenset({"admissionChecksStrategy", "concurrentAdmissionPolicy"})

    resource_groups: Annotated[list[ResourceGroup], NONE_TO_LIST] = Field(default_factory=list)
    cohort_name: str | None = None
    queueing_strategy: str | None = None
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility | None = None
    preemption: ClusterQueuePreemption | None = None
    stop_policy: str | None = None
    fair_sharing: FairSharing | None = None
    admission_scope: AdmissionScope | None = None


class ClusterQueue(ApiObject):
    """`kueue.x-k8s.io/v1beta2` ClusterQueue (cluster-scoped)."""

    API_VERSION = KUEUE_V1BETA2
    KIND = "ClusterQueue"

    spec: Annotated[ClusterQueueSpec, NONE_TO_DICT] = Field(default_factory=ClusterQueueSpec)
    status: Annotated[dict[str, Any], NONE_TO_DICT] = Field(default_factory=dict)


class CohortSpec(ApiModel):
    """A cohort's parent (for hierarchies), its own quota (a pool shared by its members) and its weight."""

    parent_name: str | None = None
    resource_groups: Annotated[list[ResourceGroup], NONE_TO_LIST] = Field(default_factory=list)
    fair_sharing: FairSharing | None = None


class Cohort(ApiObject):
    """`kueue.x-k8s.io/v1beta2` Cohort (cluster-scoped)."""

    API_VERSION = KUEUE_V1BETA2
    KIND = "Cohort"

    spec: Annotated[CohortSpec, NONE_TO_DICT] = Field(default_factory=CohortSpec)
    status: Annotated[dict[str, Any], NONE_TO_DICT] = Field(default_factory=dict)


class LocalQueueSpec(ApiModel):
    """The ClusterQueue a namespace's workloads are queued to."""

    cluster_queue: str | None = None
    stop_policy: str | None = None
    fair_sharing: FairSharing | None = None


class LocalQueue(ApiObject):
    """`kueue.x-k8s.io/v1beta2` LocalQueue (namespaced)."""

    API_VERSION = KUEUE_V1BETA2
    KIND = "LocalQueue"

    spec: Annotated[LocalQueueSpec, NONE_TO_DICT] = Field(default_factory=LocalQueueSpec)
    status: Annotated[dict[str, Any], NONE_TO_DICT] = Field(default_factory=dict)


class ResourceFlavorSpec(ApiModel):
    """The nodes a flavor stands for: their labels and taints, and tolerations added to admitted pods."""

    node_labels: StrMap = Field(default_factory=dict)
    node_taints: Annotated[list[Taint], NONE_TO_LIST] = Field(default_factory=list)
    tolerations: Annotated[list[Toleration], NONE_TO_LIST] = Field(default_factory=list)
    topology_name: str | None = None


class ResourceFlavor(ApiObject):
    """`kueue.x-k8s.io/v1beta2` ResourceFlavor (cluster-scoped)."""

    API_VERSION = KUEUE_V1BETA2
    KIND = "ResourceFlavor"

    spec: Annotated[ResourceFlavorSpec, NONE_TO_DICT] = Field(default_factory=ResourceFlavorSpec)
