"""A pass's outputs written in one transaction: events in causal order, bindings, condition, placement;
and the world a new leader loads."""

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from libs.api.models.kueue import QUEUE_NAME_LABEL
from libs.cluster.generator import ClusterShape
from libs.core.scheduling import RACK_KEY, PodPhase, SchedulerStateMachine
from libs.core.scheduling.inputs import ClaimsAllocationFailed, ObjectStored, PodsFinished, World
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import Binding, Disrupted, GroupRef, QuotaReleased, Restart
from libs.db.errors import StaleEpochError
from libs.db.records import Condition, Nomination, ObjectDraft
from libs.db.testing import in_memory_unit_of_work_factory
from services.scheduler.store import load_world, write_outputs
from tests.unit.scheduling.manifests import cluster, gang, pod, podgroup, workload

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SMALL = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2)


@pytest.fixture
async def uow_factory():
    async with in_memory_unit_of_work_factory(clock=lambda: NOW) as factory:
        yield factory


async def store(uow_factory, objects: list[ApiObject]) -> None:
    async with uow_factory() as uow:
        for obj in objects:
            await uow.objects.upsert(
                ObjectDraft(
                    kind=obj.kind,
                    api_version="v1",
                    namespace=obj.namespace,
                    name=obj.name,
                    spec=dict(obj.spec),
                    metadata=dict(obj.metadata),
                    status=dict(obj.status),
                    uid=obj.uid,
                )
            )
        await uow.commit()


async def lease(uow_factory, holder: str = "a"):
    async with uow_factory() as uow:
        taken = await uow.leases.acquire_or_renew("scheduler", holder, NOW, timedelta(seconds=10))
        await uow.commit()
    assert taken is not None
    return taken.fence


async def write(uow_factory, outcomes, fence) -> int:
    async with uow_factory() as uow:
        bound = await write_outputs(uow, outcomes, fence=fence, now=NOW)
        await uow.commit()
    return bound


def scheduled_world(objects: list[ApiObject]) -> SchedulerStateMachine:
    world = SchedulerStateMachine()
    world.load(World(objects, {}), now=NOW.timestamp())
    return world


async def test_a_bound_gang_writes_one_pods_bound_its_bindings_condition_and_placement(uow_factory):
    group = podgroup("g", min_count=4, topology_key=RACK_KEY)
    objects = [*cluster(SMALL), workload(), group, *gang("g", 4, gpus=2)]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)
    outcomes = scheduled_world(objects).run_pass(NOW.timestamp())

    assert await write(uow_factory, outcomes, fence) == 4

    async with uow_factory() as uow:
        story = [e.envelope for e in await uow.events.by_correlation(group.uid)]
        bindings = await uow.bindings.list_for_podgroup(group.uid)
        condition = await uow.conditions.get(group.uid, "PodGroupScheduled")
        stored = await uow.objects.get("PodGroup", "ml", "g")
    assert [e.type for e in story] == [
        "podgroup.cycle.started",
        "podgroup.cycle.placed",
        "pods.bound",
        "podgroup.scheduled",
    ]
    assert [e.causation_id for e in story[1:]] == [str(e.event_id) for e in story[:-1]]
    assert len(story[2].payload["pods"]) == 4
    assert story[2].payload["epoch"] == fence.epoch
    assert len(bindings) == 4
    assert (condition.status, condition.reason, condition.owner) == ("True", "Scheduled", "scheduler")
    assert stored.status["placement"]["domain"]["key"] == RACK_KEY
    assert len(stored.status["placement"]["pods"]) == 4


async def test_initially_scheduled_keeps_its_first_true_while_the_gang_waits_and_is_placed_again():
    now = [NOW]
    group = podgroup("g", min_count=4)
    objects = [*cluster(SMALL), workload(), group, *gang("g", 4, gpus=2)]
    ref = GroupRef("ml", "g", group.uid)
    async with in_memory_unit_of_work_factory(clock=lambda: now[0]) as factory:
        await store(factory, objects)
        fence = await lease(factory)
        await write(factory, scheduled_world(objects).run_pass(NOW.timestamp()), fence)
        now[0] = NOW + timedelta(minutes=1)
        await write(factory, [Disrupted(ref, "Disrupted", "placed anew")], fence)
        waiting = await _scheduling_conditions(factory, group.uid)
        now[0] = NOW + timedelta(minutes=2)
        await write(
            factory, [Binding(ref, (), None, {"domain": None, "nodes": [], "pods": {}}, first=True)], fence
        )
        again = await _scheduling_conditions(factory, group.uid)

    first = ("True", "Scheduled", NOW)
    assert waiting == {
        "PodGroupScheduled": ("False", "Disrupted", now[0] - timedelta(minutes=1)),
        "first": first,
    }
    assert again == {"PodGroupScheduled": ("True", "Scheduled", now[0]), "first": first}


