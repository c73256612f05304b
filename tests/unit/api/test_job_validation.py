"""batch/v1 Job: counts, completion mode, pod template, and the gang parallelism rule on update."""

from __future__ import annotations

from typing import Any

from libs.api.jobs import validate_job_update
from libs.api.manifests import parse_object, validate_document
from tests.unit.api.builders import error_lines, make_job

GANG_RESIZED_ALONE = (
    "spec.parallelism: Forbidden: may only be changed in tandem with spec.completions for a gang-scheduled "
    "Job (completionMode Indexed, parallelism == completions): the gang is resized by changing both"
)


def test_a_gang_job_is_admitted():
    result = validate_document(make_job())
    assert result.ok, result.message


def test_a_job_gets_default_counts_and_completion_mode():
    job = validate_document(make_job(parallelism=None, completions=None, completion_mode=None)).obj

    assert (job.spec.parallelism, job.spec.completions, job.spec.completion_mode) == (1, 1, "NonIndexed")
    assert job.spec.backoff_limit == 6


def test_counts_are_not_negative_and_completion_mode_is_known():
    doc = make_job(parallelism=-1, completions=-2, completion_mode="Ordered")
    doc["spec"]["backoffLimit"] = -3
    assert error_lines(doc) == [
        "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        "spec.completions: Invalid value: -2: must be greater than or equal to 0",
        "spec.backoffLimit: Invalid value: -3: must be greater than or equal to 0",
        'spec.completionMode: Unsupported value: "Ordered": supported values: "NonIndexed", "Indexed"',
    ]


def test_indexed_jobs_need_completions():
    assert error_lines(make_job(completions=None)) == [
        "spec.completions: Required value: when completion mode is Indexed"
    ]


def test_the_template_is_required_and_validated_as_a_pod_spec():
    doc = make_job()
    del doc["spec"]["template"]
    assert error_lines(doc) == ["spec.template: Required value"]
    doc = make_job(template_spec={"restartPolicy": "Always", "containers": []})
    assert error_lines(doc) == [
        "spec.template.spec.containers: Required value",
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"',
    ]


def test_template_annotations_are_validated():
    doc = make_job(template_metadata={"annotations": {"podway.io/run-seconds": "soon"}})
    assert error_lines(doc) == [
        'spec.template.metadata.annotations[podway.io/run-seconds]: Invalid value: "soon": must be a '
        "non-negative number"
    ]


def test_changing_parallelism_of_a_gang_job_alone_is_rejected():
    assert error_lines(make_job(parallelism=8, completions=4), old=make_job()) == [GANG_RESIZED_ALONE]


def test_a_gang_job_is_resized_by_changing_parallelism_and_completions_together():
    assert error_lines(make_job(parallelism=8, completions=8), old=make_job()) == []
    assert error_lines(make_job(parallelism=2, completions=2), old=make_job()) == []


def test_a_gang_job_may_not_shrink_below_a_gang():
    assert error_lines(make_job(parallelism=1, completions=1), old=make_job()) == [
        "spec.parallelism: Invalid value: 1: must be greater than or equal to 2 for a gang-scheduled Job"
    ]


def test_completions_of_an_indexed_job_change_only_with_parallelism():
    assert error_lines(make_job(parallelism=4, completions=6), old=make_job()) == [
        "spec.completions: Invalid value: 6: can only be modified in tandem with spec.parallelism"
    ]


def test_completions_of_a_nonindexed_job_are_immutable():
    old = make_job(completion_mode="NonIndexed", completions=4)
    new = make_job(completion_mode="NonIndexed", completions=6, parallelism=6)
    assert error_lines(new, old=old) == ["spec.completions: Invalid value: 6: field is immutable"]


def test_changing_parallelism_of_a_plain_job_is_allowed():
    old = make_job(completion_mode="NonIndexed", completions=None)
    new = make_job(completion_mode="NonIndexed", completions=None, parallelism=8)
    assert error_lines(new, old=old) == []


