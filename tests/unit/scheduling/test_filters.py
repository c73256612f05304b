"""Node filters and per-node fit: cordon, taints and tolerations, node selector, resources."""

from __future__ import annotations

from typing import Any

import pytest

from libs.core.scheduling import Taint, TaintEffect, Toleration, TolerationOperator
from libs.core.scheduling.capacity import NodeState
from libs.core.scheduling.filters import NodeUsage, admits, fit_count, rejection_reasons
from libs.core.scheduling.model import UNSCHEDULABLE_TAINT_KEY

from .builders import GPU, GPU_RESOURCE, make_node, make_pod, make_snapshot

DEDICATED = Taint("dedicated", "ml", TaintEffect.NO_SCHEDULE)


def _node(**options: Any) -> NodeState:
    return make_snapshot([make_node("n1", **options)]).node_state("n1")


def _reasons(pod_options: dict[str, Any], **node_options: Any) -> list[str]:
    shape = make_pod("p", **pod_options).shape
    return rejection_reasons(shape, _node(**node_options), lambda cls: {GPU: GPU_RESOURCE}.get(cls, cls))


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        (Toleration("dedicated", TolerationOperator.EQUAL, "ml"), True),
        (Toleration("dedicated", TolerationOperator.EQUAL, "web"), False),
        (Toleration("dedicated", TolerationOperator.EXISTS), True),
        (Toleration("", TolerationOperator.EXISTS), True),
        (Toleration("dedicated", TolerationOperator.EXISTS, effect=TaintEffect.NO_EXECUTE), False),
        (Toleration("dedicated", TolerationOperator.EQUAL, "ml", TaintEffect.NO_SCHEDULE), True),
        (Toleration("other", TolerationOperator.EXISTS), False),
    ],
)
def test_a_toleration_matches_a_taint_by_key_operator_value_and_effect(
    toleration: Toleration, tolerated: bool
) -> None:
    assert toleration.tolerates(DEDICATED) is tolerated


def test_an_untolerated_no_schedule_or_no_execute_taint_rejects_the_node() -> None:
    for effect in (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE):
        node = _node(taints=[Taint("gpu", "broken", effect)])
        assert not admits(make_pod("p").shape, node)
    assert _reasons({}, taints=[DEDICATED]) == ["node(s) had untolerated taint {dedicated: ml}"]


def test_a_prefer_no_schedule_taint_does_not_reject() -> None:
    node = _node(taints=[Taint("soft", "x", TaintEffect.PREFER_NO_SCHEDULE)])
    assert admits(make_pod("p").shape, node)


def test_a_tolerated_taint_admits() -> None:
    pod = make_pod("p", tolerations=[Toleration("dedicated", TolerationOperator.EXISTS)])
    assert admits(pod.shape, _node(taints=[DEDICATED]))


def test_a_cordoned_node_is_unschedulable_unless_the_pod_tolerates_it() -> None:
    assert _reasons({}, unschedulable=True) == ["node(s) were unschedulable"]
    tolerant = make_pod("p", tolerations=[Toleration(UNSCHEDULABLE_TAINT_KEY, TolerationOperator.EXISTS)])
    assert admits(tolerant.shape, _node(unschedulable=True))


def test_the_node_selector_must_match_every_label() -> None:
    node = _node(rack="r1", labels={"gpu.model": "H200"})
    assert admits(make_pod("p", selector={"gpu.model": "H200"}).shape, node)
    assert not admits(make_pod("p", selector={"gpu.model": "H200", "x": "y"}).shape, node)
    assert _reasons({"selector": {"gpu.model": "B200"}}, rack="r1") == [
        "node(s) didn't match Pod's node affinity/selector"
    ]


def test_filters_stop_at_the_first_failure_in_kube_scheduler_order() -> None:
    reasons = _reasons({"selector": {"x": "y"}, "gpus": 99}, unschedulable=True, taints=[DEDICATED])
    assert reasons == ["node(s) were unschedulable"]


def test_every_short_resource_is_reported_with_the_extended_resource_name() -> None:
    reasons = _reasons({"gpus": 9, "cpu": 65, "memory_gib": 600})
    assert sorted(reasons) == ["Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu"]
    assert _reasons({}, pods=0) == ["Too many pods"]
    assert _reasons({}, gpus=0) == ["Insufficient nvidia.com/gpu"]


def test_fit_count_is_the_minimum_over_resources_of_free_over_request() -> None:
    node = _node(gpus=8, cpu=64, memory_gib=512, pods=110)
    assert fit_count(make_pod("p", gpus=1, cpu=8, memory_gib=64).shape, node) == 8
    assert fit_count(make_pod("p", gpus=2, cpu=4, memory_gib=16).shape, node) == 4
    assert fit_count(make_pod("p", gpus=1, cpu=30, memory_gib=16).shape, node) == 2
    assert fit_count(make_pod("p", gpus=0, cpu=1, memory_gib=500).shape, node) == 1
    assert fit_count(make_pod("p", gpus=0, cpu=0, memory_gib=0).shape, node) == 110
    assert fit_count(make_pod("p", gpus=1, device_class="other.example.com").shape, node) == 0


def test_fit_count_subtracts_what_the_cycle_already_took() -> None:
    node = _node(gpus=8)
    used = NodeUsage()
    used.cpu, used.memory, used.pods, used.devices = 8_000, 0, 1, {GPU: 6}
    assert fit_count(make_pod("p", gpus=1, cpu=8).shape, node, used) == 2
