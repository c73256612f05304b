"""Node and PriorityClass: cluster-scoped kinds."""

from __future__ import annotations

from libs.api.manifests import validate_document
from tests.unit.api.builders import error_lines, make_node, make_priority_class


def test_a_node_with_taints_and_allocatable_is_admitted():
    result = validate_document(make_node(taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]))

    assert result.ok, result.message
    assert result.obj.allocatable_amounts() == {"cpu": 64_000, "memory": 512 * 2**30}


def test_cluster_scoped_kinds_may_not_have_a_namespace():
    doc = make_node()
    doc["metadata"]["namespace"] = "ml"
    assert error_lines(doc) == ["metadata.namespace: Forbidden: not allowed on this type"]


def test_taints_need_a_key_and_a_known_effect_and_are_unique():
    taints = [
        {"effect": "NoSchedule"},
        {"key": "a", "effect": "Sometimes"},
        {"key": "b"},
        {"key": "c", "effect": "NoExecute"},
        {"key": "c", "value": "x", "effect": "NoExecute"},
    ]
    assert error_lines(make_node(taints=taints)) == [
        "spec.taints[0].key: Required value",
        'spec.taints[1].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
        "spec.taints[2].effect: Required value",
        'spec.taints[4].effect: Duplicate value: "NoExecute"',
    ]


def test_node_resources_are_quantities():
    doc = make_node()
    doc["status"] = {"allocatable": {"cpu": "sixty"}}
    assert error_lines(doc)[0].startswith(
        'status.allocatable[cpu]: Invalid value: "sixty": quantities must match'
    )


def test_a_priority_class_is_admitted_with_its_default_preemption_policy():
    result = validate_document(make_priority_class())

    assert result.ok, result.message
    assert result.obj.preemption_policy == "PreemptLowerPriority"
    assert result.obj.global_default is False


def test_user_priority_classes_are_capped_at_one_billion():
    assert error_lines(make_priority_class(value=1_000_000_001)) == [
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
    ]


def test_system_prefix_is_reserved():
    assert error_lines(make_priority_class(name="system-mine", value=5)) == [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
        "error: system-mine is not a known system priority class"
    ]
    assert error_lines(make_priority_class(name="system-node-critical", value=2_000_001_000)) == []


def test_preemption_policy_enum():
    assert error_lines(make_priority_class(preemptionPolicy="Always")) == [
        'preemptionPolicy: Unsupported value: "Always": supported values: "PreemptLowerPriority", "Never"'
    ]


def test_value_and_preemption_policy_may_not_change():
    old = make_priority_class(value=1000)
    new = make_priority_class(value=2000, preemptionPolicy="Never")
    assert error_lines(new, old=old) == [
        "value: Forbidden: may not be changed in an update.",
        'preemptionPolicy: Invalid value: "Never": field is immutable',
    ]
