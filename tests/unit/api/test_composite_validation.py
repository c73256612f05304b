"""CompositePodGroups and composite Workload templates are validated as kube-apiserver validates v1alpha3."""

from __future__ import annotations

from typing import Any

from libs.api.manifests import validate_document


def _errors(doc: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    result = validate_document(doc, old=old)
    return [str(error) for error in result.errors]


def _workload(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": spec,
    }


def _level(name: str, depth: int) -> dict[str, Any]:
    """A composite template with `depth` levels of composites below it, a PodGroup template at the bottom."""
    template: dict[str, Any] = {"name": name, "schedulingPolicy": {"gang": {"minGroupCount": 1}}}
    if depth:
        template["compositePodGroupTemplates"] = [_level(f"{name}x", depth - 1)]
    else:
        template["podGroupTemplates"] = [{"name": f"{name}-pods", "schedulingPolicy": {"basic": {}}}]
    return template


def _composite(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": "job-0", "namespace": "ml"},
        "spec": {
            "workloadRef": {"workloadName": "train", "templateName": "job"},
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            **spec,
        },
    }


def test_a_tree_of_four_levels_is_accepted_and_a_fifth_is_refused() -> None:
    assert _errors(_workload({"compositePodGroupTemplates": [_level("a", 2)]})) == []

    errors = _errors(_workload({"compositePodGroupTemplates": [_level("a", 3)]}))

    assert errors == [
        "spec.compositePodGroupTemplates[0].compositePodGroupTemplates[0].compositePodGroupTemplates[0]"
        ".compositePodGroupTemplates: Forbidden: must not nest groups deeper than 4 levels"
    ]


def test_exactly_one_template_list_and_names_unique_in_the_whole_tree() -> None:
    both = _workload(
        {
            "podGroupTemplates": [{"name": "pods", "schedulingPolicy": {"basic": {}}}],
            "compositePodGroupTemplates": [_level("a", 0)],
        }
    )
    clash = _workload({"compositePodGroupTemplates": [_level("a", 0), {**_level("b", 0), "name": "a-pods"}]})
    empty = _workload({"compositePodGroupTemplates": [{"name": "a", "schedulingPolicy": {"basic": {}}}]})

    assert _errors(both) == [
        'spec: Invalid value: "{`podGroupTemplates`, `compositePodGroupTemplates`}": exactly one of '
        "`podGroupTemplates`, `compositePodGroupTemplates` is required, but multiple fields are set"
    ]
    assert _errors(clash) == ['spec.compositePodGroupTemplates[1].name: Duplicate value: "a-pods"']
    assert _errors(empty) == [
        "spec.compositePodGroupTemplates[0].podGroupTemplates: Required value: at least one of "
        "`podGroupTemplates`, `compositePodGroupTemplates` must be set"
    ]


def test_a_composite_pod_group_is_refused_field_by_field_in_the_api_servers_words() -> None:
    doc = _composite(
        schedulingPolicy={"gang": {"minGroupCount": 0}},
        disruptionMode={"single": {}, "all": {}},
        parentCompositePodGroupName="Not_A_Name",
        preemptionPolicy="Sometimes",
    )
    del doc["spec"]["workloadRef"]

    errors = _errors(doc)

    assert errors[0] == "spec.workloadRef: Required value"
    assert errors[1].startswith(
        'spec.parentCompositePodGroupName: Invalid value: "Not_A_Name": a lowercase RFC 1123'
    )
    assert errors[2:] == [
        "spec.schedulingPolicy.gang.minGroupCount: Required value",
        'spec.disruptionMode: Invalid value: "{`single`, `all`}": exactly one of `single`, `all` is required, '
        "but multiple fields are set",
        'spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
    ]


def test_a_composite_pod_groups_spec_is_immutable() -> None:
    old = _composite()
    new = _composite(schedulingPolicy={"gang": {"minGroupCount": 3}})

    assert _errors(new, old=old) == [
        'spec.schedulingPolicy: Invalid value: {"gang":{"minGroupCount":3}}: field is immutable'
    ]
