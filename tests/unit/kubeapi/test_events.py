"""Kubernetes Events made from audited envelopes."""

from __future__ import annotations

from libs.kubeapi.events import as_events_v1, kube_events, reason_of, type_of, waiting_event

BOUND = {
    "event_id": "0193-bound",
    "type": "pods.bound",
    "occurred_at": "2026-12-03T10:00:01.123456+00:00",
    "producer": "scheduler",
    "subject": {"kind": "PodGroup", "namespace": "ml", "name": "train-0", "uid": "g-1"},
    "payload": {
        "pods": [
            {"pod": "train-0-0", "pod_uid": "p-0", "node": "n-1"},
            {"pod": "train-0-1", "pod_uid": "p-1", "node": "n-2"},
        ]
    },
}


def test_a_fact_about_a_gang_is_an_event_of_the_gang_and_of_each_pod_it_names() -> None:
    events = list(kube_events(7, BOUND))
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events] == [
        ("PodGroup", "train-0"),
        ("Pod", "train-0-0"),
        ("Pod", "train-0-1"),
    ]
    assert {e["reason"] for e in events} == {"Scheduled"}
    assert events[1]["involvedObject"]["uid"] == "p-0"
    assert events[0]["message"] == "pods.bound: 2 pod(s) on n-1, n-2"
    assert events[0]["firstTimestamp"] == "2026-12-03T10:00:01Z"
    assert len({e["metadata"]["name"] for e in events}) == 3


def test_reasons_and_types_follow_upstream_where_one_fits() -> None:
    assert reason_of("podgroup.unschedulable") == "FailedScheduling"
    assert type_of("podgroup.unschedulable") == "Warning"
    assert reason_of("podgroup.cycle.started") == "CycleStarted"
    assert type_of("podgroup.cycle.started") == "Normal"
    assert type_of("claims.allocation_failed") == "Warning"


def test_a_pod_stopped_because_it_was_deleted_is_killing_and_a_preempted_one_preempted() -> None:
    def evicted(reason: str) -> dict:
        pods = [{"namespace": "ml", "name": "p", "uid": "u", "node": "n-1"}]
        return {**BOUND, "type": "pods.evicted", "payload": {"pods": pods, "reason": reason}}

    (deleted,) = kube_events(
        8, {**evicted("Deleted"), "subject": {"kind": "Pod", "namespace": "ml", "name": "p"}}
    )
    (preempted,) = kube_events(
        9, {**evicted("PreemptionByScheduler"), "subject": {"kind": "Pod", "namespace": "ml", "name": "p"}}
    )

    assert (deleted["reason"], deleted["type"]) == ("Killing", "Normal")
    assert (preempted["reason"], preempted["type"]) == ("Preempted", "Warning")
    assert deleted["eventTime"] == "2026-12-03T10:00:01.123456Z"


def test_a_waiting_condition_is_a_failed_scheduling_warning() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "uid": "u"}}
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes"}
    event = waiting_event(pod, condition)
    assert (event["type"], event["reason"], event["message"]) == ("Warning", "FailedScheduling", "0/4 nodes")


def test_events_v1_shape() -> None:
    event = as_events_v1(next(kube_events(7, BOUND)))
    assert event["apiVersion"] == "events.k8s.io/v1"
    assert event["regarding"]["name"] == "train-0"
    assert event["note"].startswith("pods.bound")


def test_a_fact_that_counts_its_pods_is_an_event_of_the_gang_alone() -> None:
    """`podgroup.cycle.started` carries `"pods": 4`, a count: no pod is named, and the list does not fail."""
    counted = {**BOUND, "type": "podgroup.cycle.started", "payload": {"pods": 4, "attempt": 1}}

    events = list(kube_events(8, counted))

    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events] == [
        ("PodGroup", "train-0")
    ]
