"""Job controller phase 1: gang Jobs become Workload + PodGroup + Pods; other Jobs become plain pods."""

from __future__ import annotations

import pytest

from libs.api.jobs import expand_job, gang_pod_name, is_gang_job, job_uid
from libs.api.manifests import validate_document
from libs.api.models import Job
from libs.api.models.meta import derive_uid
from tests.unit.api.builders import make_container, make_job

GANG_ANNOTATIONS = {
    "podway.io/topology-key": "topology.example.com/block",
    "podway.io/topology-preferred": "topology.example.com/rack",
    "podway.io/max-pending-seconds": "600",
    "podway.io/run-seconds": "30",
}


def admitted_job(**kwargs) -> Job:
    result = validate_document(make_job(**kwargs))
    assert result.ok, result.message
    assert isinstance(result.obj, Job)
    return result.obj


def gang_job() -> Job:
    return admitted_job(
        annotations=GANG_ANNOTATIONS,
        template_spec={
            "priorityClassName": "high-priority",
            "restartPolicy": "Never",
            "containers": [make_container(requests={"cpu": "16"})],
        },
    )


@pytest.mark.parametrize(
    ("changes", "gang"),
    [
        ({}, True),
        ({"completion_mode": "NonIndexed"}, False),
        ({"parallelism": 1, "completions": 1}, False),
        ({"parallelism": 4, "completions": 8}, False),
        (
            {
                "template_spec": {
                    "schedulingGroup": {"podGroupName": "mine"},
                    "containers": [make_container()],
                }
            },
            False,
        ),
    ],
)
def test_gang_jobs_are_indexed_with_parallelism_equal_to_completions_above_one(changes, gang):
    assert is_gang_job(admitted_job(**changes)) is gang


def test_a_gang_job_yields_a_workload_with_one_gang_template():
    workload = expand_job(gang_job()).workload

    assert workload.to_wire()["spec"] == {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "llm-train"},
        "podGroupTemplates": [
            {
                "name": "worker",
                "schedulingPolicy": {"gang": {"minCount": 4}},
                "schedulingConstraints": {"topology": [{"key": "topology.example.com/block"}]},
                "priorityClassName": "high-priority",
            }
        ],
    }
    assert (workload.name, workload.namespace) == ("llm-train", "ml")


def test_a_gang_job_yields_one_pod_group_copying_the_template():
    pod_group = expand_job(gang_job()).podgroup

    assert pod_group.name == "llm-train-worker-0"
    assert pod_group.to_wire()["spec"] == {
        "podGroupTemplateRef": {"workload": {"workloadName": "llm-train", "podGroupTemplateName": "worker"}},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "topology.example.com/block"}]},
        "priorityClassName": "high-priority",
    }


def test_gang_annotations_carry_over_with_gang_restart_always():
    expansion = expand_job(gang_job())
    expected = {
        "podway.io/topology-key": "topology.example.com/block",
        "podway.io/topology-preferred": "topology.example.com/rack",
        "podway.io/max-pending-seconds": "600",
        "podway.io/gang-restart": "Always",
    }
    assert expansion.workload.metadata.annotations == expected
    assert expansion.podgroup.metadata.annotations == expected


def test_the_queue_name_label_of_a_gang_job_carries_over_to_its_workload_and_pod_group():
    job = gang_job()
    job.metadata.labels["kueue.x-k8s.io/queue-name"] = "team-b"
    expansion = expand_job(job)

    assert expansion.workload.metadata.labels == {"kueue.x-k8s.io/queue-name": "team-b"}
    assert expansion.podgroup.metadata.labels == {"kueue.x-k8s.io/queue-name": "team-b"}
    assert expand_job(gang_job()).podgroup.metadata.labels == {}


def test_an_explicit_gang_restart_is_kept():
    job = admitted_job(annotations={"podway.io/gang-restart": "Never"})
    assert expand_job(job).podgroup.metadata.annotations["podway.io/gang-restart"] == "Never"


def test_a_gang_job_yields_parallelism_pods_in_its_pod_group():
    pods = expand_job(gang_job()).pods

    assert [pod.name for pod in pods] == [f"llm-train-worker-0-{i}" for i in range(4)]
    pod = pods[3]
    assert pod.spec.scheduling_group.pod_group_name == "llm-train-worker-0"
    assert pod.spec.priority_class_name == "high-priority"
    assert pod.metadata.annotations == {
        "batch.kubernetes.io/job-completion-index": "3",
        "podway.io/run-seconds": "30",
    }
    assert pod.metadata.labels["app"] == "llm-train"
    assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "llm-train"
    assert pod.metadata.labels["batch.kubernetes.io/job-completion-index"] == "3"
    assert gang_pod_name("llm-train", 3) == pod.name


def test_every_generated_object_is_controller_owned_by_the_job():
    job = gang_job()
    expansion = expand_job(job)
    owners = [
        obj.metadata.controller_ref() for obj in [expansion.workload, expansion.podgroup, *expansion.pods]
    ]

    assert {(o.api_version, o.kind, o.name, o.uid, o.controller) for o in owners} == {
        ("batch/v1", "Job", "llm-train", job_uid(job), True)
    }


def test_a_job_without_uid_gets_a_deterministic_one():
    job = gang_job()
    assert job_uid(job) == derive_uid("Job", "ml", "llm-train") == job_uid(gang_job())
    job.metadata.uid = "1234"
    assert job_uid(job) == "1234"


def test_generated_objects_pass_validation():
    expansion = expand_job(gang_job())
    for obj in [expansion.workload, expansion.podgroup, *expansion.pods]:
        result = validate_document(obj.to_wire())
        assert result.ok, result.message


def test_a_non_gang_job_yields_plain_pods_only():
    expansion = expand_job(admitted_job(completion_mode="NonIndexed", parallelism=3, completions=5))

    assert expansion.workload is None
    assert expansion.podgroup is None
    assert [pod.name for pod in expansion.pods] == ["llm-train-0", "llm-train-1", "llm-train-2"]
    assert all(pod.spec.scheduling_group is None for pod in expansion.pods)
    assert "batch.kubernetes.io/job-completion-index" not in expansion.pods[0].metadata.annotations


def test_a_non_gang_job_starts_at_most_completions_pods():
    assert len(expand_job(admitted_job(parallelism=4, completions=2)).pods) == 2


def test_a_suspended_job_gets_no_pods_yet():
    job = gang_job()
    job.spec.suspend = True
    expansion = expand_job(job)
    assert expansion.podgroup is not None
    assert expansion.pods == []


def test_pods_of_a_job_without_restart_policy_are_not_restarted():
    job = admitted_job(template_spec={"containers": [make_container()]})
    assert expand_job(job).pods[0].spec.restart_policy == "Never"
