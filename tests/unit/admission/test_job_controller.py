"""The Job controller's sync: waves, suspension, gang replacement, refused creates, and a live status."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from libs.api.manifests import load_documents
from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
from libs.core.admission.delete import owned_by
from libs.core.admission.job_controller import JobSync, sync_job
from libs.core.admission.model import AdmissionView, KnownObject

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 3, 8, 5, tzinfo=UTC)
_uids = itertools.count(1)


def ctx(now: datetime = NOW) -> ApplyContext:
    return ApplyContext(now=now, new_uid=lambda: f"uid-{next(_uids)}", request_id="sync-1")


def priority_classes() -> list[dict[str, Any]]:
    return load_documents((EXAMPLES / "01-priorityclasses.yaml").read_text())


def gang_job(**spec: Any) -> dict[str, Any]:
    (job,) = load_documents((EXAMPLES / "05-indexed-job.yaml").read_text())
    job["spec"].update(spec)
    return job


def plain_job(name: str = "sweep", **spec: Any) -> dict[str, Any]:
    job = gang_job()
    job["metadata"] = {"name": name, "namespace": "ml"}
    job["spec"] = {**copy.deepcopy(job["spec"]), "completionMode": "NonIndexed", "backoffLimit": 6, **spec}
    return job


def admitted(docs: list[dict[str, Any]], view: AdmissionView | None = None) -> AdmissionView:
    view = view if view is not None else AdmissionView()
    decision = admit_batch(prepare_batch(docs), view, ctx())
    assert all(r.outcome != "rejected" for r in decision.results), [r.message for r in decision.results]
    return view


def job_of(view: AdmissionView, name: str) -> KnownObject:
    job = view.get(("Job", "ml", name))
    assert job is not None
    return job


def owned(view: AdmissionView, job: KnownObject) -> list[KnownObject]:
    return sorted(owned_by(job, view.objects.values()), key=lambda o: (o.kind, o.name))


def pods(view: AdmissionView, job: KnownObject) -> list[KnownObject]:
    return [o for o in owned(view, job) if o.kind == "Pod"]


def with_status(view: AdmissionView, obj: KnownObject, **status: Any) -> KnownObject:
    changed = dataclasses.replace(obj, manifest={**obj.manifest, "status": status})
    view.put(changed)
    return changed


def sync(view: AdmissionView, name: str, bound: dict[str, str] | None = None, now: datetime = NOW) -> JobSync:
    job = job_of(view, name)
    result = sync_job(job, owned(view, job), bound or {}, view, ctx(now))
    view.put(dataclasses.replace(job, manifest={**job.manifest, "status": result.status}))
    return result


def test_a_nonindexed_job_creates_its_next_wave_as_pods_succeed_up_to_its_completions():
    view = admitted([*priority_classes(), plain_job(parallelism=2, completions=5)])
    job = job_of(view, "sweep")
    assert [p.name for p in pods(view, job)] == ["sweep-0", "sweep-1"]
    for pod in pods(view, job):
        with_status(view, pod, phase="Succeeded")

    second = sync(view, "sweep")

    assert sorted(w.name for w in second.decision.writes) == ["sweep-2", "sweep-3"]
    assert (second.status["active"], second.status["succeeded"]) == (2, 2)
    for pod in pods(view, job)[2:]:
        with_status(view, pod, phase="Succeeded")
    third = sync(view, "sweep")
    assert [w.name for w in third.decision.writes] == ["sweep-4"]  # one completion left
    with_status(view, pods(view, job)[-1], phase="Succeeded")
    done = sync(view, "sweep")
    assert done.decision.writes == []
    assert [c["type"] for c in done.status["conditions"]] == ["Complete"]


def test_a_failed_nonindexed_pod_is_replaced_and_counted():
    view = admitted([*priority_classes(), plain_job(parallelism=2, completions=2)])
    first = pods(view, job_of(view, "sweep"))[0]
    with_status(view, first, phase="Failed", reason="Error")

    result = sync(view, "sweep")

    assert [w.name for w in result.decision.writes] == ["sweep-2"]
    assert (result.status["active"], result.status["failed"]) == (2, 1)


def test_a_job_created_suspended_starts_its_pods_when_resumed():
    view = admitted([*priority_classes(), plain_job(parallelism=2, completions=2, suspend=True)])
    assert pods(view, job_of(view, "sweep")) == []
    assert sync(view, "sweep").status["conditions"][0]["reason"] == "JobSuspended"

    admitted([plain_job(parallelism=2, completions=2, suspend=False)], view)
    resumed = sync(view, "sweep", now=LATER)

    assert sorted(w.name for w in resumed.decision.writes) == ["sweep-0", "sweep-1"]
    (condition,) = resumed.status["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "JobResumed")
    assert resumed.status["startTime"] == "2026-12-03T08:05:00Z"


def test_suspending_a_running_job_stops_its_pods_running_ones_on_their_nodes():
    view = admitted([*priority_classes(), plain_job(parallelism=2, completions=2)])
    running, waiting = pods(view, job_of(view, "sweep"))
    with_status(view, running, phase="Running")
    admitted([plain_job(parallelism=2, completions=2, suspend=True)], view)

    result = sync(view, "sweep", bound={running.uid: "node-1"})

    removals = {(r.name, r.mark_only) for r in result.decision.removals}
    assert removals == {(running.name, True), (waiting.name, False)}
    evicted = [e.payload for e in result.decision.events if e.payload.TYPE.value == "pods.evicted"]
    assert [[p.uid for p in e.pods] for e in evicted] == [[running.uid]]
    assert result.status["conditions"][0]["type"] == "Suspended"
    assert "startTime" not in result.status


def test_a_preempted_gang_holds_its_room_until_its_pods_stopped():
    view = admitted([*priority_classes(), gang_job()])
    job = job_of(view, "finetune")
    for pod in pods(view, job):
        with_status(view, pod, phase="Running")
    victims = pods(view, job)
    for pod in victims[:5]:
        with_status(view, pod, phase="Failed", reason="DisruptionTarget")

    assert sync(view, "finetune").decision.removals == []  # three still run on their nodes


def test_a_stopped_gang_is_replaced_by_a_new_podgroup_for_the_indexes_left():
    view = admitted([*priority_classes(), gang_job()])
    job = job_of(view, "finetune")
    (group,) = [o for o in owned(view, job) if o.kind == "PodGroup"]
    old = pods(view, job)
    for pod in old[:3]:
        with_status(view, pod, phase="Succeeded")
    for pod in old[3:]:
        with_status(view, pod, phase="Failed", reason="DisruptionTarget")

    result = sync(view, "finetune")

    replaced = {(r.kind, r.name) for r in result.decision.removals}
    assert replaced == {("PodGroup", group.name)} | {("Pod", p.name) for p in old[3:]}
    (new_group,) = [w for w in result.decision.writes if w.kind == "PodGroup"]
    assert new_group.uid != group.uid
    assert new_group.spec["schedulingPolicy"] == {"gang": {"minCount": 5}}
    assert "status" not in (view.get(new_group.key).manifest)
    new_pods = [w for w in result.decision.writes if w.kind == "Pod"]
    assert sorted(w.name for w in new_pods) == sorted(p.name for p in old[3:])
    assert {w.uid for w in new_pods}.isdisjoint({p.uid for p in old})
    assert result.status["completedIndexes"] == "0-2"
    assert (result.status["active"], result.status["succeeded"], result.status["failed"]) == (5, 3, 0)


def test_failures_of_replaced_pods_still_count_against_the_backoff_limit():
    view = admitted([*priority_classes(), gang_job()])
    job = job_of(view, "finetune")
    for pod in pods(view, job)[:2]:
        with_status(view, pod, phase="Failed", reason="Error")
    for pod in pods(view, job)[2:]:
        with_status(view, pod, phase="Failed", reason="DisruptionTarget")
    first = sync(view, "finetune")
    assert first.status["failed"] == 2
    assert "conditions" not in first.status
    with_status(view, pods(view, job)[0], phase="Failed", reason="Error")  # backoffLimit is 2

    running = pods(view, job)[1]
    with_status(view, running, phase="Running")

    second = sync(view, "finetune", bound={running.uid: "node-1"})

    assert second.status["failed"] == 3
    assert second.status["conditions"][0]["reason"] == "BackoffLimitExceeded"
    assert second.decision.writes == []
    stopped = [(r.name, r.mark_only) for r in second.decision.removals]
    assert (running.name, True) in stopped, "a failed Job stops what still runs of it"


def test_a_gang_admission_refuses_says_failed_create_and_is_created_once_the_cause_is_gone():
    view = admitted([*priority_classes(), gang_job()])
    job = job_of(view, "finetune")
    for pod in pods(view, job):
        with_status(view, pod, phase="Failed", reason="DisruptionTarget")
    del view.priority_classes["batch"]
    view.drop(("PriorityClass", "", "batch"))

    refused = sync(view, "finetune")

    assert (refused.decision.writes, refused.decision.removals) == ([], [])
    (condition,) = refused.status["conditions"]
    assert (condition["type"], condition["reason"]) == ("ReplicaFailure", "FailedCreate")
    assert "batch" in condition["message"]
    assert len(pods(view, job)) == 8  # the stopped gang is left as it was

    admitted(priority_classes(), view)
    retried = sync(view, "finetune", now=LATER)

    assert len([w for w in retried.decision.writes if w.kind == "Pod"]) == 8
    assert "conditions" not in retried.status


def test_a_running_job_status_counts_active_ready_succeeded_failed_and_its_start():
    view = admitted([*priority_classes(), plain_job(parallelism=3, completions=6, completionMode="Indexed")])
    job = job_of(view, "sweep")
    first, second, third = pods(view, job)
    with_status(view, first, phase="Running")
    with_status(view, second, phase="Succeeded")
    with_status(view, third, phase="Failed", reason="Error")

    status = sync(view, "sweep").status

    assert {k: status[k] for k in ("active", "ready", "succeeded", "failed", "startTime")} == {
        "active": 3,  # index 0 runs; indexes 2 (again) and 3 were started
        "ready": 1,
        "succeeded": 1,
        "failed": 1,
        "startTime": "2026-12-03T08:00:00Z",
    }
    assert status["completedIndexes"] == "1"


def running_gang(view: AdmissionView) -> dict[str, str]:
    """Every pod of the finetune gang Running on a node of its own; returns where each is bound."""
    job = job_of(view, "finetune")
    for pod in pods(view, job):
        with_status(view, pod, phase="Running")
    return {pod.uid: f"node-{pod.name.rsplit('-', 1)[1]}" for pod in pods(view, job)}


def stored_min_count(view: AdmissionView) -> int:
    group = view.get(("PodGroup", "ml", "finetune-worker-0"))
    assert group is not None
    return int(group.manifest["spec"]["schedulingPolicy"]["gang"]["minCount"])


def test_scaling_up_a_running_gang_job_adds_the_new_indexes_to_its_podgroup_and_keeps_min_count():
    view = admitted([*priority_classes(), gang_job()])
    bound = running_gang(view)
    group_uid = view.get(("PodGroup", "ml", "finetune-worker-0")).uid
    admitted([gang_job(parallelism=10, completions=10)], view)

    result = sync(view, "finetune", bound=bound)

    assert result.decision.removals == []
    added = [w for w in result.decision.writes if w.kind == "Pod"]
    assert sorted(w.name for w in added) == ["finetune-worker-0-8", "finetune-worker-0-9"]
    assert {w.metadata["annotations"]["batch.kubernetes.io/job-completion-index"] for w in added} == {
        "8",
        "9",
    }
    assert {w.spec["schedulingGroup"]["podGroupName"] for w in added} == {"finetune-worker-0"}
    assert view.get(("PodGroup", "ml", "finetune-worker-0")).uid == group_uid  # resized, not replaced
    assert stored_min_count(view) == 8  # the floor stays; the two new pods are its elastic part
    assert result.status["active"] == 10


def test_scaling_down_a_running_gang_job_stops_the_highest_indexes_and_clamps_min_count():
    view = admitted([*priority_classes(), gang_job()])
    bound = running_gang(view)
    admitted([gang_job(parallelism=5, completions=5)], view)

    result = sync(view, "finetune", bound=bound)

    stopped = [(r.name, r.mark_only) for r in result.decision.removals]
    assert stopped == [(f"finetune-worker-0-{i}", True) for i in (7, 6, 5)]
    evicted = [e.payload for e in result.decision.events if e.payload.TYPE.value == "pods.evicted"]
    assert sorted(p.name for e in evicted for p in e.pods) == [f"finetune-worker-0-{i}" for i in (5, 6, 7)]
    assert [w.kind for w in result.decision.writes] == ["PodGroup"]
    assert stored_min_count(view) == 5
    assert "conditions" not in result.status


def test_a_scaled_down_gang_is_not_resized_again_while_its_stopped_pods_drain():
    view = admitted([*priority_classes(), gang_job()])
    bound = running_gang(view)
    admitted([gang_job(parallelism=5, completions=5)], view)
    first = sync(view, "finetune", bound=bound)
    for removal in first.decision.removals:
        view.put(dataclasses.replace(view.get(("Pod", "ml", removal.name)), deletion_requested=True))

    again = sync(view, "finetune", bound=bound)

    assert (again.decision.writes, again.decision.removals) == ([], [])


def test_scaling_down_a_pending_gang_job_deletes_its_surplus_pods_at_once():
    view = admitted([*priority_classes(), gang_job()])
    admitted([gang_job(parallelism=3, completions=3)], view)

    result = sync(view, "finetune")

    assert sorted((r.name, r.mark_only) for r in result.decision.removals) == [
        (f"finetune-worker-0-{i}", False) for i in range(3, 8)
    ]
    assert stored_min_count(view) == 3
    assert result.status["active"] == 3


def exited(code: int, container: str = "trainer") -> dict[str, Any]:
    """A Failed pod status whose container exited with `code`."""
    terminated = {"exitCode": code, "reason": "Error"}
    return {
        "phase": "Failed",
        "reason": "Error",
        "containerStatuses": [{"name": container, "state": {"terminated": terminated}}],
    }


def policy_job(rules: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    job = plain_job(parallelism=2, completions=4, completionMode="Indexed", **spec)
    job["spec"]["podFailurePolicy"] = {"rules": rules}
    return job


FAIL_ON_42 = {
    "action": "FailJob",
    "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [42]},
}
IGNORE_EVICTIONS = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
IGNORE_3 = {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}


def test_a_fail_job_rule_fails_the_job_with_upstreams_message_and_stops_its_pods():
    view = admitted([*priority_classes(), policy_job([IGNORE_3, FAIL_ON_42])])
    job = job_of(view, "sweep")
    first, second = pods(view, job)
    with_status(view, first, **exited(42))
    with_status(view, second, phase="Running")

    result = sync(view, "sweep", bound={second.uid: "node-1"})

    (failed,) = result.status["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "PodFailurePolicy")
    assert failed["message"] == (
        "Container trainer for pod ml/sweep-0 failed with exit code 42 matching FailJob rule at index 1"
    )
    assert not [
        w for w in result.decision.writes if w.kind == "Pod" and w.name not in (first.name, second.name)
    ]
    stopping = {r.name for r in result.decision.removals} | {
        w.name for w in result.decision.writes if w.kind == "Pod"
    }
    assert second.name in stopping


def test_failures_an_ignore_rule_matches_do_not_count_and_their_index_runs_again():
    view = admitted([*priority_classes(), policy_job([IGNORE_3, FAIL_ON_42], backoffLimit=0)])
    job = job_of(view, "sweep")
    first, second = pods(view, job)
    with_status(view, first, **exited(3))
    with_status(view, second, **exited(1))  # no rule: counted, and backoffLimit is 0

    counted = sync(view, "sweep")

    assert counted.status["failed"] == 1
    assert counted.status["conditions"][0]["reason"] == "BackoffLimitExceeded"

    view = admitted([*priority_classes(), policy_job([IGNORE_3], backoffLimit=0)])
    job = job_of(view, "sweep")
    first, _ = pods(view, job)
    with_status(view, first, **exited(3))

    ignored = sync(view, "sweep")

    assert ignored.status["failed"] == 0
    assert "conditions" not in ignored.status
    assert [w.name for w in ignored.decision.writes if w.kind == "Pod"] == ["sweep-0"]  # index 0 again


def test_an_eviction_counts_when_no_rule_ignores_it_and_not_when_one_does():
    count_evictions = {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    evicted = {
        "phase": "Failed",
        "reason": "DisruptionTarget",
        "conditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    for rules, failed in (([count_evictions], 1), ([IGNORE_EVICTIONS], 0), ([FAIL_ON_42], 0)):
        view = admitted([*priority_classes(), policy_job(rules)])
        first, _ = pods(view, job_of(view, "sweep"))
        with_status(view, first, **evicted)
        assert sync(view, "sweep").status["failed"] == failed, rules


def test_a_fail_index_rule_gives_up_on_its_index_and_the_job_fails_with_failed_indexes_at_the_end():
    fail_index = {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [7]}}
    view = admitted([*priority_classes(), policy_job([fail_index], backoffLimitPerIndex=1)])
    job = job_of(view, "sweep")
    first, second = pods(view, job)
    with_status(view, first, **exited(7))
    with_status(view, second, phase="Succeeded")

    given_up = sync(view, "sweep")

    assert given_up.status["failedIndexes"] == "0"
    assert sorted(w.name for w in given_up.decision.writes if w.kind == "Pod") == ["sweep-2", "sweep-3"]
    assert "conditions" not in given_up.status
    for pod in pods(view, job_of(view, "sweep")):
        if pod.name in ("sweep-2", "sweep-3"):
            with_status(view, pod, phase="Succeeded")

    ended = sync(view, "sweep")

    (failed,) = ended.status["conditions"]
    assert (failed["reason"], failed["message"]) == ("FailedIndexes", "Job has failed indexes")
    assert ended.status["completedIndexes"] == "1-3"