def test_validate_job_update_works_on_parsed_jobs():
    old, new = parse_object(make_job()), parse_object(make_job(parallelism=5, completions=4))
    assert [str(error) for error in validate_job_update(old, new)] == [GANG_RESIZED_ALONE]


def test_completions_completion_mode_and_template_are_immutable():
    old = make_job(completion_mode="NonIndexed", completions=4, parallelism=2)
    new = make_job(
        completion_mode="Indexed", completions=5, parallelism=2, template_metadata={"labels": {"a": "b"}}
    )
    lines = error_lines(new, old=old)
    assert lines[:2] == [
        'spec.completionMode: Invalid value: "Indexed": field is immutable',
        "spec.completions: Invalid value: 5: field is immutable",
    ]
    assert lines[2].startswith('spec.template: Invalid value: {"metadata":{"labels":{"a":"b"}}')
    assert lines[2].endswith(": field is immutable")


def with_policy(rules: list[dict[str, Any]], **template_spec: Any) -> dict[str, Any]:
    doc = make_job()
    doc["spec"]["podFailurePolicy"] = {"rules": rules}
    doc["spec"]["template"]["spec"].update(template_spec)
    return doc


def test_a_pod_failure_policy_is_admitted_and_its_condition_status_defaults_to_true():
    doc = with_policy(
        [
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [42]},
            },
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0, 1]}},
        ]
    )
    result = validate_document(doc)
    assert result.ok, result.message
    policy = result.obj.spec.pod_failure_policy
    assert policy is not None
    assert policy.rules[1].on_pod_conditions[0].status == "True"
    assert policy.rules[0].on_exit_codes is not None
    assert policy.rules[0].on_exit_codes.values == [42]


def test_a_pod_failure_policy_is_checked_in_the_api_servers_words():
    doc = with_policy(
        [
            {"action": "Restart", "onExitCodes": {"operator": "In", "values": [0, 3, 3, 2]}},
            {"action": "FailIndex", "onPodConditions": [{"type": "bad type!", "status": "Maybe"}]},
            {"onExitCodes": {"containerName": "sidecar", "operator": "Within", "values": []}},
            {"action": "Ignore"},
            {
                "action": "Count",
                "onExitCodes": {"operator": "In", "values": [1]},
                "onPodConditions": [{"type": "DisruptionTarget"}],
            },
        ],
        restartPolicy="OnFailure",
    )
    assert error_lines(doc) == [
        'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when '
        "podFailurePolicy is specified",
        'spec.podFailurePolicy.rules[0].action: Unsupported value: "Restart": supported values: "Count", '
        '"FailIndex", "FailJob", "Ignore"',
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In "
        "operator",
        "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
        "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [0,3,3,2]: must be ordered",
        'spec.podFailurePolicy.rules[1].action: Invalid value: "FailIndex": requires the backoffLimitPerIndex '
        "to be set",
        'spec.podFailurePolicy.rules[1].onPodConditions[0].type: Invalid value: "bad type!": name part must '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        'spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: "Maybe": supported '
        'values: "False", "True", "Unknown"',
        'spec.podFailurePolicy.rules[2].action: Required value: valid values: ["Count" "FailIndex" "FailJob" '
        '"Ignore"]',
        'spec.podFailurePolicy.rules[2].onExitCodes.operator: Unsupported value: "Within": supported values: '
        '"In", "NotIn"',
        'spec.podFailurePolicy.rules[2].onExitCodes.containerName: Invalid value: "sidecar": must be one of '
        "the container or initContainer names in the pod template",
        "spec.podFailurePolicy.rules[2].onExitCodes.values: Invalid value: []: at least one value is required",
        "spec.podFailurePolicy.rules[3]: Invalid value: specifying one of OnExitCodes and OnPodConditions is "
        "required",
        "spec.podFailurePolicy.rules[4]: Invalid value: specifying both OnExitCodes and OnPodConditions is not "
        "supported",
    ]
