"""Elastic gangs in the scheduler state machine: pods added to a scheduled gang join its domain or wait
saying why, and a gang resized down keeps running."""

import dataclasses

from libs.core.scheduling import RACK_KEY, PodPhase
from libs.core.scheduling.inputs import ObjectRemoved
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import CycleRan
from tests.unit.scheduling.conftest import Machine
from tests.unit.scheduling.manifests import gang, pod, podgroup


def resized(group: ApiObject, min_count: int) -> ApiObject:
    """The PodGroup as admission stores it after its minCount was changed."""
    spec = {**group.spec, "schedulingPolicy": {"gang": {"minCount": min_count}}}
    return dataclasses.replace(group, spec=spec, resource_version=group.resource_version + 1)


def racks_of(ran: CycleRan) -> set[str]:
    assert ran.bind is not None
    return {p.node_name.rsplit("-n", 1)[0] for p in ran.bind.placements}


def test_pods_scaled_up_into_a_scheduled_gang_join_its_rack(scheduler: Machine, clock):
    scheduler.admit(podgroup("g", min_count=2, topology_key=RACK_KEY), *gang("g", 2, gpus=4))
    (first,) = scheduler.run_pass(clock.now)
    scheduler.admit(pod("g-2", group="g", gpus=4), pod("g-3", group="g", gpus=4))

    (joined,) = scheduler.run_pass(clock.now)

    assert joined.decision.placed
    assert sorted(p.pod_name for p in joined.bind.placements) == ["g-2", "g-3"]
    assert joined.bind.domain == first.bind.domain
    assert racks_of(joined) == racks_of(first)
    assert not joined.bind.first
    assert joined.joining == ()


def test_a_pod_scaled_up_into_a_full_rack_waits_and_says_the_gangs_domain_is_full(scheduler: Machine, clock):
    # A rack holds 16 GPUs: the gang fills one; the other rack is empty, but the gang may not spread there.
    scheduler.admit(podgroup("g", min_count=2, topology_key=RACK_KEY), *gang("g", 2, gpus=8))
    (first,) = scheduler.run_pass(clock.now)
    extra = pod("g-2", group="g", gpus=8)
    scheduler.admit(extra)

    (waiting,) = scheduler.run_pass(clock.now)

    assert not waiting.decision.placed
    (rack,) = racks_of(first)
    assert waiting.decision.message.endswith(
        f"the gang's {RACK_KEY} domain {rack} cannot hold 1 more pod(s)."
    ), waiting.decision.message
    assert waiting.joining == (extra.uid,)
    assert not waiting.condition_false  # the gang itself stays scheduled
    assert scheduler.book.groups["ml/g"].scheduled


def test_a_waiting_scaled_up_pod_joins_once_its_gangs_rack_has_room(scheduler: Machine, clock):
    scheduler.admit(podgroup("g", min_count=2, topology_key=RACK_KEY), *gang("g", 2, gpus=8))
    (first,) = scheduler.run_pass(clock.now)
    scheduler.admit(pod("g-2", group="g", gpus=8))
    scheduler.run_pass(clock.now)
    leaving = first.bind.placements[1]

    scheduler.handle(ObjectRemoved("Pod", "ml", leaving.pod_name, leaving.pod_uid, "scaled"), now=clock.now)
    clock.now += 1.0
    (joined,) = scheduler.run_pass(clock.now)

    assert [p.pod_name for p in joined.bind.placements] == ["g-2"]
    assert racks_of(joined) == racks_of(first)


def test_a_gang_scaled_down_below_its_old_min_count_keeps_running_and_is_not_restarted(
    scheduler: Machine, clock
):
    group = podgroup("g", min_count=4, annotations={"podway.io/gang-restart": "Always"})
    scheduler.admit(group, *gang("g", 4, gpus=2))
    (ran,) = scheduler.run_pass(clock.now)
    scheduler.admit(resized(group, 2))
    surplus = [p for p in ran.bind.placements if p.pod_name in ("g-2", "g-3")]

    scheduler.finish([p.pod_uid for p in surplus], PodPhase.FAILED, "scaled down")

    assert scheduler.run_pass(clock.now) == []  # no Restart, no Disrupted
    record = scheduler.book.groups["ml/g"]
    assert (record.scheduled, record.min_count, len(record.placed)) == (True, 2, 2)


def test_without_the_resize_the_same_failures_restart_the_gang(scheduler: Machine, clock):
    group = podgroup("g", min_count=4, annotations={"podway.io/gang-restart": "Always"})
    scheduler.admit(group, *gang("g", 4, gpus=2))
    (ran,) = scheduler.run_pass(clock.now)

    scheduler.finish([p.pod_uid for p in ran.bind.placements[2:]], PodPhase.FAILED, "crash")

    assert [type(o).__name__ for o in scheduler.run_pass(clock.now)] == ["Restart"]
