"""PodGroup (scheduling.k8s.io/v1alpha2): reference, policy, settings, and an immutable spec."""

from __future__ import annotations

from libs.api.manifests import validate_document
from tests.unit.api.builders import error_lines, make_pod_group

DNS_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


def test_a_valid_pod_group_is_admitted_with_disruption_mode_pod():
    result = validate_document(make_pod_group())

    assert result.ok, result.message
    assert result.obj.spec.disruption_mode == "Pod"


def test_template_reference_needs_workload_and_template_names():
    doc = make_pod_group(podGroupTemplateRef={"workload": {}})
    assert error_lines(doc) == [
        "spec.podGroupTemplateRef.workload.workloadName: Required value",
        "spec.podGroupTemplateRef.workload.podGroupTemplateName: Required value",
    ]


def test_template_reference_is_nested_under_workload():
    assert error_lines(make_pod_group(podGroupTemplateRef={})) == [
        "spec.podGroupTemplateRef.workload: Required value"
    ]


def test_template_reference_names_are_validated():
    ref = {"workload": {"workloadName": "Train", "podGroupTemplateName": "a.b"}}
    assert error_lines(make_pod_group(podGroupTemplateRef=ref)) == [
        f'spec.podGroupTemplateRef.workload.workloadName: Invalid value: "Train": {DNS_SUBDOMAIN}',
        'spec.podGroupTemplateRef.workload.podGroupTemplateName: Invalid value: "a.b": must not contain dots',
    ]


def test_a_pod_group_without_a_template_reference_is_fine():
    doc = make_pod_group()
    del doc["spec"]["podGroupTemplateRef"]
    assert error_lines(doc) == []


def test_scheduling_policy_is_required():
    doc = make_pod_group()
    del doc["spec"]["schedulingPolicy"]
    assert error_lines(doc) == [
        'spec.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`'
    ]


def test_gang_min_count_must_be_positive():
    assert error_lines(make_pod_group(schedulingPolicy={"gang": {"minCount": -1}})) == [
        "spec.schedulingPolicy.gang.minCount: Invalid value: -1: must be greater than or equal to 1"
    ]


def test_group_settings_are_validated_at_spec_level():
    doc = make_pod_group(
        schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]},
        resourceClaims=[{"name": "fabric"}],
        disruptionMode="Whole",
        priority=2_000_000_000,
    )
    assert error_lines(doc) == [
        "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item",
        'spec.resourceClaims[0]: Invalid value: {"name":"fabric"}: must specify one of: `resourceClaimName`, '
        "`resourceClaimTemplateName`",
        'spec.disruptionMode: Unsupported value: "Whole": supported values: "Pod", "PodGroup"',
        "spec.priority: Invalid value: 2000000000: must be less than or equal to 1000000000",
    ]


def test_a_gangs_min_count_is_mutable():
    assert error_lines(make_pod_group(schedulingPolicy={"gang": {"minCount": 8}}), old=make_pod_group()) == []


def test_a_gang_may_not_become_a_basic_group_nor_a_basic_group_a_gang():
    basic = make_pod_group(schedulingPolicy={"basic": {}})
    assert error_lines(basic, old=make_pod_group()) == [
        'spec.schedulingPolicy: Invalid value: {"basic":{}}: field is immutable'
    ]
    assert error_lines(make_pod_group(), old=basic) == [
        'spec.schedulingPolicy: Invalid value: {"gang":{"minCount":16}}: field is immutable'
    ]


def test_every_spec_field_but_min_count_is_immutable():
    old = make_pod_group()
    new = make_pod_group(
        schedulingPolicy={"gang": {"minCount": 8}},
        disruptionMode="PodGroup",
        schedulingConstraints={"topology": [{"key": "topology.example.com/rack"}]},
    )
    assert error_lines(new, old=old) == [
        'spec.schedulingConstraints: Invalid value: {"topology":[{"key":"topology.example.com/rack"}]}: '
        "field is immutable",
        'spec.disruptionMode: Invalid value: "PodGroup": field is immutable',
    ]


def test_the_template_reference_is_immutable():
    ref = {"workload": {"workloadName": "other", "podGroupTemplateName": "worker"}}
    assert error_lines(make_pod_group(podGroupTemplateRef=ref), old=make_pod_group()) == [
        'spec.podGroupTemplateRef: Invalid value: {"workload":{"podGroupTemplateName":"worker",'
        '"workloadName":"other"}}: field is immutable'
    ]


def test_status_changes_are_not_spec_changes():
    new = make_pod_group()
    new["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}]}
    assert error_lines(new, old=make_pod_group()) == []
