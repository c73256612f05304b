import itertools
from datetime import UTC, datetime
from pathlib import Path

from libs.api.manifests import load_documents
from libs.core.admission.apply import ApplyContext, admit_batch, admit_submission, prepare_batch
from libs.core.admission.jobs import compress_indexes, job_status
from libs.core.admission.model import AdmissionView, KnownObject

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def ctx() -> ApplyContext:
    counter = itertools.count(1)
    return ApplyContext(now=NOW, new_uid=lambda: f"uid-{next(counter)}", request_id="req-1")


def example(name: str) -> list[dict]:
    return load_documents((EXAMPLES / name).read_text())


def outcomes(decision) -> list[tuple[str | None, str | None, str]]:
    return [(r.kind, r.name, r.outcome) for r in decision.results]


def applied(view: AdmissionView, docs: list[dict]):
    return admit_batch(prepare_batch(docs), view, ctx())


def test_a_gang_workload_with_its_podgroup_and_pods_is_created_with_one_event_each():
    view = AdmissionView()
    decision = applied(view, example("01-priorityclasses.yaml") + example("03-gang-workload.yaml"))
    assert [o[2] for o in outcomes(decision)] == ["created"] * 8
    assert len(decision.writes) == 8
    types = [e.payload.TYPE.value for e in decision.events]
    assert types.count("pod.admitted") == 4
    assert "podgroup.admitted" in types
    assert "workload.admitted" in types


def test_pods_events_are_correlated_with_their_podgroup():
    view = AdmissionView()
    decision = applied(view, example("01-priorityclasses.yaml") + example("03-gang-workload.yaml"))
    group = view.get(("PodGroup", "ml", "llm-train-worker-0"))
    assert group is not None
    pod_events = [e for e in decision.events if e.payload.TYPE.value == "pod.admitted"]
    assert {e.correlation_id for e in pod_events} == {group.uid}


def test_priority_is_resolved_from_a_priority_class_of_the_same_batch():
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml") + example("03-gang-workload.yaml"))
    group = view.get(("PodGroup", "ml", "llm-train-worker-0"))
    assert group.manifest["spec"]["priority"] == 1000


def test_applying_the_same_manifests_again_changes_nothing():
    view = AdmissionView()
    docs = example("01-priorityclasses.yaml") + example("03-gang-workload.yaml")
    applied(view, docs)
    again = applied(view, docs)
    assert {r.outcome for r in again.results} == {"unchanged"}
    assert again.writes == []
    assert again.events == []


def test_a_label_change_is_an_update_with_the_next_resource_version():
    view = AdmissionView()
    docs = example("01-priorityclasses.yaml")
    applied(view, docs)
    docs[0]["metadata"]["labels"] = {"team": "ml"}
    decision = applied(view, docs)
    assert outcomes(decision)[0] == ("PriorityClass", "high-priority", "updated")
    assert decision.writes[0].expected_resource_version == 1


def test_changing_a_podgroup_spec_is_rejected_as_immutable_and_writes_nothing():
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml") + example("03-gang-workload.yaml"))
    docs = [d for d in example("03-gang-workload.yaml") if d["kind"] == "PodGroup"]
    docs[0]["spec"]["disruptionMode"] = "Pod"
    decision = applied(view, docs)
    assert decision.results[0].outcome == "rejected"
    assert 'spec.disruptionMode: Invalid value: "Pod": field is immutable' in decision.results[0].message
    assert decision.writes == []
    assert [e.payload.TYPE.value for e in decision.events] == ["object.rejected"]


def stored_min_count(view: AdmissionView, kind: str, name: str) -> int:
    stored = view.get((kind, "ml", name))
    assert stored is not None
    spec = stored.manifest["spec"]
    policy = spec["podGroupTemplates"][0] if kind == "Workload" else spec
    return int(policy["schedulingPolicy"]["gang"]["minCount"])


def test_a_podgroups_own_min_count_wins_over_its_templates():
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml") + example("03-gang-workload.yaml"))
    docs = [d for d in example("03-gang-workload.yaml") if d["kind"] == "PodGroup"]
    docs[0]["spec"]["schedulingPolicy"]["gang"]["minCount"] = 2

    decision = applied(view, docs)

    assert decision.results[0].outcome == "updated"
    assert stored_min_count(view, "PodGroup", "llm-train-worker-0") == 2
    assert stored_min_count(view, "Workload", "llm-train") == 4


def test_a_resized_podgroup_keeps_its_min_count_when_a_manifest_without_policy_is_applied_again():
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml") + example("03-gang-workload.yaml"))
    (group,) = [d for d in example("03-gang-workload.yaml") if d["kind"] == "PodGroup"]
    group["spec"]["schedulingPolicy"]["gang"]["minCount"] = 2
    applied(view, [group])
    bare = {**group, "spec": {"podGroupTemplateRef": group["spec"]["podGroupTemplateRef"]}}

    again = applied(view, [bare])

    assert again.results[0].outcome == "unchanged"
    assert stored_min_count(view, "PodGroup", "llm-train-worker-0") == 2


