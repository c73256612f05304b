"""Resource paths as the API server parses them, and continue tokens."""

from __future__ import annotations

import pytest

from services.api_server.objects import continue_token, parse_revision, read_continue
from services.api_server.routes import GroupVersionPath, Target, UnknownPath, parse


def _target(path: str) -> tuple[str, str | None, str | None, str | None]:
    found = parse(path)
    assert isinstance(found, Target)
    return found.resource.kind, found.namespace, found.name, found.subresource


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/pods", ("Pod", None, None, None)),
        ("/api/v1/namespaces/ml/pods", ("Pod", "ml", None, None)),
        ("/api/v1/namespaces/ml/pods/p-0", ("Pod", "ml", "p-0", None)),
        ("/api/v1/namespaces/ml/pods/p-0/eviction", ("Pod", "ml", "p-0", "eviction")),
        ("/api/v1/namespaces/ml", ("Namespace", None, "ml", None)),
        ("/api/v1/nodes/n-1", ("Node", None, "n-1", None)),
        ("/apis/scheduling.k8s.io/v1alpha2/namespaces/ml/podgroups/g", ("PodGroup", "ml", "g", None)),
        ("/apis/scheduling.k8s.io/v1alpha1/namespaces/ml/workloads", ("Workload", "ml", None, None)),
        ("/apis/resource.k8s.io/v1/resourceslices", ("ResourceSlice", None, None, None)),
    ],
)
def test_resource_paths(path: str, expected: tuple[str, str | None, str | None, str | None]) -> None:
    assert _target(path) == expected


def test_a_group_version_path_is_its_resource_list() -> None:
    assert parse("/apis/batch/v1") == GroupVersionPath("batch", "v1")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v2/pods",
        "/apis/batch/v2/jobs",
        "/apis/unknown.io/v1/things",
        "/api/v1/namespaces/ml/nodes/n-1",  # a cluster-scoped kind under a namespace
        "/api/v1/namespaces/ml/pods/p/exec",  # a subresource Podway does not serve
        "/api/v1/namespaces/ml/pods/p/log/extra",
        "/healthz/x",
    ],
)
def test_paths_that_name_nothing_served(path: str) -> None:
    with pytest.raises(UnknownPath):
        parse(path)


def test_continue_tokens_round_trip_and_refuse_garbage() -> None:
    assert read_continue(continue_token("ml/p-9", 42)) == ("ml/p-9", 42)
    with pytest.raises(ValueError):
        read_continue("not-base64-json")


def test_resource_versions() -> None:
    assert parse_revision(None) is None
    assert parse_revision("") is None
    assert parse_revision("17") == 17
    with pytest.raises(ValueError):
        parse_revision("-1")
    with pytest.raises(ValueError):
        parse_revision("abc")
