"""The discovery documents kube-apiserver serves, built from the served resources (`resources.py`).

kubectl and client-go read them to map a name (`pods`, `pg`, `podgroups.scheduling.k8s.io`) to a group,
version and kind, to learn whether a resource is namespaced and which verbs it allows. They are static: every
function returns the same document for the same arguments."""

from __future__ import annotations

from typing import Any, Final

from libs.kubeapi.resources import (
    PREFERRED_VERSION,
    Resource,
    groups,
    in_group_version,
    versions_of,
)

KUBERNETES_MAJOR: Final = "1"
KUBERNETES_MINOR: Final = "36"
GIT_VERSION: Final = "v1.36.0-podway"

AGGREGATED_V2: Final = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1: Final = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
_AGGREGATED_VERSIONS: Final = {"v2": AGGREGATED_V2, "v2beta1": AGGREGATED_V2BETA1}

# Subresources and what they answer, as kube-apiserver lists them: (verbs, group, version, kind), where an
# empty kind means the resource's own kind. Status is read only: it belongs to Podway's controllers and node
# agents, and a write to it is refused (405).
_SUBRESOURCES: Final[dict[str, tuple[tuple[str, ...], str, str, str]]] = {
    "status": (("get",), "", "", ""),
    "log": (("get",), "", "", ""),
    "eviction": (("create",), "policy", "v1", "Eviction"),
}


def version_info() -> dict[str, str]:
    """`/version`: a `version.Info` naming Kubernetes v1.36, the API Podway speaks."""
    return {
        "major": KUBERNETES_MAJOR,
        "minor": KUBERNETES_MINOR,
        "emulationMajor": KUBERNETES_MAJOR,
        "emulationMinor": KUBERNETES_MINOR,
        "minCompatibilityMajor": KUBERNETES_MAJOR,
        "minCompatibilityMinor": str(int(KUBERNETES_MINOR) - 1),
        "gitVersion": GIT_VERSION,
        "gitCommit": "podway",
        "gitTreeState": "clean",
        "buildDate": "2026-04-22T00:00:00Z",
        "goVersion": "python",
        "compiler": "podway",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str = "") -> dict[str, Any]:
    """`/api`: the core group's versions; `server_address` (host:port) is what clients are told to dial."""
    document: dict[str, Any] = {"kind": "APIVersions", "versions": ["v1"]}
    if server_address:
        document["serverAddressByClientCIDRs"] = [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ]
    return document


def api_group_list() -> dict[str, Any]:
    """`/apis`: every named group with its versions and the preferred one."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(name) for name in groups()]}


def api_group(group: str) -> dict[str, Any] | None:
    """`/apis/{group}`, or None for a group Podway does not serve."""
    if group not in groups():
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group)}


def _group(group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{version}", "version": version} for version in versions_of(group)]
    preferred = PREFERRED_VERSION.get(group, versions_of(group)[0])
    return {
        "name": group,
        "versions": versions,
        "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred},
    }


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    """`/api/v1` or `/apis/{group}/{version}`: the resources of one group version, subresources as their own
    entries (`pods/status`); None for a group version Podway does not serve."""
    served = in_group_version(group, version)
    if not served:
        return None
    entries = [entry for resource in served for entry in _resource_entries(resource)]
    document: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        # The core group's list carries no apiVersion, the named groups' do.
        document["apiVersion"] = "v1"
    document["groupVersion"] = served[0].group_version
    document["resources"] = entries
    return document


def _resource_entries(resource: Resource) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    return [entry] + [_subresource_entry(resource, name) for name in resource.subresources]


def _subresource_entry(resource: Resource, subresource: str) -> dict[str, Any]:
    verbs, group, version, kind = _SUBRESOURCES[subresource]
    entry: dict[str, Any] = {
        "name": f"{resource.plural}/{subresource}",
        "singularName": "",
        "namespaced": resource.namespaced,
    }
    if kind:
        entry |= {"group": group, "version": version}
    return entry | {"kind": kind or resource.kind, "verbs": list(verbs)}


def aggregated_discovery(core: bool, media_type: str = AGGREGATED_V2) -> dict[str, Any]:
    """The `APIGroupDiscoveryList` of `/api` (`core`) or `/apis`, in the apidiscovery version `media_type`
    names (v2 and v2beta1 differ only in apiVersion)."""
    version = _aggregated_version(media_type) or "v2"
    names = [""] if core else groups()
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": [_group_discovery(name) for name in names],
    }


def _group_discovery(group: str) -> dict[str, Any]:
    metadata: dict[str, Any] = (
        {"name": group, "creationTimestamp": None} if group else {"creationTimestamp": None}
    )
    versions = [
        {"version": version, "resources": _resources_discovery(group, version), "freshness": "Current"}
        for version in versions_of(group)
    ]
    return {"metadata": metadata, "versions": versions}


def _resources_discovery(group: str, version: str) -> list[dict[str, Any]]:
    return [_resource_discovery(resource) for resource in in_group_version(group, version)]


def _resource_discovery(resource: Resource) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": resource.plural,
        "responseKind": _kind(resource.group, resource.version, resource.kind),
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    if resource.subresources:
        entry["subresources"] = [_subresource_discovery(resource, name) for name in resource.subresources]
    return entry


def _subresource_discovery(resource: Resource, subresource: str) -> dict[str, Any]:
    verbs, group, version, kind = _SUBRESOURCES[subresource]
    response = _kind(group, version, kind) if kind else _kind(resource.group, resource.version, resource.kind)
    return {"subresource": subresource, "responseKind": response, "verbs": list(verbs)}


def _kind(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def negotiate_discovery(accept: str | None) -> str | None:
    """The aggregated discovery media type to answer an `Accept` header with, or None for the plain JSON
    documents: the first acceptable entry by quality then order, as kube-apiserver negotiates."""
    ranked: list[tuple[float, int, str | None]] = []
    for position, entry in enumerate((accept or "").split(",")):
        choice = _media_choice(entry)
        if choice is not None:
            ranked.append((-choice[0], position, choice[1]))
    return min(ranked)[2] if ranked else None


def _media_choice(entry: str) -> tuple[float, str | None] | None:
    # An entry that names aggregated discovery answers with it; plain JSON or a wildcard with None.
    media, *raw_params = (part.strip() for part in entry.split(";"))
    params = dict(_param(raw) for raw in raw_params)
    quality = _quality(params.pop("q", "1"))
    if quality <= 0:
        return None
    if media.lower() in ("application/json", "application/*", "*/*") and not params:
        return quality, None
    if media.lower() == "application/json" and params.get("g") == "apidiscovery.k8s.io":
        version = params.get("v", "")
        if params.get("as") == "APIGroupDiscoveryList" and version in _AGGREGATED_VERSIONS:
            return quality, _AGGREGATED_VERSIONS[version]
    return None


def _param(raw: str) -> tuple[str, str]:
    name, _, value = raw.partition("=")
    return name.strip(), value.strip().strip('"')


def _quality(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        return 0.0


def _aggregated_version(media_type: str) -> str | None:
    return next((version for version, media in _AGGREGATED_VERSIONS.items() if media == media_type), None)
