"""The OpenAPI documents: every served kind under its upstream name and GVK, refs that resolve within each
document, and the operations kubectl looks into (fieldValidation on PATCH, strategic merge patches)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from libs.kubeapi import openapi
from libs.kubeapi.resources import RESOURCES, Resource

GROUP_VERSIONS = list(dict.fromkeys((r.group, r.version) for r in RESOURCES))
WRITE_PARAMS = {"dryRun", "fieldManager", "fieldValidation"}


def v3(group: str, version: str) -> dict[str, Any]:
    document = openapi.openapi_v3_document(group, version)
    assert document is not None
    return document


def walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object inside a value, the value included."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def operations(paths: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in paths.items():
        for method, operation in item.items():
            if method != "parameters":
                yield path, method, operation


def kind_schema(schemas: dict[str, Any], resource: Resource) -> dict[str, Any]:
    gvk = {"group": resource.group, "kind": resource.kind, "version": resource.version}
    found: list[dict[str, Any]] = [
        s for s in schemas.values() if gvk in s.get("x-kubernetes-group-version-kind", [])
    ]
    assert len(found) == 1
    return found[0]


def test_v2_is_one_swagger_document_whose_refs_resolve() -> None:
    document = openapi.openapi_v2()
    assert document["swagger"] == "2.0"
    definitions = document["definitions"]
    refs = {obj["$ref"] for obj in walk(document) if "$ref" in obj}
    assert refs
    for ref in refs:
        assert ref.startswith("#/definitions/")
        assert ref.removeprefix("#/definitions/") in definitions


def test_v2_operations_are_structurally_swagger() -> None:
    for path, method, operation in operations(openapi.openapi_v2()["paths"]):
        assert method in {"get", "put", "post", "delete", "patch"}, path
        assert operation["responses"]
        assert operation["operationId"]
        for param in operation.get("parameters", []):
            assert param["in"] in {"query", "path", "body"}
            assert ("schema" in param) == (param["in"] == "body"), (path, param)
            assert "type" in param or param["in"] == "body"
    ids = [op["operationId"] for _, _, op in operations(openapi.openapi_v2()["paths"])]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("group", "version"), GROUP_VERSIONS)
def test_each_v3_document_stands_alone(group: str, version: str) -> None:
    document = v3(group, version)
    assert document["openapi"].startswith("3.")
    schemas = document["components"]["schemas"]
    for obj in walk(document):
        if "$ref" in obj:
            assert obj["$ref"].removeprefix("#/components/schemas/") in schemas, obj["$ref"]
            assert set(obj) == {"$ref"}, "a v3 ref with siblings is wrapped in allOf"


def test_every_served_kind_has_its_upstream_schema_and_list() -> None:
    definitions = openapi.openapi_v2()["definitions"]
    assert "io.k8s.api.core.v1.Pod" in definitions
    assert "io.k8s.api.scheduling.v1alpha2.PodGroup" in definitions
    assert "io.k8s.api.events.v1.Event" in definitions
    for resource in RESOURCES:
        for schemas in (definitions, v3(resource.group, resource.version)["components"]["schemas"]):
            schema = kind_schema(schemas, resource)
            assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])
            if "list" not in resource.verbs:
                continue  # a create-only kind (SelfSubjectReview) has no list
            list_gvk = {"group": resource.group, "kind": resource.list_kind_name, "version": resource.version}
            assert any(list_gvk in s.get("x-kubernetes-group-version-kind", []) for s in schemas.values())


def test_metadata_is_upstream_object_meta() -> None:
    pod = openapi.openapi_v2()["definitions"]["io.k8s.api.core.v1.Pod"]
    assert (
        pod["properties"]["metadata"]["$ref"]
        == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    )
    v3_pod = v3("", "v1")["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
    assert v3_pod["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    ]


def test_no_object_says_unknown_fields_are_fine() -> None:
    for obj in walk(openapi.openapi_v2()):
        assert obj.get("additionalProperties") is not True
    labels = openapi.openapi_v2()["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert labels["properties"]["labels"]["additionalProperties"] == {"type": "string"}


def test_lists_merge_as_upstream() -> None:
    definitions = openapi.openapi_v2()["definitions"]
    spec = definitions["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert spec["containers"]["x-kubernetes-patch-merge-key"] == "name"
    assert spec["containers"]["x-kubernetes-patch-strategy"] == "merge"
    assert spec["containers"]["x-kubernetes-list-map-keys"] == ["name"]
    assert spec["volumes"]["x-kubernetes-list-type"] == "map"
    assert spec["tolerations"]["x-kubernetes-list-type"] == "atomic"
    container = definitions["io.k8s.api.core.v1.Container"]["properties"]
    assert container["env"]["x-kubernetes-patch-merge-key"] == "name"
    assert container["ports"]["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    conditions = definitions["io.k8s.api.core.v1.PodStatus"]["properties"]["conditions"]
    assert (conditions["x-kubernetes-list-type"], conditions["x-kubernetes-patch-merge-key"]) == (
        "map",
        "type",
    )


def test_passed_through_fields_are_known() -> None:
    container = openapi.openapi_v2()["definitions"]["io.k8s.api.core.v1.Container"]["properties"]
    assert {"name", "image", "resources", "env", "volumeMounts", "securityContext"} <= set(container)
    assert container["tty"] == {"type": "boolean"}


@pytest.mark.parametrize(("group", "version"), GROUP_VERSIONS)
def test_kubectl_finds_field_validation_on_every_patch_and_write(group: str, version: str) -> None:
    # kubectl's QueryParamVerifierV3: the first PATCH operation whose GVK matches must list fieldValidation.
    paths = v3(group, version)["paths"]
    patched = set()
    for path, method, operation in operations(paths):
        names = {param["name"] for param in operation.get("parameters", []) if param["in"] == "query"}
        if method in {"patch", "post", "put"}:
            assert names >= WRITE_PARAMS, (path, method)
        if method == "patch":
            assert "force" in names
            assert "application/strategic-merge-patch+json" in operation["requestBody"]["content"]
            patched.add(operation["x-kubernetes-group-version-kind"]["kind"])
    writable = {r.kind for r in RESOURCES if (r.group, r.version) == (group, version) and "patch" in r.verbs}
    assert patched == writable


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: f"{r.group or 'core'}/{r.version}/{r.plural}")
def test_explain_finds_each_resource_path(resource: Resource) -> None:
    # kubectl explain reads the GVK off the first operation of the collection (or item) path.
    paths = v3(resource.group, resource.version)["paths"]
    collection = paths[resource.path("{namespace}") if resource.namespaced else resource.path()]
    first, action = ("get", "list") if "list" in resource.verbs else ("post", "post")
    assert collection[first]["x-kubernetes-group-version-kind"] == {
        "group": resource.group,
        "kind": resource.kind,
        "version": resource.version,
    }
    assert collection[first]["x-kubernetes-action"] == action


def test_pod_subresources_and_watch_paths() -> None:
    paths = v3("", "v1")["paths"]
    item = "/api/v1/namespaces/{namespace}/pods/{name}"
    assert set(paths[f"{item}/status"]) == {"get", "parameters"}  # status is read only
    assert paths[f"{item}/eviction"]["post"]["x-kubernetes-group-version-kind"]["group"] == "policy"
    assert paths[f"{item}/log"]["get"]["operationId"] == "readCoreV1NamespacedPodLog"
    assert paths["/api/v1/watch/namespaces/{namespace}/pods"]["get"]["x-kubernetes-action"] == "watchlist"
    assert paths["/api/v1/pods"]["get"]["operationId"] == "listCoreV1PodForAllNamespaces"
    collection = paths["/api/v1/namespaces/{namespace}/pods"]
    assert collection["delete"]["operationId"] == "deleteCoreV1CollectionNamespacedPod"
    events = paths["/api/v1/namespaces/{namespace}/events/{name}"]
    assert set(events) == {"get", "parameters"}


def test_v3_index_points_at_each_document_by_hash() -> None:
    index = openapi.openapi_v3_index("build-1")
    assert set(index["paths"]) == {openapi.v3_path(g, v) for g, v in GROUP_VERSIONS}
    url = index["paths"]["apis/batch/v1"]["serverRelativeURL"]
    assert url == f"/openapi/v3/apis/batch/v1?hash={openapi.openapi_v3_hash('batch', 'v1', 'build-1')}"
    assert openapi.openapi_v3_hash("batch", "v1", "build-2") != openapi.openapi_v3_hash(
        "batch", "v1", "build-1"
    )
    assert openapi.openapi_v3_document("apps", "v1") is None
    assert openapi.openapi_v3_hash("apps", "v1") == ""


def test_documents_are_built_once() -> None:
    assert openapi.openapi_v2() is openapi.openapi_v2()
    assert openapi.openapi_v3_document("", "v1") is openapi.openapi_v3_document("", "v1")
