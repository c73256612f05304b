"""The scheduling queue: order, gang PreEnqueue, backoff, event-driven retry, timeouts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from libs.core.scheduling import (
    ClusterEvent,
    CycleDecision,
    NodeAssignment,
    Placement,
    PodGroup,
    PodRequest,
    QueueState,
    ResourceTotals,
    SchedulingQueue,
    TopologyDomainRef,
    Unschedulable,
    backoff_seconds,
)


def make_group(
    name: str,
    *,
    priority: int = 0,
    created_at: float = 0.0,
    min_count: int | None = 4,
    workload: str | None = None,
    max_pending_seconds: float | None = None,
) -> PodGroup:
    return PodGroup(
        namespace="ml",
        name=name,
        uid=f"uid-{name}",
        gang_min_count=min_count,
        priority=priority,
        created_at=created_at,
        workload_name=workload,
        max_pending_seconds=max_pending_seconds,
    )


def decision_for(
    group: PodGroup, *, placed: bool, message: str = "", unplaced: tuple[str, ...] = ()
) -> CycleDecision:
    if placed:
        placement = Placement("uid-0", "pod-0", "n1", 0, 0, {})
        assignment = NodeAssignment("n1", 1, 0, 0, {})
        return CycleDecision(
            group.key, (placement,), (assignment,), TopologyDomainRef("rack", "r1"), unplaced, None, 0.0
        )
    why = Unschedulable(message, {}, ResourceTotals(), 4, None)
    return CycleDecision(group.key, (), (), None, unplaced, why, 0.0)


def queue_with(*groups: PodGroup, now: float = 0.0) -> SchedulingQueue:
    queue = SchedulingQueue()
    for group in groups:
        queue.add(group, pod_count=4, now=now)
    return queue


def drain(queue: SchedulingQueue, now: float) -> list[str]:
    names = []
    while (group := queue.pop(now)) is not None:
        names.append(group.name)
    return names


def fail(queue: SchedulingQueue, name: str, now: float, message: str = "no room") -> None:
    group = queue.pop(now)
    assert group is not None
    assert group.name == name
    queue.done(decision_for(group, placed=False, message=message), now=now)


def test_groups_are_popped_by_priority_then_creation_time_then_name() -> None:
    queue = queue_with(
        make_group("late", created_at=2.0),
        make_group("b-early", created_at=1.0),
        make_group("a-early", created_at=1.0),
        make_group("urgent", priority=100, created_at=9.0),
    )

    assert drain(queue, now=0.0) == ["urgent", "a-early", "b-early", "late"]


def test_a_gang_waits_until_min_count_pods_exist() -> None:
    queue = SchedulingQueue()
    queue.add(make_group("g", min_count=4), pod_count=3, now=0.0)

    assert queue.pop(0.0) is None
    assert queue.gate_reason("ml/g") == "waiting for pods: 3 of 4 exist"

    queue.set_pod_count("ml/g", 4, now=1.0)
    assert drain(queue, 1.0) == ["g"]


def test_a_group_waits_until_its_workload_exists() -> None:
    queue = queue_with(make_group("g", workload="train"))

    assert queue.pop(0.0) is None
    assert queue.gate_reason("ml/g") == "waiting for Workload ml/train"

    queue.add_workload("other", "train", now=1.0)
    assert queue.pop(1.0) is None
    queue.add_workload("ml", "train", now=1.0)
    assert drain(queue, 1.0) == ["g"]


def test_a_basic_group_needs_one_pod() -> None:
    queue = SchedulingQueue()
    queue.add(make_group("svc", min_count=None), pod_count=0, now=0.0)
    assert queue.pop(0.0) is None
    queue.set_pod_count("ml/svc", 1, now=0.0)
    assert drain(queue, 0.0) == ["svc"]


@pytest.mark.parametrize(
    ("attempts", "seconds"), [(1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0), (10, 300.0), (50, 300.0)]
)
def test_backoff_starts_at_one_second_and_doubles_up_to_five_minutes(attempts: int, seconds: float) -> None:
    assert backoff_seconds(attempts) == seconds


def test_an_unschedulable_group_parks_until_an_event_and_then_backs_off() -> None:
    queue = queue_with(make_group("g"))
    fail(queue, "g", now=10.0)
    assert queue.state("ml/g") == QueueState.PARKED
    assert queue.pop(20.0) is None

    assert queue.on_event(ClusterEvent.POD_FINISHED, now=20.0) == 1
    assert drain(queue, 20.0) == ["g"]


def test_an_event_during_backoff_waits_for_the_backoff_to_end() -> None:
    queue = queue_with(make_group("g"))
    fail(queue, "g", now=0.0)
    group = queue.pop(0.0)
    assert group is None
    queue.on_event(ClusterEvent.NODE_ADDED, now=0.5)
    assert queue.state("ml/g") == QueueState.BACKING_OFF
    assert queue.pop(0.9) is None
    assert drain(queue, 1.0) == ["g"]


def test_backoff_doubles_with_every_unschedulable_attempt() -> None:
    queue = queue_with(make_group("g"))
    now = 0.0
    for wait in (1.0, 2.0, 4.0):
        fail(queue, "g", now)
        queue.on_event(ClusterEvent.CAPACITY_FREED, now=now)
        assert queue.pop(now + wait - 0.01) is None
        now += wait
    assert drain(queue, now) == ["g"]


def test_an_event_during_the_cycle_sends_a_failed_group_to_backoff_not_parking() -> None:
    queue = queue_with(make_group("g"))
    group = queue.pop(0.0)
    assert group is not None
    queue.on_event(ClusterEvent.POD_EVICTED, now=0.1)

    queue.done(decision_for(group, placed=False), now=0.2)

    assert queue.state("ml/g") == QueueState.BACKING_OFF
    assert drain(queue, 1.2) == ["g"]


def test_a_parked_group_is_retried_after_five_minutes_without_an_event() -> None:
    queue = queue_with(make_group("g"))
    fail(queue, "g", now=0.0)

    assert queue.pop(299.0) is None
    assert drain(queue, 300.0) == ["g"]


def test_a_placed_group_leaves_the_queue() -> None:
    queue = queue_with(make_group("g"))
    group = queue.pop(0.0)
    assert group is not None

    queue.done(decision_for(group, placed=True), now=0.0)

    assert "ml/g" not in queue


def test_a_placed_group_with_pods_left_over_keeps_its_domain_for_them() -> None:
    queue = queue_with(make_group("g"))
    group = queue.pop(0.0)
    assert group is not None

    queue.done(decision_for(group, placed=True, unplaced=("uid-extra",)), now=0.0)

    kept = queue.group("ml/g")
    assert kept is not None
    assert kept.assigned_domain == TopologyDomainRef("rack", "r1")
    assert queue.state("ml/g") == QueueState.PARKED


def test_a_gang_unschedulable_longer_than_max_pending_seconds_times_out() -> None:
    queue = queue_with(make_group("g", max_pending_seconds=60.0), make_group("patient"))
    fail(queue, "g", now=0.0, message="0/5 nodes are available: 5 Insufficient nvidia.com/gpu.")
    fail(queue, "patient", now=0.0)

    assert queue.expire(59.0) == []
    timed_out = queue.expire(61.0)

    assert [t.podgroup for t in timed_out] == ["ml/g"]
    assert timed_out[0].message == (
        "gave up after 61 s pending (podway.io/max-pending-seconds: 60): "
        "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."
    )
    assert "ml/g" not in queue
    assert "ml/patient" in queue


def test_a_group_in_flight_at_its_deadline_times_out_after_its_cycle() -> None:
    queue = queue_with(make_group("g", max_pending_seconds=10.0))
    fail(queue, "g", now=0.0)
    queue.on_event(ClusterEvent.NODE_ADDED, now=5.0)
    group = queue.pop(5.0)
    assert group is not None

    assert queue.expire(11.0) == []
    queue.done(decision_for(group, placed=False), now=12.0)
    assert [t.podgroup for t in queue.expire(12.0)] == ["ml/g"]


def test_the_next_wakeup_is_the_earliest_backoff_or_deadline() -> None:
    queue = queue_with(make_group("g", max_pending_seconds=0.5))
    fail(queue, "g", now=0.0)
    queue.on_event(ClusterEvent.NODE_ADDED, now=0.0)

    assert queue.next_wakeup() == 0.5


def test_a_changed_priority_reorders_an_active_group() -> None:
    queue = queue_with(make_group("a"), make_group("b"))
    queue.add(replace(make_group("b"), priority=5), pod_count=4, now=0.0)

    assert drain(queue, 0.0) == ["b", "a"]


def test_a_group_added_after_its_workload_was_deleted_waits_again() -> None:
    queue = SchedulingQueue()
    queue.add_workload("ml", "train", now=0.0)
    queue.remove_workload("ml", "train")

    queue.add(make_group("g", workload="train"), pod_count=4, now=0.0)

    assert queue.pop(0.0) is None
    assert queue.state("ml/g") == QueueState.GATED


SHAPE = PodRequest("u", "p", 8000, 0, {"gpu": 8}).shape


def fail_needing(queue: SchedulingQueue, name: str, now: float, shapes=(SHAPE,)) -> None:
    group = queue.pop(now)
    assert group is not None
    assert group.name == name
    need = Unschedulable(
        "no room", {}, ResourceTotals(), 4, None, ResourceTotals(4, 0, 0, {"gpu": 32}), shapes
    )
    queue.done(CycleDecision(group.key, (), (), None, (), need, now), now=now)


def test_a_hint_moves_only_as_many_parked_groups_alike_as_it_allows_most_important_first() -> None:
    queue = queue_with(make_group("low"), make_group("high", priority=10), make_group("mid", priority=5))
    for name in ("high", "mid", "low"):
        fail_needing(queue, name, 0.0)
    asked: list[str] = []

    def room_for(group: PodGroup, need: Unschedulable) -> int:
        asked.append(group.name)
        return 2

    assert queue.wake(5.0, room_for) == 2

    assert len(asked) == 1  # one question for the three groups alike
    assert queue.state("ml/low") == QueueState.PARKED
    assert drain(queue, 5.0) == ["high", "mid"]


def test_a_hint_that_allows_none_leaves_every_group_parked_and_no_hint_moves_them_all() -> None:
    queue = queue_with(make_group("a"), make_group("b"))
    fail_needing(queue, "a", 0.0)
    fail(queue, "b", 0.0)  # an unschedulable reason without shapes: any hint moves it

    assert queue.wake(5.0, lambda group, need: 0) == 1
    assert queue.state("ml/a") == QueueState.PARKED
    assert queue.wake(5.0) == 1
    assert drain(queue, 5.0) == ["a", "b"]


def test_groups_with_different_needs_are_asked_apart() -> None:
    other = PodRequest("u", "p", 4000, 0, {"gpu": 2}).shape
    queue = queue_with(make_group("big"), make_group("small"))
    fail_needing(queue, "big", 0.0)
    fail_needing(queue, "small", 0.0, shapes=(other,))

    moved = queue.wake(5.0, lambda group, need: 1 if need.shapes == (other,) else 0)

    assert moved == 1
    assert drain(queue, 5.0) == ["small"]


def test_a_group_waiting_for_quota_stays_gated_through_events_and_time_until_quota_may_be_free() -> None:
    queue = queue_with(make_group("g"))
    group = queue.pop(0.0)
    assert group is not None
    queue.wait_for_quota(group.key, "waiting for quota in ClusterQueue team-a: no room")

    assert queue.gate_reason("ml/g") == "waiting for quota in ClusterQueue team-a: no room"
    assert queue.wake(10.0) == 0
    queue.add(make_group("g"), pod_count=4, now=10.0)
    assert queue.pop(3600.0) is None

    assert queue.end_quota_waits(3600.0) == 1
    assert queue.gate_reason("ml/g") is None
    assert drain(queue, 3600.0) == ["g"]
    assert queue.end_quota_waits(3600.0) == 0
