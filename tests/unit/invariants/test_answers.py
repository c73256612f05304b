"""Requests between services are answered, and a gang outbid by lower priorities asks again."""

from __future__ import annotations

from libs.core.invariants import BindingRow, Records, check
from tests.unit.invariants.builders import bound, chain, event, gang, names, node, pod


def test_a_proposal_with_no_claims_answer_is_named_while_its_group_is_there() -> None:
    proposed = chain(event("podgroup.cycle.placed"), event("placement.proposed"), story="uid-g")
    waiting = Records(objects=[gang("g", 1)], bindings=[], events=[*proposed])
    _, violation = check(waiting)  # and its story never ended
    assert (violation.invariant, violation.subject) == ("proposal-answered", "uid-g")
    gone = Records(objects=[], bindings=[], events=[*proposed])
    assert names(gone) == ["apply-is-answered"]  # the proposal is moot; its story never ended


def test_a_proposal_answered_by_claims_allocated_or_failed_is_kept() -> None:
    for answer in ("claims.allocated", "claims.allocation_failed"):
        story = chain(
            event("podgroup.cycle.placed"),
            event("placement.proposed"),
            event(answer),
            event("podgroup.unschedulable"),
            story="uid-g",
        )
        assert check(Records(objects=[gang("g", 1)], bindings=[], events=story)) == []


def test_a_preemption_request_with_no_answer_is_named_unless_the_group_holds_a_nomination() -> None:
    asked = chain(event("podgroup.unschedulable"), event("preemption.requested", priority=10), story="uid-g")
    (violation,) = check(Records(objects=[gang("g", 1)], bindings=[], events=asked))
    assert (violation.invariant, violation.subject) == ("preemption-answered", "uid-g")
    answered = chain(
        event("podgroup.unschedulable"),
        event("preemption.requested", priority=10),
        event("preemption.victims_selected"),
        event("podgroup.nominated"),
        event("preemption.requested", priority=10),
        story="uid-g",
    )
    assert check(Records(objects=[gang("g", 1)], bindings=[], events=answered)) == []


def test_a_gang_outbid_by_lower_priority_pods_after_its_last_request_must_ask_again() -> None:
    def story(*after: str) -> Records:
        waiting = chain(
            event("podgroup.unschedulable"),
            event("preemption.requested", priority=10),
            event("preemption.victims_selected"),
            story="uid-g",
        )
        low = chain(bound(("low", "n1")), story="uid-low")
        again = chain(*(event(kind, priority=10) for kind in after), story="uid-g", after=waiting[-1])
        return Records(
            objects=[node("n1"), gang("g", 1), pod("low")],
            bindings=[BindingRow("uid-low", "n1")],
            events=[*waiting, *low, *again],
        )

    (violation,) = check(story("podgroup.unschedulable"))
    assert (violation.invariant, violation.subject) == ("gang-asks-again", "uid-g")
    assert violation.detail == "pods of priority 0 were bound after its last request"
    assert names(story("podgroup.unschedulable", "preemption.requested")) == ["preemption-answered"]
    asked_and_answered = story(
        "podgroup.unschedulable", "preemption.requested", "preemption.victims_selected"
    )
    assert check(asked_and_answered) == []
