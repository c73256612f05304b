"""References resolved at admission: a PodGroup must name a Workload template that exists when it is created
(as upstream); v1.35 pods' implied PodGroup is made from the stored Workload, whichever of the two is applied
first."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime
from pathlib import Path

from libs.api.manifests import load_documents
from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
from libs.core.admission.model import AdmissionView, BatchDecision

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
IMPLIED = ("PodGroup", "ml", "legacy-train-workers")


def example(name: str) -> list[dict]:
    return load_documents((EXAMPLES / name).read_text())


def apply(view: AdmissionView, docs: list[dict]) -> BatchDecision:
    counter = itertools.count(len(view.objects) + 1)
    ctx = ApplyContext(now=NOW, new_uid=lambda: f"uid-{next(counter)}", request_id="req")
    return admit_batch(prepare_batch(docs), view, ctx)


def gang(kind: str) -> list[dict]:
    return [d for d in example("03-gang-workload.yaml") if d["kind"] == kind]


def legacy(kind: str) -> list[dict]:
    return [d for d in example("04-v135-workload.yaml") if d["kind"] == kind]


def event_types(decision: BatchDecision) -> list[str]:
    return [e.payload.TYPE.value for e in decision.events]


def test_a_podgroup_whose_workload_does_not_exist_is_rejected_with_the_field_and_nothing_is_written():
    view = AdmissionView()
    apply(view, example("01-priorityclasses.yaml"))

    decision = apply(view, gang("PodGroup"))

    (result,) = decision.results
    assert result.outcome == "rejected"
    assert result.message == (
        'The PodGroup "llm-train-worker-0" is invalid:\n'
        '* spec.podGroupTemplateRef.workload.workloadName: Not found: "llm-train"'
    )
    assert result.status["details"]["causes"] == [
        {
            "reason": "FieldValueNotFound",
            "message": 'Not found: "llm-train"',
            "field": "spec.podGroupTemplateRef.workload.workloadName",
        }
    ]
    assert decision.writes == []
    assert event_types(decision) == ["object.rejected"]


def test_a_podgroup_whose_workload_is_being_deleted_is_rejected():
    view = AdmissionView()
    apply(view, example("01-priorityclasses.yaml") + gang("Workload"))
    workload = view.get(("Workload", "ml", "llm-train"))
    view.put(dataclasses.replace(workload, deletion_requested=True))

    (result,) = apply(view, gang("PodGroup")).results

    assert result.outcome == "rejected"
    assert 'workloadName: Not found: "llm-train"' in result.message


def test_a_podgroup_naming_a_template_its_workload_lacks_is_rejected_with_every_other_error():
    view = AdmissionView()
    apply(view, example("01-priorityclasses.yaml") + gang("Workload"))
    (group,) = gang("PodGroup")
    group["spec"]["podGroupTemplateRef"]["workload"]["podGroupTemplateName"] = "driver"
    group["spec"]["disruptionMode"] = "Everything"

    (result,) = apply(view, [group]).results

    assert result.outcome == "rejected"
    assert '* spec.podGroupTemplateRef.workload.podGroupTemplateName: Not found: "driver"' in result.message
    assert '* spec.disruptionMode: Unsupported value: "Everything"' in result.message


def test_a_pod_whose_podgroup_does_not_exist_yet_is_accepted_and_waits():
    view = AdmissionView()
    apply(view, example("01-priorityclasses.yaml"))

    decision = apply(view, gang("Pod"))

    assert {r.outcome for r in decision.results} == {"created"}


def test_v135_pods_applied_after_their_workload_get_its_policy_and_are_not_given_a_second_podgroup():
    view = AdmissionView()
    apply(view, legacy("Workload"))

    decision = apply(view, legacy("Pod"))

    assert [r.outcome for r in decision.results] == ["created", "created"]
    assert event_types(decision).count("podgroup.admitted") == 1
    group = view.get(IMPLIED)
    assert group.manifest["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert (
        "created PodGroup ml/legacy-train-workers for pods' spec.workloadRef" in decision.results[0].warnings
    )

    again = apply(view, legacy("Pod"))

    assert {r.outcome for r in again.results} == {"unchanged"}
    assert again.writes == []


def test_v135_pods_applied_before_their_workload_wait_for_it_and_it_brings_their_podgroup():
    view = AdmissionView()

    waiting = apply(view, legacy("Pod"))

    assert [r.outcome for r in waiting.results] == ["created", "created"]
    assert view.get(IMPLIED) is None
    assert waiting.results[0].warnings == [
        "Pod legacy-train-0 waits for Workload ml/legacy-train, which does not exist yet"
    ]
    pod = view.get(("Pod", "ml", "legacy-train-0"))
    assert pod.manifest["spec"]["schedulingGroup"] == {"podGroupName": "legacy-train-workers"}
    assert pod.manifest["metadata"]["annotations"]["podway.io/workload-ref-name"] == "legacy-train"

    arrived = apply(view, legacy("Workload"))

    assert [r.outcome for r in arrived.results] == ["created"]
    assert event_types(arrived) == ["workload.admitted", "podgroup.admitted"]
    assert {w.key for w in arrived.writes} == {("Workload", "ml", "legacy-train"), IMPLIED}
    assert view.get(IMPLIED).manifest["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


def test_a_v135_pods_footprint_reads_its_workload_and_may_write_its_podgroup():
    batch = prepare_batch(legacy("Pod"))

    assert ("Workload", "ml", "legacy-train") in batch.keys
    assert IMPLIED in batch.writes
    assert IMPLIED in prepare_batch(legacy("Workload")).writes
