"""Kueue's quota kinds (kueue.x-k8s.io/v1beta2, v1beta1 converted): defaults, the CRD schema's and Kueue's
webhooks' errors in their words, and v1beta1's field names in the errors about a v1beta1 document."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from libs.api.kueue_versions import DEPRECATED
from libs.api.manifests import validate_document
from libs.core.quota.inputs import cluster_queue_of


def cluster_queue(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "cohortName": "research",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "a100",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "64"},
                            {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8"},
                        ],
                    }
                ],
            }
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": base,
    }


def gpu_quota(doc: dict[str, Any]) -> dict[str, Any]:
    quota: dict[str, Any] = doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]
    return quota


def errors_of(doc: dict[str, Any]) -> list[str]:
    result = validate_document(doc)
    assert not result.ok
    return [str(error) for error in result.errors]


def test_a_cluster_queue_is_stored_with_the_crd_defaults():
    result = validate_document(cluster_queue())
    assert result.ok, result.message
    spec = result.obj.to_wire()["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["stopPolicy"] == "None"
    assert spec["preemption"] == {
        "reclaimWithinCohort": "Never",
        "borrowWithinCohort": {"policy": "Never"},
        "withinClusterQueue": "Never",
    }
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}


def test_borrowing_limit_without_a_cohort_is_refused_by_the_crd_rule():
    doc = cluster_queue()
    del doc["spec"]["cohortName"]
    assert errors_of(doc) == [
        'spec: Invalid value: "object": borrowingLimit must be nil when cohort is empty'
    ]


def test_lending_limit_without_a_cohort_is_refused_by_the_webhook():
    doc = cluster_queue()
    del doc["spec"]["cohortName"]
    del gpu_quota(doc)["borrowingLimit"]
    gpu_quota(doc)["lendingLimit"] = "4"
    assert errors_of(doc) == [
        "spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: "
        'Invalid value: "4": must be nil when cohort is empty'
    ]


def test_lending_limit_above_the_nominal_quota_is_refused():
    doc = cluster_queue()
    gpu_quota(doc)["lendingLimit"] = "9"
    assert errors_of(doc) == [
        "spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: "
        'Invalid value: "9": must be less than or equal to the nominalQuota'
    ]


def test_negative_quotas_are_refused_where_they_are():
    doc = cluster_queue()
    gpu_quota(doc)["nominalQuota"] = "-1"
    gpu_quota(doc)["borrowingLimit"] = "-2"
    assert errors_of(doc) == [
        "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: "
        'Invalid value: "-1": must be greater than or equal to 0',
        "spec.resourceGroups[0].flavors[0].resources[1].borrowingLimit: "
        'Invalid value: "-2": must be greater than or equal to 0',
    ]


def test_a_flavor_must_list_every_covered_resource_in_order():
    doc = cluster_queue()
    quotas = doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    quotas.reverse()
    assert errors_of(doc) == [
        'spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: "nvidia.com/gpu": '
        "must match the name in coveredResources",
        'spec.resourceGroups[0].flavors[0].resources[1].name: Invalid value: "cpu": '
        "must match the name in coveredResources",
    ]
    quotas.pop()
    assert errors_of(doc) == [
        'spec.resourceGroups[0]: Invalid value: "object": '
        "flavors must have the same number of resources as the coveredResources"
    ]


def test_a_resource_and_a_flavor_belong_to_one_resource_group():
    doc = cluster_queue()
    doc["spec"]["resourceGroups"].append(copy.deepcopy(doc["spec"]["resourceGroups"][0]))
    assert errors_of(doc) == [
        'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"',
        'spec.resourceGroups[1].coveredResources[1]: Duplicate value: "nvidia.com/gpu"',
        'spec.resourceGroups[1].flavors[0].name: Duplicate value: "a100"',
    ]


def test_at_most_sixteen_resource_groups():
    doc = cluster_queue()
    group = doc["spec"]["resourceGroups"][0]
    doc["spec"]["resourceGroups"] = [
        {
            "coveredResources": [f"example.com/r{i}"],
            "flavors": [{"name": f"f{i}", "resources": [{"name": f"example.com/r{i}", "nominalQuota": "1"}]}],
        }
        for i in range(16)
    ]
    assert validate_document(doc).ok
    doc["spec"]["resourceGroups"].append(group)
    assert errors_of(doc) == ["spec.resourceGroups: Too many: 17: must have at most 16 items"]


def test_required_fields_and_names_are_reported_in_the_schema_words():
    doc = cluster_queue(cohortName="Research")
    flavor = doc["spec"]["resourceGroups"][0]["flavors"][0]
    del flavor["name"]
    del gpu_quota(doc)["nominalQuota"]
    doc["spec"]["resourceGroups"][0]["coveredResources"] = []
    errors = errors_of(doc)
    assert "spec.resourceGroups[0].coveredResources: Required value" in errors
    assert "spec.resourceGroups[0].flavors[0].name: Required value" in errors
    assert "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: Required value" in errors
    assert any(
        e.startswith('spec.cohortName: Invalid value: "Research": spec.cohortName in body') for e in errors
    )


def test_enumerations_and_preemption_rules():
    doc = cluster_queue(
        queueingStrategy="FIFO",
        preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
        flavorFungibility={"whenCanBorrow": "MayStopSearch", "preference": "PreemptionOverBorrowing"},
    )
    assert errors_of(doc) == [
        'spec.queueingStrategy: Unsupported value: "FIFO": supported values: "StrictFIFO", "BestEffortFIFO"',
        'spec.preemption: Invalid value: "object": reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never',
        'spec.flavorFungibility: Invalid value: "object": '
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ]


@pytest.mark.parametrize(
    ("weight", "message"),
    [("-1", "must be greater than or equal to 0"), ("1n", "When not 0, weight must be > 10e-9")],
)
def test_a_fair_sharing_weight_is_zero_or_above_a_nano(weight: str, message: str):
    doc = cluster_queue(fairSharing={"weight": weight})
    assert errors_of(doc) == [f'spec.fairSharing: Invalid value: "{weight}": {message}']
    assert validate_document(cluster_queue(fairSharing={"weight": "0"})).ok


def test_a_cohort_needs_a_parent_for_its_limits_but_may_lend_beyond_its_quota():
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {"resourceGroups": cluster_queue()["spec"]["resourceGroups"]},
    }
    gpu_quota(doc)["lendingLimit"] = "100"
    assert errors_of(doc) == [
        'spec.resourceGroups[0].flavors[0].resources[1].borrowingLimit: Invalid value: "8": '
        "must be nil when parent is empty",
        'spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: "100": '
        "must be nil when parent is empty",
    ]
    doc["spec"]["parentName"] = "org"
    assert validate_document(doc).ok


def test_a_local_queue_is_namespaced_and_its_cluster_queue_is_immutable():
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "default"},
        "spec": {"clusterQueue": "team-a"},
    }
    assert errors_of(doc) == ["metadata.namespace: Required value"]
    doc["metadata"]["namespace"] = "ml"
    old = validate_document(doc).obj
    assert old is not None
    assert old.to_wire()["spec"]["stopPolicy"] == "None"
    moved = copy.deepcopy(doc)
    moved["spec"]["clusterQueue"] = "team-b"
    result = validate_document(moved, old=old)
    assert [str(e) for e in result.errors] == [
        'spec.clusterQueue: Invalid value: "string": field is immutable'
    ]


def test_a_resource_flavor_holds_at_most_eight_labels_and_unique_taints():
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "spot"},
        "spec": {
            "nodeLabels": {"cloud.example.com/spot": "true"},
            "nodeTaints": [
                {"key": "spot", "value": "true", "effect": "NoSchedule"},
                {"key": "spot", "value": "yes", "effect": "NoSchedule"},
            ],
        },
    }
    errors = errors_of(doc)
    assert errors[0].startswith("spec.nodeTaints[1]: Duplicate value:")
    assert errors[0].endswith("taints must be unique by key and effect pair")
    doc["spec"]["nodeTaints"] = [{"key": "spot", "effect": "Sometimes"}]
    doc["spec"]["nodeLabels"] = {f"example.com/l{i}": "x" for i in range(9)}
    assert errors_of(doc) == [
        "spec.nodeLabels: Too many: 9: must have at most 8 items",
        'spec.nodeTaints: Invalid value: "array": '
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ]


def test_v1beta1_is_converted_with_upstream_deprecation_warning():
    doc = cluster_queue()
    doc["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    doc["spec"]["cohort"] = doc["spec"].pop("cohortName")
    doc["spec"]["admissionChecks"] = ["provisioning"]
    doc["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
    result = validate_document(doc)
    assert result.ok, result.message
    assert result.warnings == (DEPRECATED,)
    wire = result.obj.to_wire()
    assert wire["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert wire["spec"]["cohortName"] == "research"
    assert "cohort" not in wire["spec"]
    assert wire["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "provisioning"}]}
    assert wire["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }


@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ({}, "spec.admissionScope.admissionMode: Required value"),
        (
            {"admissionMode": "ByUsage"},
            'spec.admissionScope.admissionMode: Unsupported value: "ByUsage": supported values: '
            '"UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"',
        ),
    ],
)
def test_an_admission_scope_needs_one_of_kueues_modes(scope, message):
    assert errors_of(cluster_queue(admissionScope=scope)) == [message]


def test_an_admission_scope_is_kept_and_read_by_the_quota_core():
    result = validate_document(
        cluster_queue(admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
    )
    assert result.ok, result.message
    assert result.obj.to_wire()["spec"]["admissionScope"] == {
        "admissionMode": "UsageBasedAdmissionFairSharing"
    }
    assert cluster_queue_of(result.obj).admission_fair_sharing
    plain = validate_document(cluster_queue(admissionScope={"admissionMode": "NoAdmissionFairSharing"}))
    assert not cluster_queue_of(plain.obj).admission_fair_sharing
