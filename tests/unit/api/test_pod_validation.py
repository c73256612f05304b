"""Pod (core/v1): containers, resources, claims, schedulingGroup and the scheduling fields."""

from __future__ import annotations

import pytest

from libs.api.manifests import parse_object, validate_document
from libs.api.validation import validate_update
from tests.unit.api.builders import error_lines, make_container, make_pod

QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def test_the_api_md_pod_is_admitted():
    doc = make_pod(
        schedulerName="default-scheduler",
        schedulingGroup={"podGroupName": "llm-train-worker-0"},
        priorityClassName="high-priority",
        nodeSelector={"topology.example.com/rack": "r07"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        resourceClaims=[
            {"name": "fabric", "resourceClaimTemplateName": "rack-fabric"},
            {"name": "gpus", "resourceClaimTemplateName": "two-gpus-same-numa"},
        ],
        containers=[
            make_container(
                requests={"cpu": "16", "memory": "64Gi"}, claims=[{"name": "fabric"}, {"name": "gpus"}]
            )
        ],
    )
    result = validate_document(doc)

    assert result.ok, result.message
    assert result.obj.spec.scheduling_group.pod_group_name == "llm-train-worker-0"
    assert result.obj.spec.requests() == {"cpu": 16_000, "memory": 64 * 2**30}


def test_containers_are_required():
    assert error_lines(make_pod(containers=[])) == ["spec.containers: Required value"]


def test_container_names_are_unique_dns_labels_and_images_required():
    containers = [make_container("a"), make_container("a"), {"name": "B"}]
    lines = error_lines(make_pod(containers=containers))
    assert lines[0] == 'spec.containers[1].name: Duplicate value: "a"'
    assert lines[1].startswith('spec.containers[2].name: Invalid value: "B": a lowercase RFC 1123 label')
    assert lines[2] == "spec.containers[2].image: Required value"


def test_malformed_quantity_is_a_field_error():
    assert error_lines(make_pod(containers=[make_container(requests={"cpu": "lots"})])) == [
        f'spec.containers[0].resources.requests[cpu]: Invalid value: "lots": {QUANTITY_FORMAT}'
    ]


def test_negative_quantity_and_request_above_limit_are_rejected():
    container = make_container(requests={"cpu": "4", "memory": "-1"}, limits={"cpu": "2"})
    assert error_lines(make_pod(containers=[container])) == [
        'spec.containers[0].resources.requests[memory]: Invalid value: "-1": must be greater than or equal to 0',
        'spec.containers[0].resources.requests[cpu]: Invalid value: "4": must be less than or equal to cpu limit of 2',
    ]


def test_extended_resources_are_whole():
    assert error_lines(make_pod(containers=[make_container(requests={"nvidia.com/gpu": "500m"})])) == [
        'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "500m": must be an integer'
    ]


def test_container_claims_must_name_pod_claims():
    container = make_container(claims=[{"name": "gpus"}])
    assert error_lines(make_pod(containers=[container])) == [
        'spec.containers[0].resources.claims[0]: Not found: "gpus": must be one of the names in '
        "pod.spec.resourceClaims which is empty"
    ]
    pod = make_pod(resourceClaims=[{"name": "fabric", "resourceClaimName": "f"}], containers=[container])
    assert error_lines(pod) == [
        'spec.containers[0].resources.claims[0]: Not found: "gpus": must be one of the names in '
        "pod.spec.resourceClaims: fabric"
    ]


def test_pod_claims_have_unique_names_and_exactly_one_source():
    claims = [
        {"name": "gpus", "resourceClaimTemplateName": "t"},
        {"name": "gpus", "resourceClaimName": "c", "resourceClaimTemplateName": "t"},
    ]
    assert error_lines(make_pod(resourceClaims=claims)) == [
        'spec.resourceClaims[1].name: Duplicate value: "gpus"',
        'spec.resourceClaims[1]: Invalid value: {"name":"gpus","resourceClaimName":"c",'
        '"resourceClaimTemplateName":"t"}: at most one of `resourceClaimName` or `resourceClaimTemplateName` '
        "may be specified",
    ]


def test_scheduling_group_needs_a_pod_group_name():
    assert error_lines(make_pod(schedulingGroup={})) == ["spec.schedulingGroup.podGroupName: Required value"]


def test_scheduling_group_is_immutable():
    old = make_pod(schedulingGroup={"podGroupName": "a"})
    new = make_pod(schedulingGroup={"podGroupName": "b"})
    assert error_lines(new, old=old) == [
        'spec.schedulingGroup: Invalid value: {"podGroupName":"b"}: field is immutable'
    ]


def test_workload_ref_together_with_scheduling_group_is_forbidden():
    doc = make_pod(schedulingGroup={"podGroupName": "a"}, workloadRef={"name": "w", "podGroup": "g"})
    assert error_lines(doc) == ["spec.workloadRef: Forbidden: may not be set together with `schedulingGroup`"]


def test_priority_fields_are_checked():
    doc = make_pod(priority=2**31, preemptionPolicy="Sometimes", priorityClassName="A")
    lines = error_lines(doc)
    assert lines[0].startswith('spec.priorityClassName: Invalid value: "A": a lowercase RFC 1123 subdomain')
    assert lines[1:] == [
        "spec.priority: Invalid value: 2147483648: must be less than or equal to 2147483647",
        'spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
    ]


def test_tolerations_are_checked():
    tolerations = [
        {"operator": "Equal", "value": "x"},
        {"key": "k", "operator": "Exists", "value": "v"},
        {"key": "k", "operator": "Maybe", "effect": "NoRun"},
    ]
    assert error_lines(make_pod(tolerations=tolerations)) == [
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
        'which means "match all values and all keys"',
        'spec.tolerations[1].operator: Invalid value: {"key":"k","operator":"Exists","value":"v"}: value must be '
        "empty when `operator` is 'Exists'",
        'spec.tolerations[2].operator: Unsupported value: "Maybe": supported values: "Equal", "Exists"',
        'spec.tolerations[2].effect: Unsupported value: "NoRun": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
    ]


def test_node_selector_labels_are_checked():
    lines = error_lines(make_pod(nodeSelector={"rack": "r 07"}))
    assert lines == [
        'spec.nodeSelector: Invalid value: "r 07": a valid label must be an empty string or consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ]


def test_run_seconds_annotation_must_be_a_non_negative_number():
    doc = make_pod()
    doc["metadata"]["annotations"] = {"podway.io/run-seconds": "-5"}
    assert error_lines(doc) == [
        'metadata.annotations[podway.io/run-seconds]: Invalid value: "-5": must be a non-negative number'
    ]


def test_restart_policy_enum():
    assert error_lines(make_pod(restartPolicy="Sometimes")) == [
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'
    ]


FORBIDDEN_UPDATE = (
    "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
    "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
    "previously negative)"
)


def _update_errors(old: dict, new: dict) -> list[str]:
    return [str(error) for error in validate_update(parse_object(old), parse_object(new))]


@pytest.mark.parametrize(
    "change",
    [
        {"containers": [make_container(requests={"cpu": "32", "memory": "64Gi"})]},
        {"nodeSelector": {"zone": "b"}},
        {"priorityClassName": "batch"},
        {"tolerations": []},
        {"overhead": {"cpu": "1"}},
    ],
    ids=["resources", "nodeSelector", "priorityClassName", "toleration-removed", "overhead"],
)
def test_a_pod_spec_change_other_than_upstreams_mutable_fields_is_forbidden(change):
    old = make_pod(tolerations=[{"key": "gpu", "operator": "Exists"}])
    new = make_pod(**{"tolerations": [{"key": "gpu", "operator": "Exists"}], **change})

    assert _update_errors(old, new) == [FORBIDDEN_UPDATE]


def test_a_pod_update_may_change_images_deadline_added_tolerations_labels_and_annotations():
    old = make_pod(tolerations=[{"key": "gpu", "operator": "Exists"}], terminationGracePeriodSeconds=-1)
    new = make_pod(
        tolerations=[{"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists"}],
        activeDeadlineSeconds=600,
        terminationGracePeriodSeconds=1,
    )
    new["spec"]["containers"][0]["image"] = "registry.example.com/trainer:v2"
    new["metadata"]["labels"] = {"team": "ml"}
    new["metadata"]["annotations"] = {"note": "x"}

    assert _update_errors(old, new) == []


def test_a_pod_read_back_with_the_node_it_runs_on_is_no_spec_change():
    old = make_pod()
    old["status"] = {"phase": "Running", "podway": {"nodeName": "node-a"}}
    read_back = make_pod(nodeName="node-a")
    read_back["status"] = old["status"]

    assert _update_errors(old, read_back) == []
    assert _update_errors(old, make_pod(nodeName="node-b")) == [FORBIDDEN_UPDATE]
    assert _update_errors(read_back, make_pod()) == []  # a manifest that names no node moves nothing


def test_podways_own_status_blocks_are_known_fields():
    pod = make_pod()
    pod["status"] = {"phase": "Running", "podway": {"nodeName": "node-a"}}

    assert validate_document(pod, field_validation="Strict").ok
