"""Holds point at nodes that exist and were not lost."""

from __future__ import annotations

from libs.core.invariants import BindingRow, DeviceAllocationRow, RecordedEvent, Records, check
from tests.unit.invariants.builders import (
    bound,
    chain,
    claim,
    ended,
    gpu,
    gpu_slice,
    logged,
    names,
    node,
    pod,
)


def health(kind: str, name: str) -> RecordedEvent:
    return RecordedEvent(kind, f"uid-{name}", {"node": name})


def test_a_binding_on_a_node_that_does_not_exist_is_named() -> None:
    records = Records(
        objects=[pod("a")], bindings=[BindingRow("uid-a", "n9")], events=chain(bound(("a", "n9")))
    )
    (violation,) = check(records)
    assert (violation.invariant, violation.subject) == ("hold-on-live-node", "ml/a")
    assert violation.detail == "bound to n9, which does not exist"


def test_holds_on_a_lost_node_are_named_and_a_node_ready_again_may_hold() -> None:
    def after(*health_events: RecordedEvent) -> Records:
        return Records(
            objects=[
                node("n1"),
                gpu_slice("n1", 1),
                pod("a", phase="Running"),
                claim("ca", reserved_for=("a",)),
            ],
            bindings=[BindingRow("uid-a", "n1")],
            events=[
                *chain(bound(("a", "n1")), ended("pods.running", "a")),
                *logged(*health_events),
            ],
            device_allocations=[DeviceAllocationRow("ml/ca", gpu("n1", 0), exclusive=True)],
        )

    lost = check(after(health("node.lost", "n1")))
    assert [(v.invariant, v.subject, v.detail) for v in lost] == [
        ("hold-on-live-node", "ml/a", "bound to n1, which was lost"),
        ("hold-on-live-node", "ml/ca", f"holds {gpu('n1', 0)} on n1, which was lost"),
    ]
    assert check(after(health("node.lost", "n1"), health("node.ready", "n1"))) == []


def test_a_running_pod_without_a_binding_on_a_lost_node_is_named() -> None:
    records = Records(
        objects=[node("n1"), pod("a", phase="Running", ran_on="n1")],
        bindings=[],
        events=[*chain(bound(("a", "n1")), ended("pods.running", "a")), *logged(health("node.lost", "n1"))],
    )
    assert names(records) == ["hold-on-live-node"]
