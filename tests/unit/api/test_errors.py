"""How errors read: the kubectl text and the Kubernetes Status object."""

from __future__ import annotations

from libs.api.errors import (
    ErrorType,
    FieldPath,
    conflict_status,
    duplicate,
    forbidden,
    format_invalid,
    immutable,
    invalid,
    not_found,
    not_supported,
    required,
    to_status,
    too_long,
    too_many,
)

GANG_MIN = FieldPath("spec").child("podGroupTemplates").index(0).child("schedulingPolicy", "gang", "minCount")


def test_field_paths_read_as_the_api_server_prints_them():
    assert str(GANG_MIN) == "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount"
    assert str(FieldPath("metadata").child("annotations").key("podway.io/gang-restart")) == (
        "metadata.annotations[podway.io/gang-restart]"
    )


def test_each_error_type_reads_as_the_api_server_words_it():
    path = FieldPath("spec").child("x")
    assert str(required(path)) == "spec.x: Required value"
    assert (
        str(required(path, "must have at least one item"))
        == "spec.x: Required value: must have at least one item"
    )
    assert str(invalid(path, -3, "must be greater than or equal to 1")) == (
        "spec.x: Invalid value: -3: must be greater than or equal to 1"
    )
    assert str(invalid(path, "a b", "bad")) == 'spec.x: Invalid value: "a b": bad'
    assert str(invalid(path, None, "bad")) == "spec.x: Invalid value: null: bad"
    assert (
        str(invalid(path, {"b": 1, "a": [True]}, "bad")) == 'spec.x: Invalid value: {"a":[true],"b":1}: bad'
    )
    assert str(not_supported(path, "Everything", ["Pod", "PodGroup"])) == (
        'spec.x: Unsupported value: "Everything": supported values: "Pod", "PodGroup"'
    )
    assert str(duplicate(path, "a")) == 'spec.x: Duplicate value: "a"'
    assert str(too_many(path, 9, 8)) == "spec.x: Too many: 9: must have at most 8 items"
    assert str(too_many(path, 2, 1)) == "spec.x: Too many: 2: must have at most 1 item"
    assert str(too_long(path, 10240)) == "spec.x: Too long: may not be more than 10240 bytes"
    assert str(forbidden(path, "not allowed")) == "spec.x: Forbidden: not allowed"
    assert (
        str(not_found(path, "gpus", "must be one of ...")) == 'spec.x: Not found: "gpus": must be one of ...'
    )
    assert str(immutable(path, 3)) == "spec.x: Invalid value: 3: field is immutable"


def test_rejection_text_has_a_header_and_one_line_per_error():
    errors = [required(GANG_MIN), invalid(FieldPath("metadata.name"), "BAD", "bad name")]

    assert format_invalid("Workload", "train-b", errors) == (
        'The Workload "train-b" is invalid:\n'
        "* spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value\n"
        '* metadata.name: Invalid value: "BAD": bad name'
    )


def test_status_object_carries_every_cause_with_its_reason_and_field():
    errors = [required(GANG_MIN), too_many(FieldPath("spec.podGroupTemplates"), 9, 8)]

    status = to_status("Workload", "train-b", errors)

    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": (
            'Workload.scheduling.k8s.io "train-b" is invalid: ['
            "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value, "
            "spec.podGroupTemplates: Too many: 9: must have at most 8 items]"
        ),
        "reason": "Invalid",
        "details": {
            "name": "train-b",
            "group": "scheduling.k8s.io",
            "kind": "Workload",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount",
                },
                {
                    "reason": "FieldValueTooMany",
                    "message": "Too many: 9: must have at most 8 items",
                    "field": "spec.podGroupTemplates",
                },
            ],
        },
        "code": 422,
    }


def test_status_of_a_core_kind_has_no_group_and_a_single_error_is_not_bracketed():
    status = to_status("Pod", "p", [required(FieldPath("spec.containers"))])

    assert "group" not in status["details"]
    assert status["message"] == 'Pod "p" is invalid: spec.containers: Required value'


def test_cause_reasons_are_the_kubernetes_cause_types():
    assert [t.value for t in ErrorType] == [
        "FieldValueRequired",
        "FieldValueInvalid",
        "FieldValueNotSupported",
        "FieldValueDuplicate",
        "FieldValueTooMany",
        "FieldValueTooLong",
        "FieldValueForbidden",
        "FieldValueNotFound",
    ]


def test_a_conflict_names_the_qualified_resource_as_the_api_server_does():
    core = conflict_status("Pod", "p-0", "the object has been modified; please apply your changes")
    grouped = conflict_status(
        "PodGroup", "g", "Precondition failed: UID in precondition: a, UID in object meta: b"
    )

    assert core["message"] == (
        'Operation cannot be fulfilled on pods "p-0": the object has been modified; please apply your changes'
    )
    assert (core["code"], core["reason"], core["details"]) == (
        409,
        "Conflict",
        {"name": "p-0", "kind": "pods"},
    )
    assert grouped["message"].startswith('Operation cannot be fulfilled on podgroups.scheduling.k8s.io "g": ')
    assert grouped["details"]["group"] == "scheduling.k8s.io"
