"""Priority resolution from PriorityClasses (the Priority admission plugin's rules)."""

from __future__ import annotations

from libs.api.manifests import parse_object, validate_document
from libs.api.models import PriorityClass
from libs.api.priority import default_priority, lookup_priority, resolve_priority
from tests.unit.api.builders import (
    make_job,
    make_pod,
    make_pod_group,
    make_priority_class,
    make_template,
    make_workload,
)


def classes(*docs: dict) -> dict[str, PriorityClass]:
    parsed = [parse_object(doc) for doc in docs]
    return {pc.name: pc for pc in parsed if isinstance(pc, PriorityClass)}


HIGH = make_priority_class("high-priority", 1000, preemptionPolicy="Never")
DEFAULT = make_priority_class("batch-default", 100, globalDefault=True)


def test_a_named_class_gives_its_value_and_preemption_policy():
    pod, errors = resolve_priority(parse_object(make_pod(priorityClassName="high-priority")), classes(HIGH))
    assert errors == []
    assert (pod.spec.priority, pod.spec.preemption_policy) == (1000, "Never")


def test_without_a_name_the_global_default_applies():
    pod, errors = resolve_priority(parse_object(make_pod()), classes(HIGH, DEFAULT))
    assert errors == []
    assert (pod.spec.priority_class_name, pod.spec.priority) == ("batch-default", 100)


def test_without_a_name_or_a_global_default_priority_is_zero():
    pod, errors = resolve_priority(parse_object(make_pod()), classes(HIGH))
    assert errors == []
    assert (pod.spec.priority_class_name, pod.spec.priority, pod.spec.preemption_policy) == (
        None,
        0,
        "PreemptLowerPriority",
    )


def test_a_missing_class_is_forbidden_in_admission_wording():
    _, errors = resolve_priority(parse_object(make_pod(priorityClassName="x")), classes(HIGH))
    assert [str(error) for error in errors] == [
        "spec.priorityClassName: Forbidden: no PriorityClass with name x was found"
    ]


def test_a_user_priority_that_disagrees_with_the_class_is_forbidden():
    _, errors = resolve_priority(
        parse_object(make_pod(priorityClassName="high-priority", priority=5)), classes(HIGH)
    )
    assert [str(error) for error in errors] == [
        "spec.priority: Forbidden: the integer value of priority (5) must not be provided in pod spec; priority "
        "admission controller computed 1000 from the given PriorityClass name"
    ]


def test_a_user_preemption_policy_that_disagrees_with_the_class_is_forbidden():
    pod = parse_object(make_pod(priorityClassName="high-priority", preemptionPolicy="PreemptLowerPriority"))
    _, errors = resolve_priority(pod, classes(HIGH))
    assert [str(error) for error in errors] == [
        "spec.preemptionPolicy: Forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not "
        "be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"
    ]


def test_an_agreeing_priority_is_accepted():
    _, errors = resolve_priority(
        parse_object(make_pod(priorityClassName="high-priority", priority=1000)), classes(HIGH)
    )
    assert errors == []


def test_system_classes_are_always_known():
    pod, errors = resolve_priority(parse_object(make_pod(priorityClassName="system-node-critical")), {})
    assert errors == []
    assert pod.spec.priority == 2_000_001_000


def test_pod_groups_and_workload_templates_resolve_alike():
    pod_group, errors = resolve_priority(
        parse_object(make_pod_group(priorityClassName="high-priority")), classes(HIGH)
    )
    assert (errors, pod_group.spec.priority) == ([], 1000)
    templates = [
        make_template("a", priorityClassName="high-priority"),
        make_template("b", priorityClassName="nope"),
    ]
    workload, errors = resolve_priority(
        parse_object(make_workload(podGroupTemplates=templates)), classes(HIGH)
    )
    assert workload.spec.pod_group_templates[0].priority == 1000
    assert [str(error) for error in errors] == [
        "spec.podGroupTemplates[1].priorityClassName: Forbidden: no PriorityClass with name nope was found"
    ]


def test_job_templates_resolve():
    job_doc = make_job(
        template_spec={"priorityClassName": "high-priority", "containers": [{"name": "c", "image": "i"}]}
    )
    job, errors = resolve_priority(parse_object(job_doc), classes(HIGH))
    assert (errors, job.spec.template.spec.priority) == ([], 1000)


def test_resolution_leaves_the_input_untouched():
    pod = parse_object(make_pod(priorityClassName="high-priority"))
    resolve_priority(pod, classes(HIGH))
    assert pod.spec.priority is None


def test_validate_document_resolves_priority_when_classes_are_given():
    result = validate_document(make_pod(priorityClassName="x"), priority_classes=classes(HIGH))
    assert result.message == (
        'The Pod "llm-train-worker-0-3" is invalid:\n'
        "* spec.priorityClassName: Forbidden: no PriorityClass with name x was found"
    )
    result = validate_document(make_pod(priorityClassName="high-priority"), priority_classes=classes(HIGH))
    assert result.obj.spec.priority == 1000


def test_lookup_and_default_priority():
    known = classes(HIGH, DEFAULT, make_priority_class("low-default", 10, globalDefault=True))
    assert lookup_priority("missing", known) is None
    assert default_priority(known).class_name == "low-default"
    assert lookup_priority(None, known).value == 10
