"""The run report: the series it computes from an audit log, and the page Chromium renders from them."""

from __future__ import annotations

import os
from typing import Any

import pytest

from libs.client.report_html import render_report
from libs.client.report_model import build_report
from tests.support import chromium, dom_attribute, rendered_dom

RACK = "topology.example.com/rack"


def event(
    seq: int, type_: str, payload: dict[str, Any], subject: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "seq": seq,
        "type": type_,
        "occurred_at": f"2026-12-01T10:00:{seq:02d}.000000Z",
        "payload": payload,
        "subject": subject,
    }


def admitted(seq: int, kind: str, name: str, uid: str, obj: dict[str, Any]) -> dict[str, Any]:
    return event(
        seq,
        f"{kind.lower()}.admitted",
        {"kind": kind, "name": name, "uid": uid, "namespace": "ml", "object": obj},
    )


def run_events() -> list[dict[str, Any]]:
    node = {"metadata": {"labels": {RACK: "r0"}}}
    events = [
        event(1, "node.registered", {"kind": "Node", "name": "n0", "uid": "n0", "object": node}),
        event(2, "resourceslice.published", {"kind": "ResourceSlice", "name": "s", "uid": "s", "object": {"spec": {"nodeName": "n0", "driver": "gpu.example.com", "devices": [{}] * 8}}}),
        admitted(3, "PodGroup", "a", "ga", {}),
        admitted(4, "PodGroup", "b", "gb", {}),
        event(5, "pods.bound", {"podgroup": {"uid": "ga"}, "pods": [{"pod_uid": "p1", "node": "n0", "devices": {"gpu.example.com": ["gpu-0", "gpu-1"]}}, {"pod_uid": "p2", "node": "n0", "devices": {"gpu.example.com": ["gpu-2", "gpu-3"]}}]}),
        event(6, "pods.running", {"pods": []}, {"uid": "ga"}),
        event(8, "pods.bound", {"podgroup": {"uid": "gb"}, "pods": [{"pod_uid": "p3", "node": "n0", "devices": {"gpu.example.com": ["gpu-4"]}}]}),
        event(9, "pods.evicted", {"podgroup": {"uid": "ga"}, "reason": "PreemptionByScheduler", "pods": [{"uid": "p1"}, {"uid": "p2"}]}),
        event(10, "inference.completed", {"deployment": "claude-pt", "served_tier": "provisioned"}),
        event(11, "router.spillover", {"from_deployment": "claude-pt", "to_deployment": "claude-od", "reason": "pt_exhausted"}),
        event(12, "inference.completed", {"deployment": "claude-od", "served_tier": "on_demand"}),
        event(13, "router.breaker.opened", {"deployment": "nova", "from_state": "closed", "to_state": "open"}),
        event(14, "router.failover", {"from_deployment": "nova", "to_deployment": "claude-od", "reason": "breaker_open"}),
        event(15, "router.breaker.half_opened", {"deployment": "nova", "from_state": "open", "to_state": "half_open"}),
        event(16, "pods.succeeded", {"pods": [{"uid": "p3"}]}, {"uid": "gb"}),
    ]  # fmt: skip
    return events


def test_the_series_follow_the_events():
    report = build_report(run_events())
    assert report.racks == {"r0": 8}
    assert [p for _, p in report.occupancy["r0"]] == [25.0, 50.0, 62.5, 37.5, 12.5, 0.0]
    a, b = report.groups
    assert [s.state for s in a.segments] == ["waiting", "placed", "running", "preempted"]
    assert a.marks == [("2026-12-01 10:00:09.000000", "evicted: PreemptionByScheduler")]
    assert [s.state for s in b.segments] == ["waiting", "placed"]  # then done
    assert set(report.traffic) == {"claude-pt (provisioned)", "claude-od (on_demand)"}
    assert [(m["kind"], m["from"], m["to"]) for m in report.moves] == [
        ("spillover", "claude-pt", "claude-od"),
        ("failover", "nova", "claude-od"),
    ]
    assert [level for _, level in report.breakers["nova"]] == [0, 2, 1, 1]


@pytest.mark.skipif(
    chromium() is None and not os.environ.get("CI"), reason="chromium is not installed (.ci/run installs it)"
)
def test_chromium_draws_every_chart_without_a_script_error(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_report(build_report(run_events())))
    dom = rendered_dom(page)
    assert dom_attribute(dom, None, "data-errors") == ""
    assert dom_attribute(dom, None, "data-charts") == "4"
    assert dom_attribute(dom, "gantt", "data-rows") == "2"
    assert "main-svg" in dom  # plotly drew SVG
