"""The shortcuts that keep one admission check cheap (no copies of fresh objects, cached quantities, paths
and well-formed names, a planned walk for unknown fields) answer exactly as the plain computations do."""

from __future__ import annotations

import copy
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from libs.api import errors as errors_module
from libs.api import formats
from libs.api.conversion import convert_document, copy_document
from libs.api.defaults import apply_defaults, apply_defaults_in_place
from libs.api.errors import FieldPath
from libs.api.manifests import parse_object, validate_document
from libs.api.models.base import ApiModel, unknown_fields
from libs.api.models.core import Pod
from libs.api.models.meta import ObjectMeta
from libs.api.models.scheduling import PodGroup, PriorityClass
from libs.api.priority import resolve_priority, resolve_priority_in_place
from libs.api.quantity import QuantityError, parse_quantity
from libs.api.validation.core import validate_resource_list
from tests.unit.api.builders import (
    make_claim_template,
    make_container,
    make_job,
    make_node,
    make_pod,
    make_pod_group,
    make_request,
    make_slice,
    make_workload,
)

CLASSES = {"high": PriorityClass(metadata=ObjectMeta(name="high"), value=1000)}


def _every_model_walk(model: ApiModel, path: str = "") -> list[str]:
    """unknown_fields as it was first written: every field of every model, looked into generically."""
    found: list[str] = []
    if model.model_extra:
        found += [
            f"{path}.{key}" if path else key for key in model.model_extra if key not in model.PASSED_THROUGH
        ]
    for name, info in type(model).model_fields.items():
        alias = info.alias or name
        found += _any_walk(getattr(model, name), f"{path}.{alias}" if path else alias)
    return found


def _any_walk(value: Any, path: str) -> list[str]:
    if isinstance(value, ApiModel):
        return _every_model_walk(value, path)
    if isinstance(value, list):
        return [item for i, element in enumerate(value) for item in _any_walk(element, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [item for key, element in value.items() for item in _any_walk(element, f"{path}[{key}]")]
    return []


def _documents_with_unknown_fields() -> list[dict[str, Any]]:
    pod = make_pod(
        tolerations=[{"key": "a", "operator": "Exists", "tolerationSecondz": 3}],
        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t", "sourse": 1}],
        schedulingGroup={"podGroupName": "g", "podGroupNme": "x"},
        volumes=[{"name": "data"}],
        bogus=1,
    )
    pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "contoller": True}]
    pod["spec"]["containers"].append(make_container("side", claims=[{"name": "gpu", "requst": "r"}]))
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "anything": 1}], "hostIP": "x"}
    pod_group = make_pod_group(
        schedulingPolicy={"gang": {"minCount": 2, "maxCount": 4}, "extra": {}},
        schedulingConstraints={"topology": [{"key": "rack", "levle": 1}]},
        resourceClaims=[{"name": "c", "resourceClaimName": "x", "y": 2}],
    )
    pod_group["status"] = {"conditions": [{"type": "PodGroupScheduled", "bogus": True}]}
    workload = make_workload(controllerRef={"kind": "Job", "name": "j", "uid": "u"})
    workload["spec"]["podGroupTemplates"][0]["minCont"] = 3
    job = make_job(template_spec={"containers": [make_container(claims=[{"name": "c", "x": 1}])]})
    job["spec"]["podFailurePolicy"] = {"rules": []}
    template = make_claim_template(requests=[make_request(count=1, allocationModee="All")])
    template["spec"]["spec"]["devices"]["config"] = [{"opaque": {"driver": "d", "parameters": {"a": 1}}}]
    node = make_node(taints=[{"key": "k", "effect": "NoSchedule", "colour": "red"}])
    node["status"]["nodeInfo"] = {"kernel": "6"}
    slice_ = make_slice(devices=[{"name": "gpu-0", "attributes": {"a": {"string": "x", "strng": "y"}}}])
    return [pod, pod_group, workload, job, template, node, slice_]


