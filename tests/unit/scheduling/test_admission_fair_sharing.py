"""Admission fair sharing in the scheduler: in a ClusterQueue with `UsageBasedAdmissionFairSharing`, the gang
of the LocalQueue that used the least lately is admitted first; usage decays, is sampled, written to the
LocalQueues' status and restored from it."""

from __future__ import annotations

from typing import Any

import pytest

from libs.core.quota.admission_fair_sharing import AdmissionFairSharing
from libs.core.scheduling import MachineSettings, PodPhase
from libs.core.scheduling.inputs import World
from libs.core.scheduling.outputs import CycleRan, LocalQueuesSampled
from tests.unit.scheduling.conftest import SMALL, Clock, Machine
from tests.unit.scheduling.manifests import cluster, cluster_queue, flavor, quota_objects, team_gang

HALF_LIFE_S, SAMPLING_S = 600.0, 60.0
AFS = AdmissionFairSharing(half_life_s=HALF_LIFE_S, sampling_interval_s=SAMPLING_S)


def shared_queue(mode: str | None = "UsageBasedAdmissionFairSharing") -> dict[str, Any]:
    queue = cluster_queue("shared", 16)
    if mode is not None:
        queue["spec"]["admissionScope"] = {"admissionMode": mode}
    return queue


def local_queue(namespace: str, *, status: dict[str, Any] | None = None, weight: str | None = None):
    doc: dict[str, Any] = {
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {"clusterQueue": "shared"},
    }
    if weight is not None:
        doc["spec"]["fairSharing"] = {"weight": weight}
    if status is not None:
        doc["status"] = status
    return doc


def machine(clock: Clock, afs: AdmissionFairSharing | None = AFS, *queues: dict[str, Any]) -> Machine:
    scheduler = Machine(clock, MachineSettings(admission_fair_sharing=afs))
    objects = queues or (shared_queue(), local_queue("a"), local_queue("b"))
    scheduler.load(World(cluster(SMALL) + quota_objects(flavor(), *objects), {}), now=clock.now)
    return scheduler


def placed(ran: list[Any]) -> list[str]:
    return [r.group.name for r in ran if isinstance(r, CycleRan) and r.decision.placed]


def after_team_a_used_the_queue(scheduler: Machine, clock: Clock) -> list[Any]:
    """Team a holds the whole queue for 20 minutes; then a gang of team a and, later, one of team b wait for
    it; team a's first gang ends. What the passes from then on ran."""
    first = team_gang("a-first", "a", 2)
    scheduler.admit(*first)
    assert placed(scheduler.run()) == ["a-first"]
    for _ in range(20):
        clock.now += SAMPLING_S
        scheduler.run()
    scheduler.admit(*team_gang("a-next", "a", 2))
    clock.now += 1
    scheduler.admit(*team_gang("b-next", "b", 2))
    scheduler.run()
    scheduler.finish([pod.uid for pod in first[1:]], PodPhase.SUCCEEDED)
    ran: list[Any] = []
    for _ in range(3):
        ran += scheduler.run()
    return ran


def test_the_local_queue_that_used_less_is_admitted_first(clock: Clock) -> None:
    scheduler = machine(clock)

    ran = after_team_a_used_the_queue(scheduler, clock)

    assert placed(ran) == ["b-next"]
    assert scheduler.quotas.local_queue_usage("a/default") > scheduler.quotas.local_queue_usage("b/default")
    waited = [r.quota_message for r in ran if isinstance(r, CycleRan) and r.group.name == "a-next"]
    assert waited
    assert waited[0].startswith(
        "admission fair sharing: LocalQueue b/default used less of ClusterQueue shared lately ("
    )
    assert waited[0].endswith(" for a/default), so b/b-next goes first")


