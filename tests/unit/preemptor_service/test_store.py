"""A preemption written in one transaction: its events in causal order in the right stories, the victims
marked DisruptionTarget, the nomination stored; a nomination's end; a quiet answer to a new term's ask."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from libs.cluster.generator import ClusterShape
from libs.core.preemption import NominationEnded, Preempted, PreemptorStateMachine
from libs.core.scheduling import SchedulerStateMachine
from libs.core.scheduling.inputs import ObjectStored, PodsBound, World
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import Binding, CycleRan
from libs.db.records import ObjectDraft, PodBinding
from libs.db.testing import in_memory_unit_of_work_factory
from libs.events.catalogue import EventType
from services.preemptor.store import load_world, write_outputs
from tests.integration.db.builders import make_envelope
from tests.unit.scheduling.manifests import cluster, gang, pod, podgroup, stored, workload

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SHAPE = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2)
SHARE = {"name": "gpus", "resourceClaimTemplateName": "share"}
HOST = "kubernetes.io/hostname"


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


def preempted(low: ApiObject, lows: list[ApiObject], high: ApiObject, highs: list[ApiObject]) -> Preempted:
    """The preemptor's answer for `high` once the scheduler has bound `low` on every node."""
    world = World(cluster(SHAPE) + [workload()], {})
    scheduler, preemptor = SchedulerStateMachine(), PreemptorStateMachine()
    now = NOW.timestamp()
    for machine in (scheduler, preemptor):
        machine.load(world, now=now)
        for obj in (low, *lows):
            machine.handle(ObjectStored(obj), now=now)
    for output in scheduler.run_pass(now):
        binding = output.bind if isinstance(output, CycleRan) else output
        if isinstance(binding, Binding):
            placed = tuple((p.pod_uid, p.node_name, p.devices) for p in binding.placements)
            preemptor.handle(PodsBound(placed), now=now)
    for obj in (high, *highs):
        preemptor.handle(ObjectStored(obj), now=now)
    preemptor.request(high.uid, "the-request")
    (answer,) = preemptor.run_pass(now)
    assert isinstance(answer, Preempted)
    return answer


async def test_a_preemption_is_told_in_both_stories_and_marks_its_victims(uow_factory):
    low, high = podgroup("low", min_count=4, priority=1), podgroup("high", min_count=1, priority=1000)
    lows, highs = gang("low", 4, gpus=8), gang("high", 1, gpus=8)
    await store(uow_factory, [low, high, *lows, *highs])
    answer = preempted(low, lows, high, highs)

    async with uow_factory() as uow:
        await write_outputs(uow, [answer], now=NOW)
        await uow.commit()

    async with uow_factory() as uow:
        mine = await uow.events.by_correlation(high.uid)
        theirs = await uow.events.by_correlation(low.uid)
        nominations = await uow.nominations.active(NOW)
        marked = await uow.conditions.with_status("DisruptionTarget", "True")
    assert [e.envelope.type for e in mine] == ["preemption.victims_selected", "podgroup.nominated"]
    assert mine[0].envelope.causation_id == "the-request"
    (evicted,) = theirs
    assert evicted.envelope.type == "pods.evicted"
    assert str(evicted.envelope.causation_id) == str(mine[0].envelope.event_id)
    assert "preempted by ml/high (priority 1000)" in evicted.envelope.payload["message"]
    assert {c.object_uid for c in marked} == {low.uid, *(p.uid for p in lows)}
    assert {c.reason for c in marked} == {"PreemptionByScheduler"}
    ((nomination),) = nominations
    assert nomination.podgroup_uid == high.uid


async def test_victims_chosen_for_a_new_terms_ask_answer_the_latest_event_of_the_groups_story(uow_factory):
    low, high = podgroup("low", min_count=4, priority=1), podgroup("high", min_count=1, priority=1000)
    lows, highs = gang("low", 4, gpus=8), gang("high", 1, gpus=8)
    await store(uow_factory, [low, high, *lows, *highs])
    answer = preempted(low, lows, high, highs)
    asked = make_envelope(EventType.PREEMPTION_REQUESTED, correlation_id=high.uid)
    async with uow_factory() as uow:
        uow.emit(asked)  # what an earlier term consumed and never answered
        await uow.commit()

    async with uow_factory() as uow:
        await write_outputs(uow, [dataclasses.replace(answer, cause=None)], now=NOW)
        await uow.commit()

    async with uow_factory() as uow:
        mine = await uow.events.by_correlation(high.uid)
    assert [e.envelope.type for e in mine][1] == "preemption.victims_selected"
    assert mine[1].envelope.causation_id == str(asked.event_id)