def test_a_workload_templates_min_count_changes_without_resizing_its_existing_podgroups():
    view = AdmissionView()
    docs = example("01-priorityclasses.yaml") + example("03-gang-workload.yaml")
    applied(view, docs)
    (workload,) = [d for d in docs if d["kind"] == "Workload"]
    workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 6

    decision = applied(view, [workload])

    assert decision.results[0].outcome == "updated"
    assert stored_min_count(view, "Workload", "llm-train") == 6
    assert stored_min_count(view, "PodGroup", "llm-train-worker-0") == 4


def test_an_invalid_manifest_is_rejected_with_every_error_and_others_in_the_batch_still_land():
    view = AdmissionView()
    docs = example("invalid/bad-workload.yaml") + example("01-priorityclasses.yaml")
    decision = applied(view, docs)
    rejected = decision.results[0]
    assert rejected.outcome == "rejected"
    assert rejected.message.startswith('The Workload "BAD_NAME" is invalid:')
    assert "minCount: Required value" in rejected.message
    assert rejected.status["reason"] == "Invalid"
    assert [r.outcome for r in decision.results[1:]] == ["created", "created"]


def test_a_v135_manifest_is_converted_with_a_warning_and_its_implied_podgroup():
    view = AdmissionView()
    decision = applied(view, example("04-v135-workload.yaml"))
    assert ("PodGroup", "legacy-train-workers", "created") in outcomes(decision)
    assert decision.warnings
    pod = view.get(("Pod", "ml", "legacy-train-0"))
    assert pod.manifest["spec"]["schedulingGroup"] == {"podGroupName": "legacy-train-workers"}


def test_a_gang_job_expands_into_workload_podgroup_and_pods_with_an_expanded_event():
    view = AdmissionView()
    decision = applied(view, example("01-priorityclasses.yaml") + example("05-indexed-job.yaml"))
    kinds = [w.kind for w in decision.writes]
    assert kinds.count("Pod") == 8
    assert kinds.count("Workload") == 1
    assert kinds.count("PodGroup") == 1
    expanded = [e.payload for e in decision.events if e.payload.TYPE.value == "job.expanded"]
    assert expanded[0].gang is True
    assert expanded[0].pod_names[0] == "finetune-worker-0-0"
    assert view.get(("PodGroup", "ml", "finetune-worker-0")).manifest["spec"]["schedulingConstraints"] == {
        "topology": [{"key": "topology.example.com/rack"}]
    }


def test_keys_touched_include_the_workload_of_a_podgroup_and_the_objects_of_a_job():
    keys = prepare_batch(example("03-gang-workload.yaml") + example("05-indexed-job.yaml")).keys
    assert ("Workload", "ml", "llm-train") in keys
    assert ("PodGroup", "ml", "finetune-worker-0") in keys
    assert ("Pod", "ml", "finetune-worker-0-7") in keys


def _with_phase(pod: KnownObject, phase: str) -> KnownObject:
    return KnownObject(
        pod.kind,
        pod.namespace,
        pod.name,
        pod.uid,
        pod.resource_version,
        {**pod.manifest, "status": {"phase": phase}},
    )


def _job_view() -> tuple[AdmissionView, KnownObject, list[KnownObject]]:
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml") + example("05-indexed-job.yaml"))
    job = view.get(("Job", "ml", "finetune"))
    pods = sorted((o for o in view.objects.values() if o.kind == "Pod"), key=lambda p: p.name)
    return view, job, pods


def test_job_status_counts_its_pods_and_completes_with_its_indexes():
    _, job, pods = _job_view()
    status = job_status(job, pods, now="t1")
    assert (status["active"], status["succeeded"], status["failed"]) == (8, 0, 0)
    assert "conditions" not in status
    done = [_with_phase(p, "Succeeded") for p in pods[:5]] + pods[5:]
    partial = job_status(job, done, now="t2")
    assert partial["completedIndexes"] == "0-4"
    finished = job_status(job, [_with_phase(p, "Succeeded") for p in pods], now="t3")
    assert finished["conditions"] == [{"type": "Complete", "status": "True", "lastTransitionTime": "t3"}]
    assert finished["completedIndexes"] == "0-7"


def test_a_job_fails_past_its_backoff_limit_but_preempted_pods_do_not_count():
    _, job, pods = _job_view()
    preempted = [
        KnownObject(
            p.kind,
            p.namespace,
            p.name,
            p.uid,
            p.resource_version,
            {**p.manifest, "status": {"phase": "Failed", "reason": "DisruptionTarget"}},
        )
        for p in pods
    ]
    assert "conditions" not in job_status(job, preempted, now="t")
    failed = [_with_phase(p, "Failed") for p in pods[:3]] + pods[3:]  # backoffLimit is 2
    status = job_status(job, failed, now="t")
    assert status["failed"] == 3
    assert status["conditions"][0]["reason"] == "BackoffLimitExceeded"