@pytest.mark.parametrize("doc", _documents_with_unknown_fields(), ids=lambda doc: doc["kind"])
def test_unknown_fields_finds_what_a_walk_of_every_field_finds(doc):
    obj = parse_object(convert_document(doc)[0])
    found = unknown_fields(obj)
    assert found == _every_model_walk(obj)
    assert found  # every document above carries at least one


def test_unknown_fields_are_found_in_model_order_but_not_among_passed_through_upstream_fields():
    obj = parse_object(_documents_with_unknown_fields()[0])
    # spec.volumes and status.hostIP are upstream fields Podway passes through without reading.
    assert unknown_fields(obj) == [
        "metadata.ownerReferences[0].contoller",
        "spec.bogus",
        "spec.schedulingGroup.podGroupNme",
        "spec.tolerations[0].tolerationSecondz",
        "spec.resourceClaims[0].sourse",
        "spec.containers[1].resources.claims[0].requst",
        "status.conditions[0].anything",
    ]


def test_validate_document_neither_changes_its_input_nor_shares_anything_with_it():
    doc = make_pod(volumes=[{"name": "data", "emptyDir": {}}])
    doc["spec"]["containers"][0]["command"] = ["python", "train.py"]
    doc["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "32"}
    original = copy.deepcopy(doc)
    result = validate_document(doc, priority_classes=CLASSES)
    assert result.ok, result.message
    assert doc == original  # defaults and priority went to the admitted object only
    admitted = result.obj.to_wire()
    doc["spec"]["volumes"].append({"name": "more"})
    doc["spec"]["volumes"][0]["emptyDir"]["medium"] = "Memory"
    doc["spec"]["containers"][0]["command"].append("--resume")
    assert result.obj.to_wire() == admitted
    assert admitted["spec"]["schedulerName"] == "default-scheduler"
    assert admitted["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "16"


def test_validate_document_leaves_a_stored_old_object_untouched():
    old = parse_object(make_pod_group())
    before = old.model_dump()
    result = validate_document(make_pod_group(), old=old)
    assert result.ok, result.message
    assert old.model_dump() == before


def test_in_place_defaulting_and_priority_change_the_object_itself():
    pod = parse_object(make_pod(priorityClassName="high"))
    assert isinstance(pod, Pod)
    assert apply_defaults_in_place(pod) is pod
    assert pod.spec.scheduler_name == "default-scheduler"
    assert resolve_priority_in_place(pod, CLASSES) == []
    assert (pod.spec.priority, pod.spec.preemption_policy) == (1000, "PreemptLowerPriority")


def test_the_copying_defaulting_and_priority_still_copy():
    pod_group = parse_object(make_pod_group(priorityClassName="high"))
    assert isinstance(pod_group, PodGroup)
    defaulted = apply_defaults(pod_group)
    resolved, errors = resolve_priority(defaulted, CLASSES)
    assert errors == []
    assert defaulted is not pod_group
    assert resolved is not defaulted
    assert pod_group.spec.disruption_mode is None
    assert defaulted.spec.priority is None
    assert (resolved.spec.disruption_mode, resolved.spec.priority) == ("Pod", 1000)


def test_copy_document_copies_deeply_and_deep_copies_what_is_not_plain_json():
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    ordered = OrderedDict(a=[1])
    doc = {"a": [{"b": {"c": [1, "x", None, True, 2.5]}}], "s": {1, 2}, "t": stamp, "o": ordered}
    copied = copy_document(doc)
    assert copied == doc
    assert copied["a"] is not doc["a"]
    assert copied["a"][0]["b"]["c"] is not doc["a"][0]["b"]["c"]
    assert copied["s"] is not doc["s"]
    assert type(copied["o"]) is OrderedDict
    assert copied["o"]["a"] is not ordered["a"]


def test_convert_document_answers_a_copy_even_with_nothing_to_convert():
    doc = make_pod()
    converted, warnings = convert_document(doc)
    assert (converted, warnings) == (doc, [])
    converted["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    assert doc["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "16"


def test_parse_quantity_results_do_not_mix_values_that_compare_equal():
    assert parse_quantity(1) == parse_quantity(1.0) == parse_quantity("1") == Decimal(1)
    for _ in range(2):  # True == 1, but True is no quantity
        with pytest.raises(QuantityError):
            parse_quantity(True)  # type: ignore[arg-type]
        with pytest.raises(QuantityError):
            parse_quantity("12x")
    assert parse_quantity("64Gi") == Decimal(68719476736)


def test_parse_quantity_of_an_unhashable_value_fails_as_before():
    with pytest.raises(QuantityError):
        parse_quantity([])  # type: ignore[arg-type]


def test_resource_list_verdicts_are_the_same_every_time():
    for _ in range(2):
        errors = validate_resource_list(
            {"cpu": "-1", "nvidia.com/gpu": "1.5", "memory": "lots", "example.com/fpga": "2"},
            FieldPath("spec").child("resources"),
        )
        assert [str(error) for error in errors] == [
            'spec.resources[cpu]: Invalid value: "-1": must be greater than or equal to 0',
            'spec.resources[nvidia.com/gpu]: Invalid value: "1.5": must be an integer',
            'spec.resources[memory]: Invalid value: "lots": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ]


def test_field_paths_are_shared_and_equal_to_freshly_built_ones():
    spec = FieldPath("spec")
    assert spec.child("containers").index(0).child("resources").key("cpu") == FieldPath(
        "spec.containers[0].resources[cpu]"
    )
    assert spec.child("a", "b") == FieldPath("spec.a.b") == spec.child("a").child("b")
    assert spec.child("x") is spec.child("x")
    assert FieldPath().child("metadata") == FieldPath("metadata")
    assert spec.index(3) == FieldPath("spec[3]")
    assert spec.key("3") == FieldPath("spec[3]")


def test_field_paths_of_equal_but_different_indexes_and_keys_read_as_given():
    spec = FieldPath("spec")
    assert str(spec.index(1)) == "spec[1]"
    assert str(spec.index(True)) == "spec[True]"
    assert str(spec.key(1)) == "spec[1]"  # type: ignore[arg-type]
    assert str(spec.key(1.0)) == "spec[1.0]"  # type: ignore[arg-type]


def test_field_path_caches_stay_bounded():
    root = FieldPath("labels")
    for number in range(errors_module._PATH_CACHE_SIZE + 10):
        assert str(root.key(f"key-{number}")) == f"labels[key-{number}]"
    assert len(errors_module._KEYS) <= errors_module._PATH_CACHE_SIZE


def test_format_checks_answer_alike_once_a_value_is_known_to_be_well_formed():
    for _ in range(2):
        assert formats.dns1123_subdomain_errors("a.b") == []
        assert formats.dns1123_label_errors("a.b") == ["must not contain dots"]
        assert formats.label_key_errors("example.com/a") == []
        assert formats.label_value_errors("example.com/a") != []
        assert formats.dns1123_label_errors("Bad") != []
    fresh = formats.dns1123_label_errors("ok")
    fresh.append("changed by a caller")
    assert formats.dns1123_label_errors("ok") == []


def test_well_formed_value_caches_stay_bounded():
    for number in range(formats._VALID_CACHE_SIZE + 10):
        assert formats.dns1123_label_errors(f"name-{number}") == []
    assert len(formats._VALID_DNS1123_LABEL) <= formats._VALID_CACHE_SIZE


@pytest.mark.parametrize("spec", ["x", 3, {"podGroups": "x"}, {"podGroups": 7}])
def test_a_v1alpha1_workload_with_a_malformed_spec_is_rejected_not_crashed(spec):
    doc = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ml"},
        "spec": spec,
    }
    result = validate_document(doc)
    assert not result.ok
    assert "must be" in result.message
