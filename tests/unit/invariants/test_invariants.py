"""Each invariant `podway check` holds a run to: a record set that keeps it passes, one that breaks it is named."""

from __future__ import annotations

from typing import Any

from libs.core.invariants import BindingRow, RecordedEvent, Records, check
from libs.core.scheduling.objects import ApiObject


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110") -> ApiObject:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    return ApiObject("Node", "", name, f"uid-{name}", {}, {}, {"allocatable": allocatable})


def pod(
    name: str, *, group: str | None = None, cpu: str = "1", phase: str = "Pending", ran_on: str = ""
) -> ApiObject:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    status: dict[str, Any] = {"phase": phase}
    if ran_on:
        status["podway"] = {"nodeName": ran_on}
    return ApiObject("Pod", "ml", name, f"uid-{name}", {}, spec, status)


def gang(name: str, min_count: int) -> ApiObject:
    spec = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    return ApiObject("PodGroup", "ml", name, f"uid-{name}", {}, spec, {})


def bound(*pods: tuple[str, str]) -> RecordedEvent:
    return RecordedEvent("pods.bound", "c", {"pods": [{"pod_uid": f"uid-{p}", "node": n} for p, n in pods]})


def ended(kind: str, *pods: str) -> RecordedEvent:
    return RecordedEvent(kind, "c", {"pods": [{"uid": f"uid-{p}"} for p in pods]})


def names(records: Records) -> list[str]:
    return [violation.invariant for violation in check(records)]


def test_a_clean_run_has_no_violation() -> None:
    records = Records(
        objects=[
            node("n1"),
            gang("g", 2),
            pod("a", group="g", phase="Running"),
            pod("b", group="g", phase="Running"),
        ],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=[bound(("a", "n1"), ("b", "n1")), ended("pods.running", "a", "b")],
    )
    assert check(records) == []


def test_an_overcommitted_node_is_named_with_what_is_held() -> None:
    records = Records(
        objects=[node("n1", cpu="2"), pod("a", cpu="1500m"), pod("b", cpu="1")],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=[bound(("a", "n1"), ("b", "n1"))],
    )
    (violation,) = check(records)
    assert (violation.invariant, violation.subject) == ("node-not-overcommitted", "n1")
    assert violation.detail == "cpu_milli: 2500 held, 2000 allocatable"


def test_a_node_at_exactly_its_allocatable_is_not_overcommitted() -> None:
    records = Records(
        objects=[node("n1", cpu="2"), pod("a", cpu="1"), pod("b", cpu="1")],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=[bound(("a", "n1"), ("b", "n1"))],
    )
    assert check(records) == []


def test_a_gang_placed_below_its_min_count_is_named() -> None:
    records = Records(
        objects=[node("n1"), gang("g", 3), pod("a", group="g"), pod("b", group="g"), pod("c", group="g")],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=[bound(("a", "n1"), ("b", "n1"))],
    )
    assert names(records) == ["gang-not-below-min-count"]


def test_a_finished_gang_that_released_its_nodes_still_counts_as_placed() -> None:
    records = Records(
        objects=[
            gang("g", 2),
            pod("a", group="g", phase="Succeeded", ran_on="n1"),
            pod("b", group="g", phase="Succeeded", ran_on="n1"),
        ],
        bindings=[],
        events=[bound(("a", "n1"), ("b", "n1"))],
    )
    assert check(records) == []


def test_a_pod_bound_twice_without_ending_between_is_named_and_a_restart_allows_it() -> None:
    twice = Records(objects=[], bindings=[], events=[bound(("a", "n1")), bound(("a", "n2"))])
    assert names(twice) == ["pod-bound-once"]
    restarted = Records(
        objects=[], bindings=[], events=[bound(("a", "n1")), ended("pods.evicted", "a"), bound(("a", "n2"))]
    )
    assert check(restarted) == []


def test_an_ended_pod_still_holding_its_node_is_named() -> None:
    records = Records(
        objects=[node("n1"), pod("a", phase="Succeeded")],
        bindings=[BindingRow("uid-a", "n1")],
        events=[bound(("a", "n1"))],
    )
    assert names(records) == ["hold-ends-with-pod"]


def test_state_without_its_event_is_named() -> None:
    records = Records(
        objects=[node("n1"), pod("a", phase="Running")], bindings=[BindingRow("uid-a", "n1")], events=[]
    )
    assert names(records) == ["binding-has-event", "running-has-event"]


def test_requests_have_exactly_one_outcome() -> None:
    done = RecordedEvent("inference.completed", "r1", {})
    failed = RecordedEvent("inference.failed", "r1", {})
    doubled = Records(objects=[], bindings=[], events=[done, failed])
    assert names(doubled) == ["one-outcome-per-request"]
    missing = Records(objects=[], bindings=[], events=[done], expected_requests=frozenset({"r1", "r2"}))
    (violation,) = check(missing)
    assert (violation.subject, violation.detail) == ("r2", "no outcome")


def test_pods_of_an_earlier_podgroup_of_the_same_name_do_not_count_for_its_replacement() -> None:
    replacement = gang("g", 3)  # a Job's gang replaced: the three indexes left wait for it
    old_group = {"namespace": "ml", "name": "g", "uid": "uid-g-before"}
    done = [pod(name, group="g", phase="Succeeded", ran_on="n1") for name in ("a", "b")]
    bound_before = RecordedEvent(
        "pods.bound",
        "c",
        {"pods": [{"pod_uid": p.uid, "node": "n1"} for p in done], "podgroup": old_group},
    )
    records = Records(
        objects=[replacement, *done, pod("c", group="g"), pod("d", group="g"), pod("e", group="g")],
        bindings=[],
        events=[bound_before],
    )
    assert check(records) == []
