"""Queue status as Kueue writes it: usage per flavor with what is borrowed, pending and admitted counts, the
fair-sharing weighted share, and the Active condition."""

from __future__ import annotations

import math
from decimal import Decimal

from libs.core.quota import LocalQueueQuota, QueuedWorkload, QueueStatuses, dominant_resource_share
from libs.core.quota.fair_sharing import MAX_WEIGHTED_SHARE
from libs.core.quota.snapshot import COHORT, Node
from tests.unit.quota.builders import GPU, make_cohort, make_queue, running, snapshot

TEAM_A = LocalQueueQuota("team-a", "default", "team-a")
TEAM_B = LocalQueueQuota("team-b", "default", "team-b")


def admitted(name: str, queue: LocalQueueQuota = TEAM_A) -> QueuedWorkload:
    return QueuedWorkload(name, queue.key, queue.cluster_queue, admitted=True)


def pending(name: str, queue: LocalQueueQuota = TEAM_A) -> QueuedWorkload:
    return QueuedWorkload(name, queue.key, queue.cluster_queue, admitted=False)


def statuses(queues, workloads=(), queued=(), local_queues=(TEAM_A, TEAM_B), **kwargs) -> QueueStatuses:
    return QueueStatuses(snapshot(queues, workloads, **kwargs), local_queues, queued)


def gpu_usage(status: dict, flavor: str = "a100") -> dict:
    (usage,) = [f for f in status["flavorsUsage"] if f["name"] == flavor]
    (gpu,) = usage["resources"]
    assert gpu["name"] == GPU
    return gpu


def active(status: dict) -> tuple[str, str, str]:
    (condition,) = status["conditions"]
    assert condition["type"] == "Active"
    return condition["status"], condition["reason"], condition["message"]


def test_a_queue_that_borrows_shows_what_it_uses_past_its_nominal_quota_as_borrowed():
    shown = statuses(
        [make_queue("team-a", 4), make_queue("team-b", 4)], [running("a-1", "team-a", 6)], [admitted("a-1")]
    )

    assert gpu_usage(shown.cluster_queue("team-a")) == {"name": GPU, "total": "6", "borrowed": "2"}
    assert gpu_usage(shown.cluster_queue("team-b")) == {"name": GPU, "total": "0", "borrowed": "0"}


def test_reservation_and_usage_list_every_flavor_and_covered_resource_in_the_queues_order():
    queue = make_queue("team-a", {"h100": 4, "a100": 4})
    status = statuses([queue], [running("a-1", "team-a", 3, flavor="a100")], [admitted("a-1")]).cluster_queue(
        "team-a"
    )

    assert status["flavorsReservation"] == status["flavorsUsage"]
    assert [f["name"] for f in status["flavorsUsage"]] == ["h100", "a100"]
    assert gpu_usage(status, "h100")["total"] == "0"
    assert gpu_usage(status, "a100")["total"] == "3"


def test_a_queue_without_a_cohort_borrows_nothing_even_over_its_quota():
    alone = make_queue("team-a", 4, cohort=None)
    status = statuses([alone], [running("a-1", "team-a", 6)], [admitted("a-1")]).cluster_queue("team-a")

    assert gpu_usage(status) == {"name": GPU, "total": "6", "borrowed": "0"}
    assert status["fairSharing"] == {"weightedShare": 0}


def test_pending_workloads_are_those_waiting_and_admitted_those_holding_quota():
    shown = statuses(
        [make_queue("team-a", 8), make_queue("team-b", 8)],
        [running("a-1", "team-a", 2), running("a-2", "team-a", 3), running("b-1", "team-b", 1)],
        [admitted("a-1"), admitted("a-2"), pending("a-3"), admitted("b-1", TEAM_B), pending("b-2", TEAM_B)],
    )

    counts = ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")
    assert [shown.cluster_queue("team-a")[c] for c in counts] == [1, 2, 2]
    assert [shown.cluster_queue("team-b")[c] for c in counts] == [1, 1, 1]
    assert [shown.local_queue("team-a", "default")[c] for c in counts] == [1, 2, 2]


def test_a_local_queue_shows_the_usage_of_its_own_workloads_only():
    other = LocalQueueQuota("research", "default", "team-a")
    shown = statuses(
        [make_queue("team-a", 8)],
        [running("a-1", "team-a", 2), running("r-1", "team-a", 5)],
        [admitted("a-1"), admitted("r-1", other), pending("r-2", other)],
        local_queues=(TEAM_A, other),
    )

    mine = shown.local_queue("team-a", "default")
    theirs = shown.local_queue("research", "default")

    assert mine["flavorsUsage"] == [{"name": "a100", "resources": [{"name": GPU, "total": "2"}]}]
    assert theirs["flavorsReservation"] == [{"name": "a100", "resources": [{"name": GPU, "total": "5"}]}]
    assert (mine["pendingWorkloads"], theirs["pendingWorkloads"]) == (0, 1)
    assert gpu_usage(shown.cluster_queue("team-a"))["total"] == "7"


