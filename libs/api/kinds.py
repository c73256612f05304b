"""The kinds Podway speaks: API groups and versions, scope, and the order in which `apply` creates them."""

from __future__ import annotations

from typing import Final

CORE_V1: Final = "v1"
BATCH_V1: Final = "batch/v1"
SCHEDULING_V1: Final = "scheduling.k8s.io/v1"
SCHEDULING_V1ALPHA1: Final = "scheduling.k8s.io/v1alpha1"
SCHEDULING_V1ALPHA2: Final = "scheduling.k8s.io/v1alpha2"
SCHEDULING_V1BETA1: Final = "scheduling.k8s.io/v1beta1"
SCHEDULING_V1ALPHA3: Final = "scheduling.k8s.io/v1alpha3"
BETA_SHAPED: Final = (SCHEDULING_V1BETA1, SCHEDULING_V1ALPHA3)
"""The scheduling versions whose Workload and PodGroup have v1beta1's shape (v1.37's alpha and beta)."""
RESOURCE_V1: Final = "resource.k8s.io/v1"
KUEUE_V1BETA2: Final = "kueue.x-k8s.io/v1beta2"
KUEUE_V1BETA1: Final = "kueue.x-k8s.io/v1beta1"

# kind -> the apiVersion Podway stores it in (v1alpha1 Workloads and kueue v1beta1 objects are converted
# before they get here).
API_VERSION_OF_KIND: Final[dict[str, str]] = {
    "Namespace": CORE_V1,
    "PriorityClass": SCHEDULING_V1,
    "DeviceClass": RESOURCE_V1,
    "Node": CORE_V1,
    "ResourceSlice": RESOURCE_V1,
    "ResourceFlavor": KUEUE_V1BETA2,
    "Cohort": KUEUE_V1BETA2,
    "ClusterQueue": KUEUE_V1BETA2,
    "LocalQueue": KUEUE_V1BETA2,
    "Workload": SCHEDULING_V1ALPHA2,
    "CompositePodGroup": SCHEDULING_V1ALPHA3,
    "ResourceClaimTemplate": RESOURCE_V1,
    "ResourceClaim": RESOURCE_V1,
    "PodGroup": SCHEDULING_V1ALPHA2,
    "Job": BATCH_V1,
    "Pod": CORE_V1,
}

# Dependency order for `podway apply -f DIR`: whatever an object refers to is created before it.
KIND_ORDER: Final[tuple[str, ...]] = tuple(API_VERSION_OF_KIND)

QUOTA_KINDS: Final = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")
"""Kueue's quota kinds, spoken as `kueue.x-k8s.io/v1beta2` (stored) and `v1beta1` (converted)."""

NAMESPACED_KINDS: Final[frozenset[str]] = frozenset(
    {
        "Workload",
        "CompositePodGroup",
        "PodGroup",
        "Pod",
        "Job",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "LocalQueue",
    }
)


def is_namespaced(kind: str) -> bool:
    """Whether objects of this kind live in a namespace (Node, PriorityClass, DeviceClass, slices do not)."""
    return kind in NAMESPACED_KINDS


def group_of(api_version: str) -> str:
    """The API group of an apiVersion: "" for the core group (`v1`), else the part before the slash."""
    group, _, _ = api_version.rpartition("/")
    return group


def group_of_kind(kind: str) -> str:
    """The API group a kind belongs to, "" for core kinds and for kinds Podway does not know."""
    return group_of(API_VERSION_OF_KIND.get(kind, CORE_V1))


def kind_rank(kind: str) -> int:
    """Position of a kind in KIND_ORDER (unknown kinds last), for sorting a batch before applying it."""
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
