"""Served versions: a stored v1alpha2 Workload read as v1alpha1 and written back loses nothing."""

from __future__ import annotations

from libs.api.conversion import KEPT_TEMPLATES, convert_document
from libs.kubeapi.resources import by_kind, version_priority, versions_of
from libs.kubeapi.versions import as_served

STORED = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "Workload",
    "metadata": {"name": "train", "namespace": "ml", "labels": {"team": "a"}},
    "spec": {
        "podGroupTemplates": [
            {
                "name": "worker",
                "schedulingPolicy": {"gang": {"minCount": 4}},
                "schedulingConstraints": {"topology": [{"key": "topology.example.com/rack"}]},
            },
            {"name": "driver", "schedulingPolicy": {"basic": {}}},
        ]
    },
}


def test_a_v1alpha2_workload_read_as_v1alpha1_and_written_back_is_what_was_stored() -> None:
    legacy = by_kind("Workload", "scheduling.k8s.io/v1alpha1")
    assert legacy is not None
    shown = as_served(legacy, STORED)
    assert shown["apiVersion"] == "scheduling.k8s.io/v1alpha1"
    assert shown["spec"]["podGroups"][0] == {"name": "worker", "policy": {"gang": {"minCount": 4}}}
    assert KEPT_TEMPLATES in shown["metadata"]["annotations"]
    back, _ = convert_document(shown)
    assert back == STORED


def test_a_template_v1alpha1_changes_takes_its_new_policy_and_keeps_the_rest() -> None:
    legacy = by_kind("Workload", "scheduling.k8s.io/v1alpha1")
    assert legacy is not None
    shown = as_served(legacy, STORED)
    shown["spec"]["podGroups"][0]["policy"] = {"gang": {"minCount": 8}}
    back, _ = convert_document(shown)
    worker = back["spec"]["podGroupTemplates"][0]
    assert worker["schedulingPolicy"] == {"gang": {"minCount": 8}}
    assert worker["schedulingConstraints"] == STORED["spec"]["podGroupTemplates"][0]["schedulingConstraints"]


def test_versions_are_ordered_as_kubernetes_orders_them() -> None:
    assert sorted(["v1alpha1", "v1beta1", "v1", "v1alpha2", "v2"], key=version_priority) == [
        "v2",
        "v1",
        "v1beta1",
        "v1alpha2",
        "v1alpha1",
    ]
    assert versions_of("scheduling.k8s.io") == ["v1", "v1beta1", "v1alpha3", "v1alpha2", "v1alpha1"]