def test_the_weighted_share_is_the_dominant_resource_share_rounded_up():
    # team-a borrows 2 of the 8 GPUs the cohort could lend it: 250 per mille, divided by its weight 3.
    queues = [make_queue("team-a", 4, weight=Decimal(3)), make_queue("team-b", 4)]
    shown = statuses(queues, [running("a-1", "team-a", 6)], [admitted("a-1")])

    share = dominant_resource_share(shown.snapshot, shown.snapshot.cluster_queue_node("team-a"))
    assert share.weighted == 250 / 3
    assert shown.cluster_queue("team-a")["fairSharing"] == {"weightedShare": math.ceil(250 / 3)}
    assert shown.cluster_queue("team-b")["fairSharing"] == {"weightedShare": 0}


def test_a_zero_weight_that_borrows_reports_the_largest_share():
    shown = statuses(
        [make_queue("team-a", 4, weight=Decimal(0)), make_queue("team-b", 4)], [running("a-1", "team-a", 5)]
    )

    assert shown.cluster_queue("team-a")["fairSharing"] == {"weightedShare": MAX_WEIGHTED_SHARE}


def test_a_cohort_shows_its_share_of_what_its_parent_lends():
    # research holds 4 of its own and borrows 2 of the 8 the root could lend it (4 of its own, 4 of ops).
    shown = statuses(
        [make_queue("team-a", 4), make_queue("team-ops", 4, cohort="root")],
        [running("a-1", "team-a", 6)],
        cohorts=[make_cohort("research", parent="root"), make_cohort("root")],
    )

    share = dominant_resource_share(shown.snapshot, Node(COHORT, "research"))
    assert shown.cohort("research") == {"fairSharing": {"weightedShare": share.weighted_share}}
    assert share.weighted_share == 250
    assert shown.cohort("root") == {"fairSharing": {"weightedShare": 0}}
    assert shown.cohort("nowhere") == {}


def test_an_active_queue_can_admit_new_workloads():
    shown = statuses([make_queue("team-a", 4)])

    assert active(shown.cluster_queue("team-a")) == ("True", "Ready", "Can admit new workloads")
    assert active(shown.local_queue("team-a", "default")) == (
        "True",
        "Ready",
        "Can submit new workloads to localQueue",
    )


def test_a_stopped_queue_with_a_missing_flavor_says_both_and_its_first_reason():
    stopped = make_queue("team-a", {"a100": 4, "b200": 4}, stopped=True)

    status = statuses([stopped]).cluster_queue("team-a")

    assert active(status) == (
        "False",
        "Stopped",
        "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): b200.",
    )


def test_a_queue_with_a_missing_flavor_is_inactive_and_so_are_its_local_queues():
    shown = statuses([make_queue("team-a", 4)], flavors=("h100",))

    assert active(shown.cluster_queue("team-a")) == (
        "False",
        "FlavorNotFound",
        "Can't admit new workloads: references missing ResourceFlavor(s): a100.",
    )
    assert active(shown.local_queue("team-a", "default")) == (
        "False",
        "ClusterQueueIsInactive",
        "Can't submit new workloads to clusterQueue",
    )


def test_a_queue_in_a_cohort_cycle_is_inactive():
    cycle = [make_cohort("research", parent="ops"), make_cohort("ops", parent="research")]

    status = statuses([make_queue("team-a", 4)], cohorts=cycle).cluster_queue("team-a")

    assert active(status)[:2] == ("False", "CohortHasCycle")


def test_a_local_queue_stopped_or_without_its_cluster_queue_is_inactive():
    stopped = LocalQueueQuota("team-a", "paused", "team-a", stopped=True)
    orphan = LocalQueueQuota("team-c", "default", "team-c")
    shown = statuses(
        [make_queue("team-a", 4)], local_queues=(stopped, orphan), queued=[pending("c-1", orphan)]
    )

    assert active(shown.local_queue("team-a", "paused")) == ("False", "Stopped", "LocalQueue is stopped")
    orphaned = shown.local_queue("team-c", "default")
    assert active(orphaned)[:2] == ("False", "ClusterQueueDoesNotExist")
    assert "flavorsUsage" not in orphaned
    assert orphaned["pendingWorkloads"] == 1
    assert shown.local_queue("team-a", "default") == {}
    assert shown.cluster_queue("team-c") == {}
