"""Devices: held once (or shared within capacity) by claims in use, and no node's GPUs promised twice."""

from __future__ import annotations

from libs.core.invariants import BindingRow, DeviceAllocationRow, Records, check
from tests.unit.invariants.builders import (
    bound,
    chain,
    claim,
    gpu,
    gpu_class,
    gpu_slice,
    names,
    node,
    pod,
)


def test_a_device_held_by_two_claims_of_bound_pods_is_named() -> None:
    records = Records(
        objects=[
            node("n1"),
            gpu_slice("n1", 2),
            pod("a"),
            pod("b"),
            claim("ca", gpu("n1", 0), reserved_for=("a",)),
            claim("cb", gpu("n1", 0), reserved_for=("b",)),
        ],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=chain(bound(("a", "n1"), ("b", "n1"))),
    )
    (violation,) = check(records)
    assert (violation.invariant, violation.subject) == ("device-held-once", gpu("n1", 0))
    assert violation.detail == "held by ml/ca, ml/cb"


def test_a_device_left_in_the_status_of_a_claim_whose_pod_ended_is_not_held_twice() -> None:
    records = Records(
        objects=[
            node("n1"),
            gpu_slice("n1", 1),
            pod("a"),
            pod("b", phase="Succeeded", ran_on="n1"),
            claim("ca", gpu("n1", 0), reserved_for=("a",)),
            claim("cb", gpu("n1", 0), reserved_for=("b",)),
        ],
        bindings=[BindingRow("uid-a", "n1")],
        events=chain(bound(("a", "n1"), ("b", "n1"))),
    )
    assert check(records) == []


def test_the_allocators_rows_count_as_holds_too() -> None:
    records = Records(
        objects=[node("n1"), gpu_slice("n1", 1), pod("a"), pod("b"), claim("ca", reserved_for=("a",))]
        + [claim("cb", reserved_for=("b",))],
        bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
        events=chain(bound(("a", "n1"), ("b", "n1"))),
        device_allocations=[
            DeviceAllocationRow("ml/ca", gpu("n1", 0), exclusive=True),
            DeviceAllocationRow("ml/cb", gpu("n1", 0), exclusive=True),
        ],
    )
    assert names(records) == ["device-held-once"]


def test_a_shareable_device_is_shared_within_its_capacity_and_named_beyond_it() -> None:
    def shared(memory_each: str) -> Records:
        return Records(
            objects=[
                node("n1"),
                gpu_slice("n1", 1, shared_memory="40Gi"),
                pod("a"),
                pod("b"),
                claim("ca", gpu("n1", 0), reserved_for=("a",), memory=memory_each),
                claim("cb", gpu("n1", 0), reserved_for=("b",), memory=memory_each),
            ],
            bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
            events=chain(bound(("a", "n1"), ("b", "n1"))),
        )

    assert check(shared("20Gi")) == []
    (violation,) = check(shared("30Gi"))
    assert violation.invariant == "device-held-once"
    assert violation.detail.startswith("gpu.example.com/memory: ")


def test_gpus_requested_and_held_by_claims_beyond_the_nodes_devices_are_named() -> None:
    def on_n1(gpus: int) -> Records:
        return Records(
            objects=[
                gpu_class(),
                node("n1"),
                gpu_slice("n1", 4),
                pod("a", gpus=gpus),
                pod("b"),
                claim("cb", gpu("n1", 0), gpu("n1", 1), reserved_for=("b",)),
            ],
            bindings=[BindingRow("uid-a", "n1"), BindingRow("uid-b", "n1")],
            events=chain(bound(("a", "n1"), ("b", "n1"))),
        )

    assert check(on_n1(2)) == []
    (violation,) = check(on_n1(3))
    assert (violation.invariant, violation.subject) == ("node-devices-not-overcommitted", "n1")
    assert violation.detail == "nvidia.com/gpu: 3 requested, 2 held by claims, 4 on the node"


def test_an_extended_resource_the_node_advertises_is_counted_against_its_allocatable() -> None:
    def asking(gpus: int) -> Records:
        return Records(
            objects=[node("n1", extended={"nvidia.com/gpu": "2"}), pod("a", gpus=gpus)],
            bindings=[BindingRow("uid-a", "n1")],
            events=chain(bound(("a", "n1"))),
        )

    assert check(asking(2)) == []
    assert names(asking(3)) == ["node-devices-not-overcommitted"]