async def _scheduling_conditions(uow_factory, uid: str) -> dict[str, tuple[str, str, datetime | None]]:
    async with uow_factory() as uow:
        scheduled = await uow.conditions.get(uid, "PodGroupScheduled")
        initially = await uow.conditions.get(uid, "PodGroupInitiallyScheduled")
    return {
        "PodGroupScheduled": (scheduled.status, scheduled.reason, scheduled.last_transition_time),
        "first": (initially.status, initially.reason, initially.last_transition_time),
    }


async def test_an_unschedulable_gang_writes_the_reason_and_a_false_condition(uow_factory):
    group = podgroup("g", min_count=5)
    objects = [*cluster(SMALL), workload(), group, *gang("g", 5, gpus=8)]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)

    await write(uow_factory, scheduled_world(objects).run_pass(NOW.timestamp()), fence)

    async with uow_factory() as uow:
        story = [e.envelope for e in await uow.events.by_correlation(group.uid)]
        condition = await uow.conditions.get(group.uid, "PodGroupScheduled")
    assert [e.type for e in story] == ["podgroup.cycle.started", "podgroup.unschedulable"]
    assert story[1].payload["message"] == (
        "0/4 nodes are available. only 4 of the 5 pods the gang needs fit."
    )
    assert (condition.status, condition.reason) == ("False", "Unschedulable")


async def test_a_pod_without_a_podgroup_that_lower_priority_pods_keep_out_asks_for_preemption(uow_factory):
    lows = [pod(f"low-{i}", gpus=8, priority=5) for i in range(4)]
    high = pod("high", gpus=8, priority=1000)
    objects = [*cluster(SMALL), *lows, high]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)
    world = scheduled_world(objects[:-1])
    await write(uow_factory, world.run_pass(NOW.timestamp()), fence)
    world.handle(ObjectStored(high), now=NOW.timestamp())

    await write(uow_factory, world.run_pass(NOW.timestamp()), fence)

    async with uow_factory() as uow:
        story = [e.envelope for e in await uow.events.by_correlation(high.uid)]
        condition = await uow.conditions.get(high.uid, "PodScheduled")
    assert [e.type for e in story] == ["preemption.requested"]
    assert story[0].payload["podgroup"]["uid"] == high.uid
    assert story[0].payload["priority"] == 1000
    assert story[0].subject.kind == "Pod"
    assert (condition.status, condition.reason) == ("False", "Unschedulable")


async def test_a_binding_under_a_stale_epoch_is_refused(uow_factory):
    objects = [*cluster(SMALL), workload(), podgroup("g", min_count=1), *gang("g", 1)]
    await store(uow_factory, objects)
    stale = await lease(uow_factory, "a")
    async with uow_factory() as uow:
        await uow.leases.release("scheduler", "a", NOW)
        await uow.commit()
    await lease(uow_factory, "b")

    with pytest.raises(StaleEpochError):
        await write(uow_factory, scheduled_world(objects).run_pass(NOW.timestamp()), stale)


async def test_a_new_leader_loads_the_world_with_its_bindings(uow_factory):
    objects = [*cluster(SMALL), workload(), podgroup("g", min_count=2), *gang("g", 2, gpus=8)]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)
    await write(uow_factory, scheduled_world(objects).run_pass(NOW.timestamp()), fence)

    async with uow_factory() as uow:
        world = await load_world(uow, NOW)
    successor = SchedulerStateMachine()
    successor.load(world, now=NOW.timestamp())

    assert len(world.bindings) == 2
    assert successor.run_pass(NOW.timestamp()) == []
    free = sum(node.count("gpu.example.com") for node in successor.snapshot.node_states())
    assert free == 16


async def test_a_new_leader_reads_placed_pods_from_the_placement_and_asks_the_bindings_for_the_rest(
    uow_factory,
):
    placed = gang("placed", 2, gpus=8)
    waiting = gang("waiting", 5, gpus=8)
    objects = [
        *cluster(SMALL), workload(),
        podgroup("placed", min_count=2), *placed,
        podgroup("waiting", min_count=5), *waiting,
    ]  # fmt: skip
    await store(uow_factory, objects)
    fence = await lease(uow_factory)
    await write(uow_factory, scheduled_world(objects).run_pass(NOW.timestamp()), fence)

    async with uow_factory() as uow:
        world = await load_world(uow, NOW)

    assert set(world.bindings) == {pod.uid for pod in placed}


async def test_a_restart_marks_the_evicted_pods_and_a_new_leader_knows_they_are_leaving(uow_factory):
    group = podgroup("g", min_count=2, annotations={"podway.io/gang-restart": "Always"})
    members = gang("g", 2, gpus=8)
    objects = [*cluster(SMALL), workload(), group, *members]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)
    machine = scheduled_world(objects)
    await write(uow_factory, machine.run_pass(NOW.timestamp()), fence)
    machine.handle(PodsFinished((members[0].uid,), PodPhase.FAILED), now=NOW.timestamp())
    (restart,) = machine.run_pass(NOW.timestamp())
    assert isinstance(restart, Restart)

    await write(uow_factory, [restart], fence)

    async with uow_factory() as uow:
        condition = await uow.conditions.get(members[1].uid, "DisruptionTarget")
        world = await load_world(uow, NOW)
    assert (condition.status, condition.reason) == ("True", "GangRestart")
    assert members[1].uid in world.leaving


