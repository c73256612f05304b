"""Why a pending pod or PodGroup waits, derived from what is stored: a cycle's verdict first, then what the
gang waits for before its first cycle, then its turn."""

from __future__ import annotations

import dataclasses
from typing import Any

from libs.core.scheduling.lifecycle import Condition
from libs.core.scheduling.waiting import PodFacts, PodGroupFacts, Waiting, pod_waiting, podgroup_waiting

UNSCHEDULABLE = Condition(
    "PodGroupScheduled", False, "Unschedulable", "0/64 nodes are available: 64 Insufficient nvidia.com/gpu."
)


GROUP = PodGroupFacts(
    namespace="ml", workload="train", workload_exists=True, pods=4, min_count=4, scheduled=None
)
POD = PodFacts(namespace="ml", podgroup="train-0", group=GROUP, awaited_workload=None, scheduled=None)


def group(**changes: Any) -> PodGroupFacts:
    return dataclasses.replace(GROUP, **changes)


def pod(**changes: Any) -> PodFacts:
    return dataclasses.replace(POD, **changes)


def test_a_podgroup_a_cycle_failed_for_shows_the_schedulers_reason_and_message():
    assert podgroup_waiting(group(scheduled=UNSCHEDULABLE)) == Waiting("Unschedulable", UNSCHEDULABLE.message)


def test_a_placed_podgroup_does_not_wait():
    assert podgroup_waiting(group(scheduled=Condition("PodGroupScheduled", True, "Scheduled"))) is None


def test_a_podgroup_not_tried_yet_waits_for_its_workload_then_for_its_pods_then_for_its_turn():
    assert podgroup_waiting(group(workload_exists=False)) == Waiting(
        "SchedulingGated", "waiting for Workload ml/train"
    )
    assert podgroup_waiting(group(pods=1)) == Waiting("SchedulingGated", "waiting for pods: 1 of 4 exist")
    assert podgroup_waiting(group(min_count=None, pods=0)) == Waiting(
        "SchedulingGated", "waiting for pods: 0 of 1 exist"
    )
    assert podgroup_waiting(group()) == Waiting("Queued", "waiting for a scheduling cycle")


def test_a_pod_waits_for_its_missing_podgroup_or_for_the_workload_its_v135_reference_named():
    assert pod_waiting(pod(group=None)) == Waiting(
        "SchedulingGated", "waiting for PodGroup ml/train-0, which does not exist"
    )
    assert pod_waiting(pod(group=None, awaited_workload="legacy")) == Waiting(
        "SchedulingGated", "waiting for Workload ml/legacy"
    )


def test_a_pod_of_an_existing_podgroup_shows_its_groups_reason():
    assert pod_waiting(pod(group=group(scheduled=UNSCHEDULABLE))) == Waiting(
        "Unschedulable", UNSCHEDULABLE.message
    )
    assert pod_waiting(pod(group=group(pods=3))) == Waiting(
        "SchedulingGated", "waiting for pods: 3 of 4 exist"
    )


def test_a_pod_without_a_group_shows_its_own_cycles_verdict_or_waits_for_its_turn():
    verdict = Condition(
        "PodScheduled", False, "Unschedulable", "0/64 nodes are available: 64 node(s) didn't match"
    )
    assert pod_waiting(pod(podgroup=None, group=None, scheduled=verdict)) == Waiting(
        "Unschedulable", verdict.message
    )
    assert pod_waiting(pod(podgroup=None, group=None)) == Waiting("Queued", "waiting for a scheduling cycle")
