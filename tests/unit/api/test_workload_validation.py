"""Workload (scheduling.k8s.io/v1alpha2): every rule of the Workload API, each with a failing example."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from libs.api.errors import format_invalid
from libs.api.manifests import validate_document
from tests.unit.api.builders import error_lines, make_template, make_workload

DNS_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
DNS_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

API_MD_EXAMPLE = textwrap.dedent(
    """\
    apiVersion: scheduling.k8s.io/v1alpha2
    kind: Workload
    metadata: {name: BAD_NAME, namespace: ml}
    spec:
      podGroupTemplates:
      - name: a
        schedulingPolicy: {gang: {minCount: 0}}
        disruptionMode: Everything
      - name: b
        schedulingPolicy: {gang: {minCount: -3}}
      - name: a
        schedulingPolicy: {basic: {}}
      - {name: c, schedulingPolicy: {basic: {}}}
      - {name: d, schedulingPolicy: {basic: {}}}
      - {name: e, schedulingPolicy: {basic: {}}}
      - {name: f, schedulingPolicy: {basic: {}}}
      - {name: g, schedulingPolicy: {basic: {}}}
      - {name: h, schedulingPolicy: {basic: {}}}
    """
)


def test_the_api_md_example_reports_all_six_errors_verbatim():
    result = validate_document(yaml.safe_load(API_MD_EXAMPLE))

    assert format_invalid("Workload", "train-b", result.errors) == textwrap.dedent(
        """\
        The Workload "train-b" is invalid:
        * metadata.name: Invalid value: "BAD_NAME": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character
        * spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value
        * spec.podGroupTemplates[1].schedulingPolicy.gang.minCount: Invalid value: -3: must be greater than or equal to 1
        * spec.podGroupTemplates[2].name: Duplicate value: "a"
        * spec.podGroupTemplates: Too many: 9: must have at most 8 items
        * spec.podGroupTemplates[0].disruptionMode: Unsupported value: "Everything": supported values: "Pod", "PodGroup\""""
    )
    assert result.obj is None
    assert result.message.startswith('The Workload "BAD_NAME" is invalid:\n* metadata.name:')


def test_a_valid_workload_is_admitted_with_defaults():
    result = validate_document(make_workload())

    assert result.ok, result.message
    assert result.obj.spec.pod_group_templates[0].disruption_mode == "Pod"


def test_name_must_be_a_dns_subdomain():
    assert error_lines(make_workload(name="Train")) == [
        f'metadata.name: Invalid value: "Train": {DNS_SUBDOMAIN}'
    ]


def test_name_is_required():
    doc = make_workload()
    del doc["metadata"]["name"]
    assert error_lines(doc) == ["metadata.name: Required value: name or generateName is required"]


def test_namespace_is_required():
    doc = make_workload()
    del doc["metadata"]["namespace"]
    assert error_lines(doc) == ["metadata.namespace: Required value"]


def test_at_least_one_template_is_required():
    assert error_lines(make_workload(podGroupTemplates=[])) == [
        "spec.podGroupTemplates: Required value: must have at least one item"
    ]


def test_at_most_eight_templates():
    templates = [make_template(f"t{i}") for i in range(9)]
    assert error_lines(make_workload(podGroupTemplates=templates)) == [
        "spec.podGroupTemplates: Too many: 9: must have at most 8 items"
    ]


def test_template_names_are_unique():
    templates = [make_template("worker"), make_template("worker")]
    assert error_lines(make_workload(podGroupTemplates=templates)) == [
        'spec.podGroupTemplates[1].name: Duplicate value: "worker"'
    ]


def test_template_name_is_a_dns_label():
    templates = [make_template("worker.a"), make_template("Worker")]
    assert error_lines(make_workload(podGroupTemplates=templates)) == [
        'spec.podGroupTemplates[0].name: Invalid value: "worker.a": must not contain dots',
        f'spec.podGroupTemplates[1].name: Invalid value: "Worker": {DNS_LABEL}',
    ]


def test_template_name_is_required():
    template = make_template()
    del template["name"]
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        "spec.podGroupTemplates[0].name: Required value"
    ]


def test_exactly_one_of_basic_or_gang():
    neither = make_template("a", schedulingPolicy={})
    both = make_template("b", schedulingPolicy={"basic": {}, "gang": {"minCount": 2}})
    assert error_lines(make_workload(podGroupTemplates=[neither, both])) == [
        'spec.podGroupTemplates[0].schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`',
        'spec.podGroupTemplates[1].schedulingPolicy: Invalid value: "{`basic`, `gang`}": exactly one of '
        "`basic`, `gang` is required, but multiple fields are set",
    ]


@pytest.mark.parametrize("gang", [{}, {"minCount": 0}, {"minCount": None}])
def test_missing_or_zero_min_count_is_required(gang):
    template = make_template(schedulingPolicy={"gang": gang})
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value"
    ]


def test_at_most_one_topology_constraint_with_a_label_key():
    constraints = {"topology": [{"key": "topology.example.com/rack"}, {"key": "bad key"}]}
    template = make_template(schedulingConstraints=constraints)
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        f'spec.podGroupTemplates[0].schedulingConstraints.topology[1].key: Invalid value: "bad key": {LABEL_NAME_PART}',
        "spec.podGroupTemplates[0].schedulingConstraints.topology: Too many: 2: must have at most 1 item",
    ]


def test_topology_key_is_required():
    template = make_template(schedulingConstraints={"topology": [{}]})
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        "spec.podGroupTemplates[0].schedulingConstraints.topology[0].key: Required value"
    ]


