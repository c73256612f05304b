"""The discovery documents in kube-apiserver's shapes: what kubectl and client-go read to map names to
resources."""

from __future__ import annotations

import pytest

from libs.kubeapi import discovery
from libs.kubeapi.discovery import AGGREGATED_V2, AGGREGATED_V2BETA1
from libs.kubeapi.resources import RESOURCES, groups

KUBECTL_ACCEPT = f"{AGGREGATED_V2},{AGGREGATED_V2BETA1},application/json"


def test_version_names_kubernetes_1_36() -> None:
    info = discovery.version_info()
    assert (info["major"], info["minor"], info["gitVersion"]) == ("1", "36", "v1.36.0-podway")
    assert set(info) >= {"gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"}


def test_api_lists_the_core_version_and_the_address_to_dial() -> None:
    assert discovery.api_versions() == {"kind": "APIVersions", "versions": ["v1"]}
    assert discovery.api_versions("10.0.0.1:6443")["serverAddressByClientCIDRs"] == [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}
    ]


def test_apis_lists_every_named_group_with_its_preferred_version() -> None:
    document = discovery.api_group_list()
    assert (document["kind"], document["apiVersion"]) == ("APIGroupList", "v1")
    by_name = {group["name"]: group for group in document["groups"]}
    assert list(by_name) == groups()
    scheduling = by_name["scheduling.k8s.io"]
    assert scheduling["preferredVersion"] == {"groupVersion": "scheduling.k8s.io/v1", "version": "v1"}
    assert {"groupVersion": "scheduling.k8s.io/v1alpha2", "version": "v1alpha2"} in scheduling["versions"]


def test_a_group_document_and_an_unserved_group() -> None:
    document = discovery.api_group("batch")
    assert document == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "batch",
        "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"},
    }
    assert discovery.api_group("apps") is None


def test_core_resource_list_has_no_api_version_and_lists_pod_subresources() -> None:
    document = discovery.api_resource_list("", "v1")
    assert document is not None
    assert "apiVersion" not in document
    assert (document["kind"], document["groupVersion"]) == ("APIResourceList", "v1")
    entries = {entry["name"]: entry for entry in document["resources"]}
    assert entries["pods"] == {
        "name": "pods",
        "singularName": "pod",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "shortNames": ["po"],
        "categories": ["all"],
    }
    assert entries["pods/status"] == {
        "name": "pods/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["get"],
    }
    assert entries["pods/log"]["verbs"] == ["get"]
    assert entries["pods/eviction"] == {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    }
    assert entries["events"]["verbs"] == ["get", "list", "watch"]


def test_named_resource_list_and_an_unserved_version() -> None:
    document = discovery.api_resource_list("scheduling.k8s.io", "v1alpha2")
    assert document is not None
    assert (document["apiVersion"], document["groupVersion"]) == ("v1", "scheduling.k8s.io/v1alpha2")
    assert {entry["name"] for entry in document["resources"]} == {
        "workloads",
        "workloads/status",
        "podgroups",
        "podgroups/status",
    }
    assert discovery.api_resource_list("batch", "v2") is None


def test_every_resource_is_discovered_in_both_forms() -> None:
    aggregated = [discovery.aggregated_discovery(core=True), discovery.aggregated_discovery(core=False)]
    found = {
        (
            item["metadata"].get("name", ""),
            version["version"],
            resource["resource"],
            resource["responseKind"]["kind"],
        )
        for document in aggregated
        for item in document["items"]
        for version in item["versions"]
        for resource in version["resources"]
    }
    for resource in RESOURCES:
        assert (resource.group, resource.version, resource.plural, resource.kind) in found
        listed = discovery.api_resource_list(resource.group, resource.version)
        assert listed is not None
        assert resource.plural in {entry["name"] for entry in listed["resources"]}


def test_aggregated_core_discovery() -> None:
    document = discovery.aggregated_discovery(core=True)
    assert (document["kind"], document["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    [core] = document["items"]
    assert core["metadata"] == {"creationTimestamp": None}
    [version] = core["versions"]
    assert (version["version"], version["freshness"]) == ("v1", "Current")
    pods = next(resource for resource in version["resources"] if resource["resource"] == "pods")
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert (pods["scope"], pods["singularResource"], pods["shortNames"]) == ("Namespaced", "pod", ["po"])
    assert pods["categories"] == ["all"]
    eviction = next(sub for sub in pods["subresources"] if sub["subresource"] == "eviction")
    assert eviction == {
        "subresource": "eviction",
        "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "verbs": ["create"],
    }
    nodes = next(resource for resource in version["resources"] if resource["resource"] == "nodes")
    assert nodes["scope"] == "Cluster"


def test_aggregated_group_discovery_lists_versions_preferred_first() -> None:
    document = discovery.aggregated_discovery(core=False)
    by_name = {item["metadata"]["name"]: item for item in document["items"]}
    assert list(by_name) == groups()
    assert [v["version"] for v in by_name["scheduling.k8s.io"]["versions"]] == [
        "v1",
        "v1beta1",
        "v1alpha3",
        "v1alpha2",
        "v1alpha1",
    ]
    classes = by_name["resource.k8s.io"]["versions"][0]["resources"]
    assert "subresources" not in next(r for r in classes if r["resource"] == "deviceclasses")


def test_v2beta1_differs_only_in_api_version() -> None:
    v2 = discovery.aggregated_discovery(core=False, media_type=AGGREGATED_V2)
    beta = discovery.aggregated_discovery(core=False, media_type=AGGREGATED_V2BETA1)
    assert beta["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert {**beta, "apiVersion": v2["apiVersion"]} == v2


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (KUBECTL_ACCEPT, AGGREGATED_V2),
        (f"{AGGREGATED_V2BETA1},application/json", AGGREGATED_V2BETA1),
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5,application/json", None),
        ("application/json", None),
        ("*/*", None),
        (None, None),
        ("", None),
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", None),
        ("application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList", AGGREGATED_V2),
    ],
)
def test_negotiation(accept: str | None, chosen: str | None) -> None:
    assert discovery.negotiate_discovery(accept) == chosen
