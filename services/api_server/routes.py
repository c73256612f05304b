"""Kubernetes REST paths, parsed: which resource, namespace, name and subresource a URL names."""

from __future__ import annotations

from dataclasses import dataclass

from libs.kubeapi.resources import Resource, lookup


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource URL names: a collection (no name), an object, or an object's subresource."""

    resource: Resource
    namespace: str | None
    name: str | None = None
    subresource: str | None = None


@dataclass(frozen=True, slots=True)
class GroupVersionPath:
    """`/api/v1` or `/apis/{group}/{version}`, with nothing after it: the version's resource list."""

    group: str
    version: str


class UnknownPath(Exception):
    """A path that names nothing Podway serves (404 NotFound, as the API server answers)."""


def parse(path: str) -> Target | GroupVersionPath:
    """The target of a resource path; UnknownPath when it names nothing served."""
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise UnknownPath(path)
    if not rest:
        return GroupVersionPath(group, version)
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and lookup(group, version, rest[2]) is not None:
        namespace, rest = rest[1], rest[2:]
    resource = lookup(group, version, rest[0])
    if resource is None or len(rest) > 3:
        raise UnknownPath(path)
    if namespace is not None and not resource.namespaced:
        raise UnknownPath(path)
    name = rest[1] if len(rest) > 1 else None
    if name is not None and resource.namespaced and namespace is None:
        raise UnknownPath(path)  # `/api/v1/pods/x`: a namespaced object is named in its namespace
    subresource = rest[2] if len(rest) > 2 else None
    if subresource is not None and subresource not in resource.subresources:
        raise UnknownPath(path)
    return Target(resource, namespace, name, subresource)
