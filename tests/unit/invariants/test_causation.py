"""The audit log as causal chains: answers name causes that are in the log, applies are answered, requests
end once."""

from __future__ import annotations

import dataclasses

from libs.core.invariants import RecordedEvent, Records, check
from libs.events.envelope import uuid7
from tests.unit.invariants.builders import bound, chain, event, logged, names, pod


def only(*events: RecordedEvent) -> Records:
    return Records(objects=[], bindings=[], events=list(events))


def test_an_answer_without_a_cause_is_named() -> None:
    admitted, placed, binding = chain(event("podgroup.cycle.placed"), bound(("a", "n1")))
    assert check(only(admitted, placed, binding)) == []
    orphan = dataclasses.replace(placed, causation_id=None)
    (violation,) = check(only(admitted, orphan, binding))
    assert (violation.invariant, violation.subject) == ("answer-names-cause", orphan.event_id)
    assert violation.detail == "podgroup.cycle.placed names no cause"


def test_a_cause_missing_from_the_log_is_named_unless_retention_took_it() -> None:
    admitted, placed, binding = chain(event("podgroup.cycle.placed"), bound(("a", "n1")))
    unheard = str(uuid7(int(1e12) * 3))  # made after everything kept: lost, not pruned
    lost = dataclasses.replace(placed, causation_id=unheard)
    assert names(only(admitted, lost, binding)) == ["answer-names-cause"]
    pruned = str(uuid7(1_000))  # made before the oldest event kept
    assert check(only(admitted, dataclasses.replace(placed, causation_id=pruned), binding)) == []


def test_an_inference_request_may_begin_with_the_work_item_that_asked_for_it() -> None:
    work_item = str(uuid7(int(1e12) * 3))
    spilled, done = logged(event("router.spillover", "r1"), event("inference.completed", "r1"))
    begun = dataclasses.replace(spilled, causation_id=work_item)
    assert check(only(begun, dataclasses.replace(done, causation_id=spilled.event_id))) == []
    assert names(only(begun, dataclasses.replace(done, causation_id=work_item))) == ["answer-names-cause"]


def test_an_admitted_group_never_answered_is_named() -> None:
    (admitted,) = chain()
    (violation,) = check(only(admitted))
    assert (violation.invariant, violation.subject) == ("apply-is-answered", "c")
    told_why = chain(event("podgroup.cycle.started"), event("podgroup.unschedulable"))
    assert check(only(*told_why)) == []


def test_a_pod_alone_is_answered_in_its_story_or_by_its_condition_and_a_gangs_pod_in_its_groups() -> None:
    alone = {"outcome": "created", "object": {"spec": {}}}
    of_a_gang = {"outcome": "created", "object": {"spec": {"schedulingGroup": {"podGroupName": "g"}}}}
    (admitted,) = logged(event("pod.admitted", "uid-p", **alone))
    assert names(only(admitted)) == ["apply-is-answered"]
    waiting = pod("p")
    told = dataclasses.replace(waiting, status={"conditions": [{"type": "PodScheduled", "status": "False"}]})
    assert check(Records(objects=[told], bindings=[], events=[admitted])) == []
    (early,) = logged(event("pod.admitted", "uid-q", **of_a_gang))  # before its PodGroup was stored
    (updated,) = logged(event("podgroup.admitted", "uid-g", outcome="updated"))
    assert check(only(early, updated)) == []


def test_requests_have_exactly_one_outcome() -> None:
    done = RecordedEvent("inference.completed", "r1", {})
    failed = RecordedEvent("inference.failed", "r1", {})
    assert names(only(done, failed)) == ["one-outcome-per-request"]
    missing = Records(objects=[], bindings=[], events=[done], expected_requests=frozenset({"r1", "r2"}))
    (violation,) = check(missing)
    assert (violation.subject, violation.detail) == ("r2", "no outcome")


def test_a_queued_request_the_router_began_has_one_outcome_and_a_synchronous_one_may_have_lost_its_own() -> (
    None
):
    work_item = str(uuid7(int(1e12) * 3))
    spilled, done = logged(event("router.spillover", "queued"), event("inference.completed", "queued"))
    begun = dataclasses.replace(spilled, causation_id=work_item)
    assert names(only(begun)) == ["one-outcome-per-request"]
    assert check(only(begun, dataclasses.replace(done, causation_id=spilled.event_id))) == []
    (sync,) = logged(event("router.spillover", "sync"))  # its outcome died with its router's group commit
    assert check(only(sync)) == []