async def test_an_answer_to_a_new_terms_ask_with_nothing_to_do_is_not_told(uow_factory):
    low, high = podgroup("low", min_count=4, priority=1000), podgroup("high", min_count=1, priority=1000)
    lows, highs = gang("low", 4, gpus=8), gang("high", 1, gpus=8)
    answer = preempted(low, lows, high, highs)
    assert answer.decision.victims == ()

    async with uow_factory() as uow:
        await write_outputs(uow, [dataclasses.replace(answer, cause=None)], now=NOW)
        await write_outputs(uow, [answer], now=NOW)
        await uow.commit()

    async with uow_factory() as uow:
        told = await uow.events.by_correlation(high.uid)
    assert [e.envelope.type for e in told] == ["preemption.victims_selected"]
    assert told[0].envelope.payload["reason"] == "no running pods have a priority lower than 1000"


async def test_an_expired_nomination_is_cleared_with_an_event(uow_factory):
    low, high = podgroup("low", min_count=4, priority=1), podgroup("high", min_count=1, priority=1000)
    lows, highs = gang("low", 4, gpus=8), gang("high", 1, gpus=8)
    await store(uow_factory, [low, high, *lows, *highs])
    answer = preempted(low, lows, high, highs)
    async with uow_factory() as uow:
        await write_outputs(uow, [answer], now=NOW)
        ended = NominationEnded(answer.preemptor, "Expired", "the room was not taken in time", True)
        await write_outputs(uow, [ended], now=NOW)
        await uow.commit()

    async with uow_factory() as uow:
        told = [e.envelope.type for e in await uow.events.by_correlation(high.uid)]
        left = await uow.nominations.active(NOW)
    assert told[-1] == "podgroup.nomination_cleared"
    assert left == []


async def test_a_new_term_holds_the_share_a_pod_without_a_podgroup_has_from_its_resourceclaim(uow_factory):
    # The claim's record is the only one of the share: a pod without a PodGroup has no placement status.
    node = "zone-0-b0-r0-n00"
    template = stored_template("share", {"cores": "600m"})
    running = pod("s0", gpus=0, cpu="1", claims=[SHARE], node_selector={HOST: node}, phase="Running")
    claim = stored(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "s0-gpus", "namespace": "ml"},
            "spec": {},
            "status": {
                "allocation": {"devices": {"results": [share_result(node, "600m")]}},
                "reservedFor": [{"resource": "pods", "name": "s0", "uid": running.uid}],
            },
        }
    )
    shape = dataclasses.replace(SHAPE, shared_gpus_per_node=1)
    await store(uow_factory, [*cluster(shape), workload(), template, running, claim])
    async with uow_factory() as uow:
        taken = await uow.leases.acquire_or_renew("scheduler", "a", NOW, timedelta(seconds=10))
        assert taken is not None
        await uow.bindings.bind_many([PodBinding(running.uid, node, None, NOW)], fence=taken.fence)
        await uow.commit()

    async with uow_factory() as uow:
        world = await load_world(uow, NOW)
    preemptor = PreemptorStateMachine()
    preemptor.load(world, now=NOW.timestamp())

    consumed = preemptor.cluster.claims.usage.consumed[f"gpu.example.com/{node}/gpu-7"]
    assert consumed["gpu.example.com/cores"] == 600


def stored_template(name: str, capacity: dict[str, str]) -> ApiObject:
    exactly = {"deviceClassName": "gpu.example.com", "capacity": {"requests": capacity}}
    return stored(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
        }
    )


def share_result(node: str, cores: str) -> dict[str, object]:
    return {
        "request": "gpus",
        "driver": "gpu.example.com",
        "pool": node,
        "device": "gpu-7",
        "consumedCapacity": {"gpu.example.com/cores": cores, "gpu.example.com/memory": "0"},
    }


def with_completion_index(pod_obj: ApiObject, index: int) -> ApiObject:
    annotations = {**pod_obj.annotations, "batch.kubernetes.io/job-completion-index": str(index)}
    return dataclasses.replace(pod_obj, metadata={**pod_obj.metadata, "annotations": annotations})


async def test_an_elastic_gang_shrunk_to_its_min_count_is_told_so_and_its_podgroup_is_not_marked(uow_factory):
    low, high = podgroup("low", min_count=2, priority=1), podgroup("high", min_count=1, priority=1000)
    # Completion indexes run against the names: the highest index, 3, is low-0.
    lows = [with_completion_index(p, 3 - i) for i, p in enumerate(gang("low", 4, gpus=8))]
    highs = gang("high", 1, gpus=8)
    await store(uow_factory, [low, high, *lows, *highs])
    answer = preempted(low, lows, high, highs)

    async with uow_factory() as uow:
        await write_outputs(uow, [answer], now=NOW)
        await uow.commit()

    async with uow_factory() as uow:
        (evicted,) = await uow.events.by_correlation(low.uid)
        marked = await uow.conditions.with_status("DisruptionTarget", "True")
    assert [p["name"] for p in evicted.envelope.payload["pods"]] == ["low-0"]
    message = evicted.envelope.payload["message"]
    assert message.startswith("gang shrunk to its minCount 2 (not preempted) by ml/high (priority 1000)")
    assert {c.object_uid for c in marked} == {lows[0].uid}
