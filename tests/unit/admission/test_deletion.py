"""Deletion as the API server does it with foreground propagation: pods that hold no node go at once, bound
pods that run are evicted for their node agent to terminate, a PodGroup goes when its pods have, a Job last;
and a name held by an object being deleted cannot be created again until it is gone."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime
from pathlib import Path

from libs.api.manifests import load_documents
from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
from libs.core.admission.delete import (
    decide_delete,
    decide_namespace_delete,
    finish_namespace_deletions,
    finish_pending_deletions,
)
from libs.core.admission.model import AdmissionView, BatchDecision, KnownObject, known_from_mapping

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
JOB = ("Job", "ml", "finetune")
GROUP = ("PodGroup", "ml", "finetune-worker-0")
STAMP = NOW.isoformat()


def example(name: str) -> list[dict]:
    return load_documents((EXAMPLES / name).read_text())


def ctx() -> ApplyContext:
    counter = itertools.count(1)
    return ApplyContext(now=NOW, new_uid=lambda: f"uid-{next(counter)}", request_id="req")


def job_view() -> AdmissionView:
    view = AdmissionView()
    admit_batch(
        prepare_batch(example("01-priorityclasses.yaml") + example("05-indexed-job.yaml")), view, ctx()
    )
    return view


def scope(view: AdmissionView) -> list[KnownObject]:
    return [o for o in view.objects.values() if o.kind in ("Workload", "PodGroup", "Pod")]


def pods(view: AdmissionView) -> list[KnownObject]:
    return sorted((o for o in view.objects.values() if o.kind == "Pod"), key=lambda p: p.name)


def with_phase(obj: KnownObject, phase: str) -> KnownObject:
    return dataclasses.replace(obj, manifest={**obj.manifest, "status": {"phase": phase}})


def marked(obj: KnownObject) -> KnownObject:
    return dataclasses.replace(obj, deletion_requested=True)


def gone(decision: BatchDecision) -> set[tuple[str, str]]:
    return {(r.kind, r.name) for r in decision.removals if not r.mark_only}


def held(decision: BatchDecision) -> set[tuple[str, str]]:
    return {(r.kind, r.name) for r in decision.removals if r.mark_only}


def events(decision: BatchDecision, type_: str) -> list:
    return [e for e in decision.events if e.payload.TYPE.value == type_]


def test_deleting_a_job_whose_pods_hold_no_node_deletes_everything_at_once():
    view = job_view()

    decision = decide_delete(JOB, view, scope(view), {}, "req", now=STAMP)

    assert decision.results[0].outcome == "deleted"
    assert gone(decision) == {(o.kind, o.name) for o in scope(view)} | {("Job", "finetune")}
    assert held(decision) == set()
    assert len(events(decision, "object.deleted")) == 11
    assert events(decision, "pods.evicted") == []


def test_deleting_a_running_job_evicts_its_bound_pods_and_holds_the_podgroup_and_the_job():
    view = job_view()
    running = [with_phase(p, "Running") for p in pods(view)[:6]]
    done = [with_phase(p, "Succeeded") for p in pods(view)[6:]]
    for pod in running + done:
        view.put(pod)
    bound = {p.uid: f"node-{i}" for i, p in enumerate(running + done)}

    decision = decide_delete(JOB, view, scope(view), bound, "req", now=STAMP)

    assert decision.results[0].outcome == "pending"
    assert held(decision) == {("Job", "finetune"), ("PodGroup", "finetune-worker-0")} | {
        ("Pod", p.name) for p in running
    }
    assert gone(decision) == {("Workload", "finetune")} | {("Pod", p.name) for p in done}
    (evicted,) = events(decision, "pods.evicted")
    assert evicted.payload.reason == "Deleted"
    assert evicted.correlation_id == view.get(GROUP).uid
    assert {(ref.name, ref.node) for ref in evicted.payload.pods} == {(p.name, bound[p.uid]) for p in running}
    assert evicted.payload.podgroup.name == "finetune-worker-0"


def test_a_pod_already_being_deleted_is_not_evicted_twice():
    view = job_view()
    pod = marked(with_phase(pods(view)[0], "Running"))
    view.put(pod)

    decision = decide_delete(pod.key, view, scope(view), {pod.uid: "node-a"}, "req", now=STAMP)

    assert decision.results[0].outcome == "pending"
    assert events(decision, "pods.evicted") == []


def test_a_running_pod_deleted_with_a_grace_period_is_given_it_and_shows_it():
    view = job_view()
    pod = with_phase(pods(view)[0], "Running")
    view.put(pod)

    decision = decide_delete(
        pod.key, view, scope(view), {pod.uid: "node-a"}, "req", now=STAMP, grace_seconds=5
    )

    (removal,) = decision.removals
    assert (removal.mark_only, removal.grace_seconds) == (True, 5)
    (evicted,) = events(decision, "pods.evicted")
    assert evicted.payload.grace_seconds == 5
    (updated,) = events(decision, "pod.admitted")
    assert updated.payload.object["metadata"]["deletionGracePeriodSeconds"] == 5


def test_without_a_grace_period_a_running_pod_shows_its_own_or_upstreams_default():
    view = job_view()
    own, default = (with_phase(p, "Running") for p in pods(view)[:2])
    own = dataclasses.replace(
        own, manifest={**own.manifest, "spec": {**own.manifest["spec"], "terminationGracePeriodSeconds": 7}}
    )
    view.put(own)
    view.put(default)
    bound = {own.uid: "node-a", default.uid: "node-a"}

    for pod, grace in ((own, 7), (default, 30)):
        decision = decide_delete(pod.key, view, scope(view), bound, "req", now=STAMP)
        assert [r.grace_seconds for r in decision.removals] == [grace]
        # The node agent is told no grace period: the pod's own applies.
        assert [e.payload.grace_seconds for e in events(decision, "pods.evicted")] == [None]


def test_a_pending_pod_without_a_binding_is_deleted_at_once():
    view = job_view()
    pod = pods(view)[0]

    decision = decide_delete(pod.key, view, scope(view), {}, "req", now=STAMP)

    assert decision.results[0].outcome == "deleted"
    assert gone(decision) == {("Pod", pod.name)}
    (deleted,) = events(decision, "object.deleted")
    assert deleted.correlation_id == view.get(GROUP).uid


def test_deleting_a_podgroup_waits_while_its_placed_pods_have_not_finished():
    view = job_view()
    bound = {pod.uid: "node-a" for pod in pods(view)}

    decision = decide_delete(GROUP, view, scope(view), bound, "req", now=STAMP)

    assert decision.results[0].outcome == "pending"
    assert held(decision) == {("PodGroup", "finetune-worker-0")}
    (marked,) = decision.events  # the scheduler learns it is being deleted: it places nothing more of it
    assert marked.payload.object["metadata"]["deletionTimestamp"]


def test_deleting_a_podgroup_none_of_whose_pods_is_placed_deletes_it_at_once():
    view = job_view()

    decision = decide_delete(GROUP, view, scope(view), {}, "req", now=STAMP)

    assert decision.results[0].outcome == "deleted"
    assert gone(decision) == {("PodGroup", "finetune-worker-0")}


def test_marked_podgroups_and_jobs_go_once_nothing_holds_them():
    view = job_view()
    job, group = marked(view.get(JOB)), marked(view.get(GROUP))
    others = [o for o in scope(view) if o.kind != "Pod" and o.key != GROUP]
    every_pod = pods(view)

    bound = {pod.uid: "node-a" for pod in every_pod}
    waiting = finish_pending_deletions([group, job], [group, *others, *every_pod], bound, "r")
    assert waiting.removals == []

    finished = [with_phase(p, "Succeeded") for p in every_pod[:4]]
    group_only = finish_pending_deletions([group, job], [group, *finished], bound, "r")
    assert gone(group_only) == {("PodGroup", "finetune-worker-0")}, "the Job still owns its finished pods"

    nothing_left = finish_pending_deletions([group, job], [group], {}, "r")
    assert gone(nothing_left) == {("PodGroup", "finetune-worker-0"), ("Job", "finetune")}
    assert [r.outcome for r in nothing_left.results] == ["deleted", "deleted"]


def test_deleting_something_missing_answers_not_found():
    decision = decide_delete(("Pod", "ml", "ghost"), AdmissionView(), [], {}, "req", now=STAMP)
    assert decision.results[0].outcome == "not_found"
    assert decision.results[0].message == 'pods "ghost" not found'


def test_a_job_whose_name_is_held_by_one_being_deleted_is_refused_alone_and_the_rest_of_the_file_lands():
    view = job_view()
    view.put(marked(view.get(JOB)))
    docs = example("05-indexed-job.yaml") + example("03-gang-workload.yaml")

    decision = admit_batch(prepare_batch(docs), view, ctx())

    job, *others = decision.results
    assert (job.kind, job.outcome) == ("Job", "rejected")
    assert job.message == 'object is being deleted: jobs "finetune" already exists'
    status = job.status
    assert (status["reason"], status["code"], status["details"]["kind"]) == ("AlreadyExists", 409, "jobs")
    assert len(others) == len(docs) - 1
    assert {r.outcome for r in others} == {"created"}
    assert ("Job", "ml", "finetune") not in {w.key for w in decision.writes}
    refused = [e for e in decision.events if e.payload.TYPE.value == "object.rejected"]
    assert [e.payload.name for e in refused] == ["finetune"]


def test_a_new_job_is_refused_while_a_pod_it_would_create_is_still_being_deleted():
    view = job_view()
    leftover = marked(with_phase(pods(view)[3], "Running"))
    for key in [o.key for o in view.objects.values() if o.kind != "PriorityClass"]:
        view.drop(key)
    view.put(leftover)

    decision = admit_batch(prepare_batch(example("05-indexed-job.yaml")), view, ctx())

    assert decision.results[0].outcome == "rejected"
    assert decision.results[0].message == 'object is being deleted: pods "finetune-worker-0-3" already exists'
    assert decision.writes == []


def legacy_view() -> AdmissionView:
    view = AdmissionView()
    admit_batch(
        prepare_batch(example("01-priorityclasses.yaml") + example("04-v135-workload.yaml")), view, ctx()
    )
    return view


LEGACY_WORKLOAD = ("Workload", "ml", "legacy-train")
LEGACY_GROUP = ("PodGroup", "ml", "legacy-train-workers")


def test_a_v135_workload_takes_the_podgroup_made_for_its_pods_with_it():
    view = legacy_view()
    assert view.get(LEGACY_GROUP) is not None
    for pod in pods(view):
        view.put(with_phase(pod, "Succeeded"))

    decision = decide_delete(LEGACY_WORKLOAD, view, scope(view), {}, "req", now=STAMP)

    assert gone(decision) == {("Workload", "legacy-train"), ("PodGroup", "legacy-train-workers")}


def test_the_podgroup_made_for_v135_pods_waits_for_its_running_pods_when_the_workload_goes():
    view = legacy_view()
    for pod in pods(view):
        view.put(with_phase(pod, "Running"))
    bound = {pod.uid: "node-a" for pod in pods(view)}

    decision = decide_delete(LEGACY_WORKLOAD, view, scope(view), bound, "req", now=STAMP)

    assert gone(decision) == {("Workload", "legacy-train")}
    assert held(decision) == {("PodGroup", "legacy-train-workers")}


def test_a_workload_leaves_podgroups_its_user_created_alone():
    view = AdmissionView()
    admit_batch(
        prepare_batch(example("01-priorityclasses.yaml") + example("03-gang-workload.yaml")), view, ctx()
    )
    workload = next(o for o in view.objects.values() if o.kind == "Workload")
    assert any(o.kind == "PodGroup" for o in view.objects.values())

    decision = decide_delete(workload.key, view, scope(view), {}, "req", now=STAMP)

    assert gone(decision) == {("Workload", workload.name)}


def test_a_resource_claim_pods_reserve_is_only_marked_until_none_does():
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "ml", "uid": "claim-uid", "resourceVersion": "3"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
        "status": {"reservedFor": [{"resource": "pods", "name": "pair-a", "uid": "pod-uid"}]},
    }
    view = AdmissionView()
    view.put(known_from_mapping("ResourceClaim", "ml", "shared-gpu", claim))
    key = ("ResourceClaim", "ml", "shared-gpu")

    reserved = decide_delete(key, view, [], {}, "req", now=STAMP)
    view.put(known_from_mapping("ResourceClaim", "ml", "shared-gpu", {**claim, "status": {}}))
    released = decide_delete(key, view, [], {}, "req", now=STAMP)

    assert reserved.results[0].outcome == "pending"
    assert held(reserved) == {("ResourceClaim", "shared-gpu")}
    assert gone(released) == {("ResourceClaim", "shared-gpu")}


def running_job_view() -> tuple[AdmissionView, list[KnownObject], dict[str, str]]:
    view = job_view()
    running = [with_phase(p, "Running") for p in pods(view)]
    for pod in running:
        view.put(pod)
    return view, running, {p.uid: f"node-{i}" for i, p in enumerate(running)}


def test_background_propagation_deletes_the_job_at_once_and_its_running_pods_as_a_foreground_one_does():
    view, running, bound = running_job_view()

    decision = decide_delete(JOB, view, scope(view), bound, "req", now=STAMP, propagation="Background")

    assert decision.results[0].outcome == "deleted"
    assert ("Job", "finetune") in gone(decision)
    assert held(decision) == {("PodGroup", "finetune-worker-0")} | {("Pod", p.name) for p in running}
    (evicted,) = events(decision, "pods.evicted")
    assert {ref.name for ref in evicted.payload.pods} == {p.name for p in running}


def test_orphan_propagation_deletes_the_job_alone_and_leaves_what_it_owned_running_without_its_reference():
    view, running, bound = running_job_view()
    job_uid = view.get(JOB).uid

    decision = decide_delete(JOB, view, scope(view), bound, "req", now=STAMP, propagation="Orphan")

    assert decision.results[0].outcome == "deleted"
    assert gone(decision) == {("Job", "finetune")}
    assert held(decision) == set()
    assert events(decision, "pods.evicted") == []
    orphaned = {(w.kind, w.name): w for w in decision.writes}
    assert set(orphaned) == {("Workload", "finetune"), ("PodGroup", "finetune-worker-0")} | {
        ("Pod", p.name) for p in running
    }
    for write in orphaned.values():
        refs = write.metadata.get("ownerReferences") or []
        assert all(ref.get("uid") != job_uid for ref in refs)
        assert write.expected_resource_version == view.get((write.kind, "ml", write.name)).resource_version
    pod_write = orphaned[("Pod", running[0].name)]
    assert pod_write.spec == running[0].manifest["spec"]
    assert pod_write.status == {"phase": "Running"}
    updated = [e.payload for e in decision.events if getattr(e.payload, "outcome", None) == "updated"]
    assert sorted((p.kind, p.name) for p in updated) == sorted(orphaned)
    assert all("ownerReferences" not in p.object["metadata"] for p in updated if p.kind == "Pod")


def test_foreground_propagation_is_the_default():
    view, _, bound = running_job_view()

    default = decide_delete(JOB, view, scope(view), bound, "req", now=STAMP)
    foreground = decide_delete(JOB, view, scope(view), bound, "req", now=STAMP, propagation="Foreground")

    assert default.results == foreground.results
    assert held(default) == held(foreground)
    assert ("Job", "finetune") in held(foreground)


def namespace_contents(view: AdmissionView, namespace: str) -> list[KnownObject]:
    return [o for o in view.objects.values() if o.namespace == namespace and o.kind != "PriorityClass"]


def test_deleting_a_namespace_deletes_everything_in_it_once_and_marks_what_still_runs():
    view = AdmissionView()
    admit_batch(
        prepare_batch(
            example("01-priorityclasses.yaml")
            + example("05-indexed-job.yaml")
            + example("03-gang-workload.yaml")
            + example("04-v135-workload.yaml")
            + example("02-dra.yaml")
        ),
        view,
        ctx(),
    )
    job_pods = pods(view)
    running = [with_phase(p, "Running") for p in job_pods if p.name.startswith("finetune")][:2]
    # A v1.35 gang's PodGroup is reached twice: as a PodGroup, and as the one made for its Workload's pods.
    running += [with_phase(p, "Running") for p in job_pods if p.name.startswith("legacy-train")]
    for pod in running:
        view.put(pod)
    bound = {p.uid: "node-0" for p in running}
    contents = namespace_contents(view, "ml")
    stored = known_from_mapping("Namespace", "", "ml", {"metadata": {"name": "ml", "uid": "ns-uid"}})

    decision = decide_namespace_delete("ml", stored, contents, bound, "req", now=STAMP)

    first, *each = decision.results
    assert (first.kind, first.outcome) == ("Namespace", "pending")  # Terminating while its pods stop
    removed = [r.uid for r in decision.removals]
    assert len(removed) == len(set(removed))  # each object once, though the Job took some with it
    assert {r.uid for r in decision.removals} == {o.uid for o in contents} | {"ns-uid"}
    assert held(decision) == {("Pod", p.name) for p in running} | {
        ("PodGroup", "finetune-worker-0"),
        ("PodGroup", "legacy-train-workers"),
        ("Job", "finetune"),
        ("Namespace", "ml"),
    }
    named = [(r.kind, r.name) for r in each]
    assert ("Job", "finetune") in named
    assert len(named) == len(set(named))
    evicted = [ref.name for event in events(decision, "pods.evicted") for ref in event.payload.pods]
    assert sorted(evicted) == sorted(p.name for p in running)
    marked_events = [
        e for e in events(decision, "object.admitted") if e.subject and e.subject.kind == "PodGroup"
    ]
    assert len(marked_events) == len({e.subject.uid for e in marked_events})  # each marked once


def test_a_namespace_only_its_objects_made_goes_with_them_and_an_empty_unknown_one_is_not_found():
    view = job_view()
    contents = namespace_contents(view, "ml")

    implicit = decide_namespace_delete("ml", None, contents, {}, "req", now=STAMP)
    nowhere = decide_namespace_delete("nowhere", None, [], {}, "req", now=STAMP)

    assert implicit.results[0].outcome == "deleted"
    assert gone(implicit) == {(o.kind, o.name) for o in contents}
    assert [r.outcome for r in nowhere.results] == ["not_found"]
    assert nowhere.removals == []


def test_a_namespace_marked_for_deletion_goes_once_nothing_is_left_in_it():
    emptied, holding = (
        marked(known_from_mapping("Namespace", "", name, {"metadata": {"name": name, "uid": f"ns-{name}"}}))
        for name in ("emptied", "holding")
    )

    decision = finish_namespace_deletions([emptied, holding], {"holding"}, "req")

    assert gone(decision) == {("Namespace", "emptied")}
    assert [(r.name, r.outcome) for r in decision.results] == [("emptied", "deleted")]


def test_nothing_new_is_created_in_a_namespace_being_deleted_and_what_is_there_may_change():
    view = job_view()
    view.put(marked(known_from_mapping("Namespace", "", "ml", {"metadata": {"name": "ml", "uid": "ns-ml"}})))
    (existing,) = [p for p in pods(view)][:1]
    changed = {**existing.manifest, "metadata": {**existing.manifest["metadata"], "labels": {"seen": "yes"}}}
    new_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "late", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }

    decision = admit_batch(prepare_batch([new_pod, changed]), view, ctx())

    refused, updated = decision.results
    assert (refused.outcome, refused.status["reason"], refused.status["code"]) == (
        "rejected",
        "Forbidden",
        403,
    )
    assert refused.message == (
        'pods "late" is forbidden: unable to create new content in namespace ml because it is being terminated'
    )
    assert refused.status["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    assert updated.outcome == "updated"
