"""The resources Podway serves over the Kubernetes REST API: group, version, kind, names and verbs.

One entry per (group, version, kind). `storage_version` is the version Podway keeps the kind in; a request in
another served version is converted on the way in and out."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

ALL_VERBS: Final = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
"""The verbs discovery lists for a full resource, in the API server's order."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One served resource in one version, as discovery names it."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ("status",)
    storage_version: str = ""
    list_kind: str = field(default="")

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def stored_api_version(self) -> str:
        version = self.storage_version or self.version
        return f"{self.group}/{version}" if self.group else version

    @property
    def list_kind_name(self) -> str:
        return self.list_kind or f"{self.kind}List"

    def path(self, namespace: str | None = None) -> str:
        """The collection's URL path (namespaced when a namespace is given)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"


def _r(group: str, version: str, kind: str, plural: str, namespaced: bool, **extra: object) -> Resource:
    return Resource(group, version, kind, plural, kind.lower(), namespaced, **extra)  # type: ignore[arg-type]


def _scheduling_kinds(version: str, storage_version: str) -> tuple[Resource, Resource]:
    """A scheduling version's Workload and PodGroup (v1beta1, v1alpha3 and v1alpha2 serve both)."""
    group = "scheduling.k8s.io"
    return (
        _r(
            group,
            version,
            "Workload",
            "workloads",
            True,
            short_names=("wl",),
            storage_version=storage_version,
        ),
        _r(
            group,
            version,
            "PodGroup",
            "podgroups",
            True,
            short_names=("pg",),
            categories=("all",),
            storage_version=storage_version,
        ),
    )


def _kueue_kinds() -> tuple[Resource, ...]:
    """Kueue's quota kinds in the version Podway stores them in (v1beta1 is applied with `podway apply`)."""
    group, version = "kueue.x-k8s.io", "v1beta2"
    return (
        _r(
            group,
            version,
            "ResourceFlavor",
            "resourceflavors",
            False,
            short_names=("flavor", "flavors", "rf"),
        ),
        _r(group, version, "Cohort", "cohorts", False),
        _r(group, version, "ClusterQueue", "clusterqueues", False, short_names=("cq",)),
        _r(group, version, "LocalQueue", "localqueues", True, short_names=("queue", "queues", "lq")),
    )


RESOURCES: Final[tuple[Resource, ...]] = (
    _r(
        "",
        "v1",
        "Namespace",
        "namespaces",
        False,
        short_names=("ns",),
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        subresources=(),
    ),
    _r(
        "",
        "v1",
        "Pod",
        "pods",
        True,
        short_names=("po",),
        categories=("all",),
        subresources=("status", "log", "eviction"),
    ),
    _r("", "v1", "Node", "nodes", False, short_names=("no",)),
    _r(
        "",
        "v1",
        "Event",
        "events",
        True,
        short_names=("ev",),
        subresources=(),
        verbs=("get", "list", "watch"),
    ),
    _r(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        True,
        short_names=("ev",),
        subresources=(),
        verbs=("get", "list", "watch"),
    ),
    _r("batch", "v1", "Job", "jobs", True, categories=("all",)),
    _r(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        False,
        short_names=("pc",),
        subresources=(),
    ),
    *(
        resource
        for version in ("v1beta1", "v1alpha3", "v1alpha2")
        for resource in _scheduling_kinds(version, "" if version == "v1alpha2" else "v1alpha2")
    ),
    _r(
        "scheduling.k8s.io",
        "v1alpha3",
        "CompositePodGroup",
        "compositepodgroups",
        True,
        short_names=("cpg",),
        categories=("all",),
    ),
    _r(
        "scheduling.k8s.io",
        "v1alpha1",
        "Workload",
        "workloads",
        True,
        short_names=("wl",),
        storage_version="v1alpha2",
    ),
    _r("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False, subresources=()),
    _r("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True),
    _r("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True, subresources=()),
    _r("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False, subresources=()),
    *_kueue_kinds(),
    _r(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        False,
        verbs=("create",),
        subresources=(),
    ),
)

PREFERRED_VERSION: Final[dict[str, str]] = {
    "": "v1",
    "events.k8s.io": "v1",
    "batch": "v1",
    "scheduling.k8s.io": "v1",
    "resource.k8s.io": "v1",
    "kueue.x-k8s.io": "v1beta2",
    "authentication.k8s.io": "v1",
}
"""The version discovery prefers per group (what kubectl picks when a resource is named without one)."""


def groups() -> list[str]:
    """The named API groups, in the order discovery lists them (core "" excluded)."""
    seen: list[str] = []
    for resource in RESOURCES:
        if resource.group and resource.group not in seen:
            seen.append(resource.group)
    return seen


def versions_of(group: str) -> list[str]:
    """A group's served versions, preferred first."""
    found = [r.version for r in RESOURCES if r.group == group]
    unique = list(dict.fromkeys(found))
    preferred = PREFERRED_VERSION.get(group)
    return sorted(unique, key=lambda v: (v != preferred, version_priority(v)))


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order as a sort key: GA before beta before alpha, higher numbers first
    (v1, v1beta1, v1alpha2, v1alpha1), so that an unversioned name resolves to the newest version."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0)
    major, stage, minor = int(match[1]), match[2], int(match[3] or 0)
    return ({None: 0, "beta": 1, "alpha": 2}[stage], -major, -minor)


def in_group_version(group: str, version: str) -> list[Resource]:
    return [r for r in RESOURCES if r.group == group and r.version == version]


def lookup(group: str, version: str, plural: str) -> Resource | None:
    """The resource a URL names, or None when Podway does not serve it."""
    for resource in RESOURCES:
        if resource.group == group and resource.version == version and resource.plural == plural:
            return resource
    return None


def by_kind(kind: str, api_version: str) -> Resource | None:
    """The resource a manifest's kind and apiVersion name."""
    group, _, version = api_version.rpartition("/")
    for resource in RESOURCES:
        if resource.kind == kind and resource.group == group and resource.version == version:
            return resource
    return None


def served_kinds() -> Iterable[str]:
    return dict.fromkeys(r.kind for r in RESOURCES)