async def test_a_new_leader_loads_the_nominations_in_force_and_the_pods_being_deleted(uow_factory):
    members = gang("g", 2, gpus=8)
    await store(uow_factory, [*cluster(SMALL), workload(), podgroup("g", min_count=2), *members])
    async with uow_factory() as uow:
        await uow.nominations.put(Nomination("group-uid", ("n1",), NOW + timedelta(seconds=60), NOW))
        await uow.nominations.put(Nomination("expired", ("n2",), NOW - timedelta(seconds=1), NOW))
        await uow.objects.request_deletion("Pod", "ml", members[0].name)
        await uow.commit()

    async with uow_factory() as uow:
        world = await load_world(uow, NOW)

    assert [n.podgroup_uid for n in world.nominations] == ["group-uid"]
    assert world.nominations[0].nodes == ("n1",)
    assert world.leaving == {members[0].uid}
    deleting = next(o for o in world.objects if o.uid == members[0].uid)
    assert deleting.metadata["deletionTimestamp"]


async def test_a_proposal_is_recorded_with_its_placement_and_cleared_when_it_is_refused(uow_factory):
    group = podgroup(
        "g", min_count=2, claims=[{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]
    )
    objects = [*cluster(SMALL), workload(), group, *gang("g", 2, gpus=8)]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)
    machine = scheduled_world(objects)

    await write(uow_factory, machine.run_pass(NOW.timestamp()), fence)
    async with uow_factory() as uow:
        proposed = await uow.objects.get("PodGroup", "ml", "g")
        condition = await uow.conditions.get(group.uid, "PodGroupScheduled")
    machine.handle(ClaimsAllocationFailed(group.uid, "no fabric"), now=NOW.timestamp())
    await write(uow_factory, machine.run_pass(NOW.timestamp()), fence)
    async with uow_factory() as uow:
        refused = await uow.objects.get("PodGroup", "ml", "g")

    assert set(proposed.status["proposal"]["pods"]) == {"g-0", "g-1"}
    assert (condition.status, condition.reason) == ("False", "WaitingForResourceClaims")
    assert "proposal" not in refused.status


async def test_a_pod_without_a_podgroup_waiting_for_its_claims_says_so(uow_factory):
    alone = pod(
        "solo",
        gpus=0,
        cpu="1",
        memory="1Gi",
        claims=[{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}],
    )
    objects = [*cluster(SMALL), workload(), alone]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)
    machine = scheduled_world(objects)

    await write(uow_factory, machine.run_pass(NOW.timestamp()), fence)
    async with uow_factory() as uow:
        condition = await uow.conditions.get(alone.uid, "PodScheduled")

    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "WaitingForResourceClaims")
    assert condition.message == "waiting for ResourceClaims fabric to be allocated"


async def test_quota_released_turns_a_true_quota_reserved_false_and_leaves_any_other_as_it_was(uow_factory):
    held, waiting = podgroup("held"), podgroup("waiting")
    await store(uow_factory, [held, waiting])
    fence = await lease(uow_factory)
    async with uow_factory() as uow:
        for group, status in ((held, "True"), (waiting, "False")):
            await uow.conditions.set(
                Condition(group.uid, "QuotaReserved", status, "scheduler", "Pending", "waiting", 1)
            )
        await uow.commit()

    def released(group: ApiObject, finished: bool) -> QuotaReleased:
        return QuotaReleased(GroupRef(group.namespace, group.name, group.uid, False), "team-a", finished)

    await write(uow_factory, [released(held, True), released(waiting, False)], fence)

    async with uow_factory() as uow:
        turned = await uow.conditions.get(held.uid, "QuotaReserved")
        kept = await uow.conditions.get(waiting.uid, "QuotaReserved")
    assert turned is not None
    assert kept is not None
    assert (turned.status, turned.reason) == ("False", "Finished")
    assert turned.message == "Quota released in ClusterQueue team-a: the gang's pods ended"
    assert (kept.status, kept.reason, kept.message) == ("False", "Pending", "waiting")


async def test_a_gang_queued_to_a_missing_local_queue_is_written_inadmissible_in_kueues_words(uow_factory):
    group = podgroup("g", min_count=2, workload_name=None)
    queued = dataclasses.replace(group, metadata={**group.metadata, "labels": {QUEUE_NAME_LABEL: "research"}})
    objects = [*cluster(SMALL), queued, *gang("g", 2, gpus=1)]
    await store(uow_factory, objects)
    fence = await lease(uow_factory)

    await write(uow_factory, scheduled_world(objects).run_pass(NOW.timestamp()), fence)

    async with uow_factory() as uow:
        reserved = await uow.conditions.get(group.uid, "QuotaReserved")
    assert reserved is not None
    assert (reserved.status, reserved.reason, reserved.message) == (
        "False",
        "Inadmissible",
        "LocalQueue research doesn't exist",
    )
