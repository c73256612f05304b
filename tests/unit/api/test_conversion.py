"""v1.35 → v1.36 conversion: Workload podGroups, Pod workloadRef and the PodGroups it implies."""

from __future__ import annotations

import copy

from libs.api.conversion import (
    WORKLOAD_CONVERTED,
    WORKLOAD_REF_CONVERTED,
    convert_document,
    convert_documents,
    legacy_pod_group_name,
)
from libs.api.manifests import parse_object, validate_document
from libs.api.podgroups import complete_from_workload
from tests.unit.api.builders import make_pod, make_pod_group, make_workload


def legacy_workload(name: str = "train", namespace: str = "ml") -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
            "podGroups": [
                {"name": "worker", "policy": {"gang": {"minCount": 4}}},
                {"name": "driver", "policy": {"basic": {}}},
            ],
        },
    }


def legacy_pod(
    name: str, group: str = "worker", replica_key: str | None = None, workload: str = "train"
) -> dict:
    reference = {"name": workload, "podGroup": group}
    if replica_key is not None:
        reference["podGroupReplicaKey"] = replica_key
    return make_pod(name=name, workloadRef=reference)


def test_a_v1alpha1_workload_becomes_v1alpha2_templates():
    converted, warnings = convert_document(legacy_workload())

    assert converted["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert converted["spec"] == {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
        "podGroupTemplates": [
            {"name": "worker", "schedulingPolicy": {"gang": {"minCount": 4}}},
            {"name": "driver", "schedulingPolicy": {"basic": {}}},
        ],
    }
    assert warnings == [
        "scheduling.k8s.io/v1alpha1 Workload is deprecated; converted to scheduling.k8s.io/v1alpha2"
    ]
    assert validate_document(legacy_workload()).warnings == (WORKLOAD_CONVERTED,)


def test_conversion_does_not_touch_its_input():
    original = legacy_workload()
    convert_document(original)
    assert original == legacy_workload()


def test_v1alpha1_desired_count_is_dropped():
    doc = legacy_workload()
    doc["spec"]["podGroups"][0]["policy"]["gang"]["desiredCount"] = 6
    converted, _ = convert_document(doc)
    assert converted["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 4}}


def test_v1_36_documents_pass_unchanged():
    doc = make_workload()
    assert convert_document(doc) == (doc, [])


def test_a_pod_workload_ref_becomes_a_scheduling_group():
    converted, warnings = convert_document(legacy_pod("p0", replica_key="r1"))

    assert "workloadRef" not in converted["spec"]
    assert converted["spec"]["schedulingGroup"] == {"podGroupName": "train-worker-r1"}
    assert warnings == [WORKLOAD_REF_CONVERTED]


def test_a_pod_naming_its_podgroup_both_ways_alike_is_converted_and_two_podgroups_are_refused():
    again = legacy_pod("p0")  # as kubectl apply patches a converted pod: the workloadRef put back
    again["spec"]["schedulingGroup"] = {"podGroupName": "train-worker"}
    converted, warnings = convert_document(again)
    assert "workloadRef" not in converted["spec"]
    assert converted["spec"]["schedulingGroup"] == {"podGroupName": "train-worker"}
    assert warnings == [WORKLOAD_REF_CONVERTED]
    assert validate_document(again).errors == ()

    other = legacy_pod("p0")
    other["spec"]["schedulingGroup"] = {"podGroupName": "elsewhere"}
    assert convert_document(other) == (other, [])
    (error,) = validate_document(other).errors
    assert "may not be set together with `schedulingGroup`" in str(error)


def test_pod_group_names_are_deterministic():
    assert legacy_pod_group_name("train", "worker") == "train-worker"
    assert legacy_pod_group_name("train", "worker", "0") == "train-worker-0"


def test_pods_imply_one_pod_group_per_workload_group_and_replica_key():
    docs = [
        legacy_workload(),
        legacy_pod("p0", replica_key="0"),
        legacy_pod("p1", replica_key="0"),
        legacy_pod("p2", replica_key="1"),
        legacy_pod("d0", group="driver"),
    ]

    converted, warnings = convert_documents(docs)

    pod_groups = [doc for doc in converted if doc["kind"] == "PodGroup"]
    assert [pg["metadata"]["name"] for pg in pod_groups] == [
        "train-worker-0",
        "train-worker-1",
        "train-driver",
    ]
    assert pod_groups[0] == {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": "train-worker-0",
            "namespace": "ml",
            "annotations": {"podway.io/workload-ref-name": "train"},
        },
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "worker"}},
            "schedulingPolicy": {"gang": {"minCount": 4}},
        },
    }
    assert pod_groups[2]["spec"]["schedulingPolicy"] == {"basic": {}}
    assert warnings.count(WORKLOAD_REF_CONVERTED) == 4
    assert "created PodGroup ml/train-worker-0 for pods' spec.workloadRef" in warnings
    assert all(validate_document(doc).ok for doc in converted)


def test_pod_groups_already_in_the_batch_are_not_duplicated():
    existing = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "train-worker", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    converted, _ = convert_documents([legacy_workload(), existing, legacy_pod("p0")])
    assert [doc["metadata"]["name"] for doc in converted if doc["kind"] == "PodGroup"] == ["train-worker"]


def test_pods_whose_workload_is_not_in_the_batch_record_their_reference_and_imply_no_pod_group_here():
    converted, warnings = convert_documents([legacy_pod("p0", workload="elsewhere", replica_key="3")])

    assert [doc["kind"] for doc in converted] == ["Pod"]
    pod = converted[0]
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "elsewhere-worker-3"}
    assert pod["metadata"]["annotations"] == {
        "podway.io/workload-ref-name": "elsewhere",
        "podway.io/workload-ref-pod-group": "worker",
        "podway.io/workload-ref-replica-key": "3",
    }
    assert warnings == [WORKLOAD_REF_CONVERTED]
    assert validate_document(pod).warnings == ()


def test_a_pod_group_takes_its_policy_from_the_template_it_refers_to():
    stored = parse_object(convert_document(legacy_workload("llm-train"))[0])

    completed = complete_from_workload(parse_object(make_pod_group()), stored)

    assert completed.spec.scheduling_policy.gang_min_count == 4


def test_a_pod_with_both_workload_ref_and_scheduling_group_is_not_converted():
    doc = legacy_pod("p0")
    doc["spec"]["schedulingGroup"] = {"podGroupName": "x"}
    converted, warnings = convert_documents([copy.deepcopy(doc)])
    assert converted == [doc]
    assert warnings == []