@pytest.mark.parametrize(
    ("afs", "mode"),
    [(None, "UsageBasedAdmissionFairSharing"), (AFS, "NoAdmissionFairSharing"), (AFS, None)],
    ids=["not-configured", "no-admission-fair-sharing", "no-admission-scope"],
)
def test_without_admission_fair_sharing_the_earlier_gang_goes_first(
    clock: Clock, afs: AdmissionFairSharing | None, mode: str | None
) -> None:
    scheduler = machine(clock, afs, shared_queue(mode), local_queue("a"), local_queue("b"))

    assert placed(after_team_a_used_the_queue(scheduler, clock)) == ["a-next"]


def test_a_heavier_local_queue_counts_its_usage_for_less(clock: Clock) -> None:
    scheduler = machine(clock, AFS, shared_queue(), local_queue("a", weight="100"), local_queue("b"))
    before = team_gang("b-before", "b", 1)
    scheduler.admit(*before)
    scheduler.run()
    for _ in range(5):
        clock.now += SAMPLING_S
        scheduler.run()
    scheduler.finish([pod.uid for pod in before[1:]], PodPhase.SUCCEEDED)
    scheduler.run()

    assert placed(after_team_a_used_the_queue(scheduler, clock)) == ["a-next"]


def test_usage_is_sampled_into_the_local_queues_status_and_decays(clock: Clock) -> None:
    scheduler = machine(clock)
    gang = team_gang("a-first", "a", 2)
    scheduler.admit(*gang)
    scheduler.run()
    clock.now += SAMPLING_S
    (sampled,) = [r for r in scheduler.run() if isinstance(r, LocalQueuesSampled)]
    ((namespace, name, status),) = sampled.statuses
    assert (namespace, name) == ("a", "default")
    held = float(status["consumedResources"]["nvidia.com/gpu"])
    assert 0 < held < 16, "a decayed average of the 16 GPUs held"
    rising = scheduler.quotas.local_queue_usage("a/default")
    scheduler.finish([pod.uid for pod in gang[1:]], PodPhase.SUCCEEDED)
    for _ in range(10):
        clock.now += SAMPLING_S
        scheduler.run()
    assert scheduler.quotas.local_queue_usage("a/default") < rising / 2, "ten minutes: more than a half-life"
    assert scheduler.next_wakeup() == clock.now + SAMPLING_S, "the next sample is a wake-up"


def test_a_new_scheduler_restores_the_usage_written_in_the_local_queues_status(clock: Clock) -> None:
    written = {
        "fairSharing": {
            "admissionFairSharingStatus": {
                "consumedResources": {"nvidia.com/gpu": "12", "cpu": "4"},
                "lastUpdate": "1970-01-01T00:16:00Z",
            }
        }
    }
    scheduler = machine(clock, AFS, shared_queue(), local_queue("a", status=written), local_queue("b"))

    assert scheduler.quotas.usage is not None
    entry = scheduler.quotas.usage.entries["a/default"]
    assert entry.consumed == {"nvidia.com/gpu": 12.0, "cpu": 4000.0}
    assert entry.last_update == 960.0
    assert scheduler.quotas.local_queue_usage("a/default") == pytest.approx(16.0)
    assert scheduler.quotas.local_queue_usage("b/default") == 0.0


def test_a_sample_wakes_gangs_waiting_for_quota_only_when_usage_decides_between_them(clock: Clock) -> None:
    scheduler = machine(clock)
    first = team_gang("a-first", "a", 2)
    scheduler.admit(*first)
    scheduler.run()
    scheduler.admit(*team_gang("a-next", "a", 2))
    scheduler.run()
    for _ in range(3):  # one LocalQueue waits: a sample changes nothing for it
        clock.now += SAMPLING_S
        assert [r for r in scheduler.run() if isinstance(r, CycleRan)] == []
    scheduler.admit(*team_gang("b-next", "b", 2))
    scheduler.run()
    clock.now += SAMPLING_S
    woken = {r.group.name for r in scheduler.run() if isinstance(r, CycleRan)}
    assert woken == {"a-next", "b-next"}, "two LocalQueues wait: the new order is tried"
