"""Bindings are current holds: they go with their pods, a pod deleted while it is scheduled is skipped, a pod
that ended is released; and an object's resource version moves on with everything a reader sees of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import insert, text

from libs.db import migrate
from libs.db.engine import create_engine, create_session_factory
from libs.db.records import Condition, Fence, ObjectDraft, PodBinding
from libs.db.schema import leases, objects, pod_bindings
from libs.db.uow import SqlAlchemyUnitOfWork, unit_of_work_factory
from tests.conftest import FakeClock
from tests.integration.db.builders import T0, make_draft, make_pod

UowFactory = Callable[[], SqlAlchemyUnitOfWork]


def binding(pod_uid: str, node: str = "node-a") -> PodBinding:
    return PodBinding(pod_uid=pod_uid, node_name=node, podgroup_uid="pg-1", bound_at=T0)


async def leader(uow_factory: UowFactory, clock: FakeClock) -> Fence:
    async with uow_factory() as uow:
        lease = await uow.leases.acquire_or_renew("scheduler", "a", clock.now, timedelta(seconds=15))
        await uow.commit()
    assert lease is not None
    return lease.fence


async def create(uow_factory: UowFactory, *uids: str) -> None:
    async with uow_factory() as uow:
        await uow.objects.create_many([make_pod(uid) for uid in uids])
        await uow.commit()


async def test_a_deleted_pods_binding_goes_with_it(uow_factory: UowFactory, fake_clock: FakeClock) -> None:
    fence = await leader(uow_factory, fake_clock)
    await create(uow_factory, "pod-1", "pod-2")
    async with uow_factory() as uow:
        await uow.bindings.bind_many([binding("pod-1"), binding("pod-2")], fence=fence)
        await uow.commit()

    async with uow_factory() as uow:
        assert await uow.objects.delete("Pod", "ml", "pod-1")
        await uow.commit()

    async with uow_factory() as uow:
        assert [b.pod_uid for b in await uow.bindings.list_for_podgroup("pg-1")] == ["pod-2"]


async def test_binding_skips_a_pod_deleted_while_it_was_scheduled_and_says_which(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    fence = await leader(uow_factory, fake_clock)
    await create(uow_factory, "pod-1", "pod-3")

    async with uow_factory() as uow:
        skipped = await uow.bindings.bind_many(
            [binding("pod-1"), binding("pod-2"), binding("pod-3")], fence=fence
        )
        await uow.commit()

    assert skipped == ["pod-2"]
    async with uow_factory() as uow:
        assert [b.pod_uid for b in await uow.bindings.list_for_podgroup("pg-1")] == ["pod-1", "pod-3"]


async def test_binding_a_pod_moves_its_resource_version_on(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    fence = await leader(uow_factory, fake_clock)
    await create(uow_factory, "pod-1")

    async with uow_factory() as uow:
        assert await uow.bindings.bind_many([binding("pod-1")], fence=fence) == []
        await uow.commit()

    async with uow_factory() as uow:
        pod = await uow.objects.get("Pod", "ml", "pod-1")
    assert pod is not None
    assert pod.resource_version == 2


async def test_the_bindings_of_pods_that_ended_are_released(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    fence = await leader(uow_factory, fake_clock)
    await create(uow_factory, "pod-1", "pod-2", "pod-3")
    async with uow_factory() as uow:
        await uow.bindings.bind_many([binding(u) for u in ("pod-1", "pod-2", "pod-3")], fence=fence)
        await uow.commit()

    async with uow_factory() as uow:
        assert await uow.bindings.release_many(["pod-1", "pod-3", "pod-9"]) == 2
        await uow.commit()

    async with uow_factory() as uow:
        assert [b.pod_uid for b in await uow.bindings.get_many(["pod-1", "pod-2", "pod-3"])] == ["pod-2"]


def condition(uid: str, status: str, message: str = "") -> Condition:
    return Condition(uid, "PodGroupScheduled", status, "scheduler", "Unschedulable", message, 1)


async def test_a_changed_condition_moves_its_objects_resource_version_on_and_the_same_one_does_not(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        (group,) = await uow.objects.create_many([make_draft("g", uid="pg-1")])
        await uow.commit()

    versions = []
    for written in (
        condition("pg-1", "False", "0/64 nodes are available"),
        condition("pg-1", "False", "0/64 nodes are available"),
        condition("pg-1", "False", "1/64 nodes are available"),
    ):
        async with uow_factory() as uow:
            await uow.conditions.set_many([written])
            await uow.commit()
        async with uow_factory() as uow:
            stored = await uow.objects.get("PodGroup", "ml", "g")
            assert stored is not None
            versions.append(stored.resource_version)

    assert group.resource_version == 1
    assert versions == [2, 2, 3]


async def test_pods_waiting_for_a_v135_workload_are_found_by_its_name(uow_factory: UowFactory) -> None:
    def waiting(name: str, namespace: str, workload: str) -> ObjectDraft:
        annotations = {"podway.io/workload-ref-name": workload, "podway.io/workload-ref-pod-group": "w"}
        return dataclasses.replace(make_pod(name), namespace=namespace, metadata={"annotations": annotations})

    async with uow_factory() as uow:
        await uow.objects.create_many(
            [
                waiting("a", "ml", "train"),
                waiting("b", "ml", "other"),
                waiting("c", "dev", "train"),
                make_pod("d"),
            ]
        )
        await uow.commit()

    async with uow_factory() as uow:
        assert [p.name for p in await uow.objects.find_awaiting_workloads([("ml", "train")])] == ["a"]
        both = await uow.objects.find_awaiting_workloads([("ml", "train"), ("dev", "train"), ("ml", "none")])
        assert [(p.namespace, p.name) for p in both] == [("dev", "c"), ("ml", "a")]


async def test_the_migration_releases_bindings_that_hold_nothing(empty_database_url: str) -> None:
    await migrate.upgrade(empty_database_url, "0001_initial")
    engine = create_engine(empty_database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                insert(leases).values(name="scheduler", holder="a", epoch=1, expires_at=T0, acquired_at=T0)
            )
            for uid, phase in (("running", "Running"), ("done", "Succeeded")):
                await connection.execute(
                    insert(objects).values(
                        uid=uid,
                        kind="Pod",
                        api_version="v1",
                        namespace="ml",
                        name=uid,
                        generation=1,
                        resource_version=1,
                        spec={},
                        metadata={},
                        status={"phase": phase},
                        created_at=T0,
                        updated_at=T0,
                    )
                )
            for uid in ("running", "done", "gone"):
                await connection.execute(
                    insert(pod_bindings).values(
                        pod_uid=uid,
                        node_name="n",
                        podgroup_uid=None,
                        lease_name="scheduler",
                        epoch=1,
                        bound_at=T0,
                    )
                )

        await migrate.upgrade(empty_database_url)

        async with engine.connect() as connection:
            left = (await connection.execute(text("SELECT pod_uid FROM pod_bindings"))).scalars().all()
        assert left == ["running"]
        uow_factory = unit_of_work_factory(create_session_factory(engine))
        async with uow_factory() as uow:
            assert await uow.objects.delete("Pod", "ml", "running")
            await uow.commit()
        async with uow_factory() as uow:
            assert await uow.bindings.get("running") is None
    finally:
        await engine.dispose()