def test_completed_indexes_are_compressed_into_ranges():
    assert compress_indexes([8, 0, 1, 2, 5, 7]) == "0-2,5,7-8"
    assert compress_indexes([]) == ""


def test_a_group_commit_joins_decisions_but_a_removal_starts_a_new_run() -> None:
    from libs.core.admission.apply import write_runs
    from libs.core.admission.model import BatchDecision, ObjectRemoval

    first, second, third = BatchDecision(), BatchDecision(), BatchDecision()
    first.writes.append("w1")
    second.writes.append("w2")
    third.removals.append(ObjectRemoval("Pod", "ns", "p-0", uid="u", expected_resource_version=1))
    third.writes.append("w3")

    runs = write_runs([first, second, third])

    assert [run.writes for run in runs] == [["w1", "w2"], ["w3"]]
    assert [len(run.removals) for run in runs] == [0, 1]


def test_a_batch_footprint_reads_its_references_but_writes_only_its_own_objects() -> None:
    from libs.core.admission.apply import prepare_batch

    batch = prepare_batch(
        [
            {
                "apiVersion": "scheduling.k8s.io/v1alpha2",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "ns"},
                "spec": {
                    "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {
                    "schedulingGroup": {"podGroupName": "g"},
                    "containers": [{"name": "c", "image": "i"}],
                },
            },
        ]
    )

    assert batch.writes == {("PodGroup", "ns", "g"), ("Pod", "ns", "p")}
    assert batch.keys == {
        ("PodGroup", "ns", "g"),
        ("Pod", "ns", "p"),
        ("Workload", "ns", "w"),
        ("Namespace", "", "ns"),  # a namespace being deleted takes nothing new
    }


def _job_with_unknown_fields() -> list[dict]:
    (job,) = example("05-indexed-job.yaml")
    job["spec"]["paralelism"] = job["spec"].pop("parallelism")
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requets"] = {"cpu": "1"}
    return [job]


def test_a_strict_apply_refuses_an_object_with_unknown_fields_and_writes_nothing_of_it():
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml"))
    batch = prepare_batch(_job_with_unknown_fields(), field_validation="Strict")

    decision = admit_batch(batch, view, ctx())

    (result,) = decision.results
    assert (result.kind, result.name, result.outcome) == ("Job", "finetune", "rejected")
    assert result.message == (
        'Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field '
        '"spec.paralelism", unknown field "spec.template.spec.containers[0].resources.requets"'
    )
    assert decision.writes == []


def test_a_warned_job_is_admitted_with_its_warnings_and_its_pods_are_not_refused_for_them():
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml"))
    batch = prepare_batch(_job_with_unknown_fields(), field_validation="Warn")

    decision = admit_batch(batch, view, ctx())

    (result,) = decision.results
    assert result.outcome == "created"
    assert result.warnings == [
        'unknown field "spec.paralelism"',
        'unknown field "spec.template.spec.containers[0].resources.requets"',
    ]
    assert {w.kind for w in decision.writes} == {"Job", "Pod"}  # not a gang: parallelism was misspelt


def test_changing_a_stored_pods_requests_is_forbidden_and_writes_nothing():
    view = AdmissionView()
    docs = example("01-priorityclasses.yaml") + example("03-gang-workload.yaml")
    applied(view, docs)
    pod = next(d for d in docs if d["kind"] == "Pod")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "64"

    decision = applied(view, [pod])

    (result,) = decision.results
    assert result.outcome == "rejected"
    assert result.message.splitlines() == [
        f'The Pod "{pod["metadata"]["name"]}" is invalid:',
        "* spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
        "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
        "previously negative)",
    ]
    assert decision.writes == []


def test_a_pods_labels_may_still_change():
    view = AdmissionView()
    docs = example("01-priorityclasses.yaml") + example("03-gang-workload.yaml")
    applied(view, docs)
    pod = next(d for d in docs if d["kind"] == "Pod")
    pod["metadata"]["labels"] = {"team": "ml"}

    decision = applied(view, [pod])

    assert [r.outcome for r in decision.results] == ["updated"]


def test_a_job_submitted_again_as_it_is_stored_is_answered_with_an_unchanged_event():
    view = AdmissionView()
    applied(view, example("01-priorityclasses.yaml"))
    job = example("05-indexed-job.yaml")
    admit_submission(prepare_batch(job), view, ctx())

    again = admit_submission(prepare_batch(job), view, ctx())

    assert outcomes(again) == [("Job", "finetune", "unchanged")]
    assert again.writes == []
    (answer,) = again.events
    assert (answer.payload.TYPE.value, answer.payload.outcome, answer.payload.request_id) == (
        "job.admitted",
        "unchanged",
        "req-1",
    )
