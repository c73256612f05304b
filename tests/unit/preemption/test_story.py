"""How a preemption reads in `podway events`: each step on one line, the why in the line."""

from __future__ import annotations

from libs.client.describe import event_line


def line(type_: str, payload: dict) -> str:
    return event_line(
        {"seq": 1, "type": type_, "occurred_at": "2026-12-01T20:00:00.000Z", "payload": payload}
    )


def test_the_victims_line_says_why_and_the_nomination_line_where_and_until_when():
    selected = line("preemption.victims_selected", {"victims": [], "reason": "preempting 8 pod(s) of 1 ..."})
    evicted = line(
        "pods.evicted",
        {"pods": [{}] * 8, "reason": "PreemptionByScheduler", "message": "preempted by ml/urgent"},
    )
    nominated = line("podgroup.nominated", {"nodes": ["n1", "n2", "n3", "n4"], "expires_at": 1_764_619_260.0})

    assert selected.endswith("preempting 8 pod(s) of 1 ...")
    assert evicted.endswith("preempted by ml/urgent")
    assert nominated.endswith("room held on n1, n2, n3 and 1 more until 20:01:00")