def test_at_most_four_resource_claims_with_unique_names():
    claims = [{"name": f"c{i}", "resourceClaimTemplateName": "rack-fabric"} for i in range(4)]
    claims.append({"name": "c0", "resourceClaimName": "shared"})
    template = make_template(resourceClaims=claims)
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        'spec.podGroupTemplates[0].resourceClaims[4].name: Duplicate value: "c0"',
        "spec.podGroupTemplates[0].resourceClaims: Too many: 5: must have at most 4 items",
    ]


def test_exactly_one_of_resource_claim_name_or_template_name():
    claims = [
        {"name": "fabric"},
        {"name": "gpus", "resourceClaimName": "a", "resourceClaimTemplateName": "b"},
    ]
    template = make_template(resourceClaims=claims)
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        'spec.podGroupTemplates[0].resourceClaims[0]: Invalid value: {"name":"fabric"}: must specify one of: '
        "`resourceClaimName`, `resourceClaimTemplateName`",
        'spec.podGroupTemplates[0].resourceClaims[1]: Invalid value: {"name":"gpus","resourceClaimName":"a",'
        '"resourceClaimTemplateName":"b"}: at most one of `resourceClaimName` or `resourceClaimTemplateName` '
        "may be specified",
    ]


def test_resource_claim_name_is_a_dns_label():
    template = make_template(resourceClaims=[{"name": "Fabric", "resourceClaimTemplateName": "rack-fabric"}])
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        f'spec.podGroupTemplates[0].resourceClaims[0].name: Invalid value: "Fabric": {DNS_LABEL}'
    ]


def test_disruption_mode_is_pod_or_pod_group():
    template = make_template(disruptionMode="Node")
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        'spec.podGroupTemplates[0].disruptionMode: Unsupported value: "Node": supported values: "Pod", "PodGroup"'
    ]


def test_priority_is_at_most_one_billion():
    template = make_template(priority=1_000_000_001)
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        "spec.podGroupTemplates[0].priority: Invalid value: 1000000001: must be less than or equal to 1000000000"
    ]


def test_priority_class_name_is_a_dns_subdomain():
    template = make_template(priorityClassName="High_Priority")
    assert error_lines(make_workload(podGroupTemplates=[template])) == [
        f'spec.podGroupTemplates[0].priorityClassName: Invalid value: "High_Priority": {DNS_SUBDOMAIN}'
    ]


def test_controller_ref_needs_kind_and_name():
    assert error_lines(make_workload(controllerRef={"apiGroup": "batch"})) == [
        "spec.controllerRef.kind: Required value",
        "spec.controllerRef.name: Required value",
    ]


def test_controller_ref_names_are_path_segments_and_group_a_subdomain():
    ref = {"apiGroup": "Batch", "kind": "Job", "name": "a/b"}
    assert error_lines(make_workload(controllerRef=ref)) == [
        f'spec.controllerRef.apiGroup: Invalid value: "Batch": {DNS_SUBDOMAIN}',
        "spec.controllerRef.name: Invalid value: \"a/b\": may not contain '/'",
    ]


def test_adding_or_removing_templates_of_a_stored_workload_is_rejected():
    old = make_workload()
    new = make_workload(podGroupTemplates=[make_template("worker"), make_template("driver")])

    assert error_lines(new, old=old) == [
        'spec.podGroupTemplates: Invalid value: [{"disruptionMode":"Pod","name":"worker",'
        '"schedulingPolicy":{"gang":{"minCount":2}}},{"disruptionMode":"Pod","name":"driver",'
        '"schedulingPolicy":{"gang":{"minCount":2}}}]: field is immutable'
    ]


def test_a_templates_min_count_is_mutable_and_its_other_fields_are_not():
    old = make_workload()
    resized = make_workload(
        podGroupTemplates=[make_template("worker", schedulingPolicy={"gang": {"minCount": 8}})]
    )
    assert error_lines(resized, old=old) == []

    changed = make_workload(
        podGroupTemplates=[make_template("worker", schedulingPolicy={"basic": {}}, disruptionMode="PodGroup")]
    )
    assert error_lines(changed, old=old) == [
        'spec.podGroupTemplates[0].schedulingPolicy: Invalid value: {"basic":{}}: field is immutable',
        'spec.podGroupTemplates[0].disruptionMode: Invalid value: "PodGroup": field is immutable',
    ]


def test_changing_the_controller_ref_of_a_stored_workload_is_rejected():
    old = make_workload(controllerRef={"apiGroup": "batch", "kind": "Job", "name": "a"})
    new = make_workload(controllerRef={"apiGroup": "batch", "kind": "Job", "name": "b"})

    assert error_lines(new, old=old) == [
        'spec.controllerRef: Invalid value: {"apiGroup":"batch","kind":"Job","name":"b"}: field is immutable'
    ]


def test_reapplying_an_unchanged_workload_is_accepted():
    assert error_lines(make_workload(), old=make_workload()) == []


def test_labels_and_annotation_keys_are_validated():
    doc = make_workload()
    doc["metadata"]["labels"] = {"app": "bad value!"}
    doc["metadata"]["annotations"] = {"bad key": "x"}
    lines = error_lines(doc)
    assert lines[0].startswith(
        'metadata.labels: Invalid value: "bad value!": a valid label must be an empty string'
    )
    assert lines[1] == f'metadata.annotations: Invalid value: "bad key": {LABEL_NAME_PART}'
