"""Each invariant `podway check` holds a run to: a record set that keeps it passes, one that breaks it is named."""

from __future__ import annotations

import dataclasses

from libs.core.invariants import BindingRow, Records, check
from libs.core.invariants.records import event_time_ms
from tests.unit.invariants.builders import (
    bound,
    chain,
    composite,
    ended,
    event,
    gang,
    logged,
    names,
    node,
    pod,
)


def test_a_clean_run_has_no_violation() -> None:
    records = Records(
        objects=[
            node("n1"),
            gang("g", 2),
            pod("a", group="g", phase="Running"),
            pod("b", group="g", phase="Running"),
        ],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=chain(bound(("a", "n1"), ("b", "n1")), ended("pods.running", "a", "b")),
    )
    assert check(records) == []


def test_an_overcommitted_node_is_named_with_what_is_held() -> None:
    records = Records(
        objects=[node("n1", cpu="2"), pod("a", cpu="1500m"), pod("b", cpu="1")],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=chain(bound(("a", "n1"), ("b", "n1"))),
    )
    (violation,) = check(records)
    assert (violation.invariant, violation.subject) == ("node-not-overcommitted", "n1")
    assert violation.detail == "cpu_milli: 2500 held, 2000 allocatable"


def test_a_node_at_exactly_its_allocatable_is_not_overcommitted() -> None:
    records = Records(
        objects=[node("n1", cpu="2"), pod("a", cpu="1"), pod("b", cpu="1")],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=chain(bound(("a", "n1"), ("b", "n1"))),
    )
    assert check(records) == []


def test_a_gang_placed_below_its_min_count_is_named() -> None:
    records = Records(
        objects=[node("n1"), gang("g", 3), pod("a", group="g"), pod("b", group="g"), pod("c", group="g")],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=chain(bound(("a", "n1"), ("b", "n1"))),
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
        events=chain(bound(("a", "n1"), ("b", "n1"))),
    )
    assert check(records) == []


def test_a_pod_bound_twice_without_ending_between_is_named_and_a_restart_allows_it() -> None:
    twice = Records(objects=[], bindings=[], events=chain(bound(("a", "n1")), bound(("a", "n2"))))
    assert names(twice) == ["pod-bound-once"]
    restarted = Records(
        objects=[],
        bindings=[],
        events=chain(bound(("a", "n1")), ended("pods.evicted", "a"), bound(("a", "n2"))),
    )
    assert check(restarted) == []


def test_an_ended_pod_still_holding_its_node_is_named() -> None:
    records = Records(
        objects=[node("n1"), pod("a", phase="Succeeded")],
        bindings=[BindingRow("uid-a", "n1")],
        events=chain(bound(("a", "n1"))),
    )
    assert names(records) == ["hold-ends-with-pod"]


def test_state_without_its_event_is_named() -> None:
    records = Records(
        objects=[node("n1"), pod("a", phase="Running")], bindings=[BindingRow("uid-a", "n1")], events=[]
    )
    assert names(records) == ["binding-has-event", "running-has-event"]


def test_a_pod_older_than_the_log_kept_may_have_lost_its_events_to_retention() -> None:
    (kept,) = logged(event("node.ready", "uid-n1", node="n1"))
    made = event_time_ms(kept.event_id) or 0

    def pod_made_at(ms: int) -> Records:
        running = dataclasses.replace(pod("a", phase="Running"), created_at=ms / 1000)
        return Records(objects=[node("n1"), running], bindings=[BindingRow("uid-a", "n1")], events=[kept])

    assert check(pod_made_at(made - 1000)) == []
    assert names(pod_made_at(made + 1000)) == ["binding-has-event", "running-has-event"]


def test_a_composite_with_fewer_child_groups_placed_than_min_group_count_is_named() -> None:
    children = [gang("driver", 1, parent="job"), gang("workers", 1, parent="job")]
    pods = [pod("d", group="driver"), pod("w", group="workers")]
    half = Records(
        objects=[node("n1"), composite("job", 2), *children, *pods],
        bindings=[BindingRow("uid-d", "n1")],
        events=chain(bound(("d", "n1"))),
    )
    whole = Records(
        objects=[node("n1"), composite("job", 2), *children, *pods],
        bindings=[BindingRow("uid-d", "n1"), BindingRow("uid-w", "n1")],
        events=chain(bound(("d", "n1"), ("w", "n1"))),
    )

    assert names(half) == ["composite-not-below-min-group-count"]
    assert check(whole) == []


def test_pods_of_an_earlier_podgroup_of_the_same_name_do_not_count_for_its_replacement() -> None:
    replacement = gang("g", 3)  # a Job's gang replaced: the three indexes left wait for it
    done = [pod(name, group="g", phase="Succeeded", ran_on="n1") for name in ("a", "b")]
    bound_before = dataclasses.replace(
        bound(("a", "n1"), ("b", "n1")),
        payload={
            **bound(("a", "n1"), ("b", "n1")).payload,
            "podgroup": {"namespace": "ml", "name": "g", "uid": "uid-g-before"},
        },
    )
    records = Records(
        objects=[replacement, *done, pod("c", group="g"), pod("d", group="g"), pod("e", group="g")],
        bindings=[],
        events=chain(bound_before),
    )
    assert "gang-not-below-min-count" not in names(records)
