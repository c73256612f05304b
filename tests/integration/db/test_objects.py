"""API objects: optimistic concurrency, generations, label queries, UTC times."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, timedelta

import pytest

from libs.core.admission.model import BatchDecision, ObjectRemoval
from libs.db.errors import ConflictError, NotFoundError
from libs.db.records import Condition, ObjectDraft, PodBinding
from libs.db.repositories.objects import MUST_NOT_EXIST
from libs.db.uow import SqlAlchemyUnitOfWork
from services.admission.store import write_decision
from tests.conftest import FakeClock
from tests.integration.db.builders import T0, make_draft

UowFactory = Callable[[], SqlAlchemyUnitOfWork]


async def test_created_object_reads_back_with_version_one_and_aware_utc_times(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.upsert(make_draft(), expected_resource_version=MUST_NOT_EXIST)
        await uow.commit()
    async with uow_factory() as uow:
        stored = await uow.objects.get("PodGroup", "ml", "train-0")

    assert stored == created
    assert (stored.generation, stored.resource_version) == (1, 1)
    assert stored.created_at.tzinfo is UTC
    assert stored.spec == {"minCount": 2}


async def test_write_with_a_stale_resource_version_is_a_conflict(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        first = await uow.objects.upsert(make_draft())
        await uow.objects.upsert(
            make_draft(spec={"minCount": 3}), expected_resource_version=first.resource_version
        )
        await uow.commit()

    async with uow_factory() as uow:
        with pytest.raises(ConflictError):
            await uow.objects.upsert(make_draft(spec={"minCount": 4}), expected_resource_version=1)
        with pytest.raises(ConflictError):
            await uow.objects.upsert(make_draft(), expected_resource_version=MUST_NOT_EXIST)
        with pytest.raises(ConflictError):
            await uow.objects.upsert(make_draft("absent"), expected_resource_version=7)


async def test_generation_moves_with_the_spec_and_resource_version_with_every_write(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft())
        fake_clock.advance(timedelta(seconds=5))
        same_spec = await uow.objects.upsert(make_draft(labels={"team": "a"}))
        new_spec = await uow.objects.upsert(make_draft(spec={"minCount": 8}))
        status = await uow.objects.update_status(
            "PodGroup", "ml", "train-0", {"phase": "Pending"}, expected_resource_version=3
        )
        await uow.commit()

    assert (same_spec.generation, same_spec.resource_version) == (1, 2)
    assert (new_spec.generation, new_spec.resource_version) == (2, 3)
    assert (status.generation, status.resource_version, status.status) == (2, 4, {"phase": "Pending"})
    assert status.updated_at == fake_clock.now
    assert status.created_at == fake_clock.now - timedelta(seconds=5)


async def test_a_write_at_a_named_version_moves_generation_only_with_the_spec(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with uow_factory() as uow:
        first = await uow.objects.upsert(make_draft(spec={"minCount": 2, "tiers": [1, 2]}))
        fake_clock.advance(timedelta(seconds=5))
        # The same spec, its keys in another order: the same document.
        same_spec = await uow.objects.upsert(
            make_draft(spec={"tiers": [1, 2], "minCount": 2}, labels={"team": "a"}),
            expected_resource_version=first.resource_version,
        )
        new_spec = await uow.objects.upsert(
            make_draft(spec={"minCount": 8, "tiers": [1, 2]}), expected_resource_version=2
        )
        await uow.commit()
    async with uow_factory() as uow:
        stored = await uow.objects.get("PodGroup", "ml", "train-0")

    assert (same_spec.generation, same_spec.resource_version) == (1, 2)
    assert same_spec.metadata["labels"] == {"team": "a"}
    assert (new_spec.generation, new_spec.resource_version, new_spec.spec) == (
        2,
        3,
        {"minCount": 8, "tiers": [1, 2]},
    )
    assert new_spec.uid == first.uid
    assert new_spec.updated_at == fake_clock.now
    assert new_spec.created_at == fake_clock.now - timedelta(seconds=5)
    assert stored is not None
    assert (stored.generation, stored.resource_version, stored.spec) == (2, 3, new_spec.spec)
    assert stored.revision is not None


async def test_replacements_at_versions_are_written_together_or_not_at_all(
    uow_factory: UowFactory, database_url: str
) -> None:
    async with uow_factory() as uow:
        first = await uow.objects.upsert(make_draft("a", spec={"minCount": 1}))
        second = await uow.objects.upsert(make_draft("b", spec={"minCount": 1}))
        await uow.commit()

    async with uow_factory() as uow:
        written = await uow.objects.replace_many_at(
            [
                (make_draft("a", spec={"minCount": 1}, labels={"seen": "yes"}), first.resource_version),
                (make_draft("b", spec={"minCount": 2}), second.resource_version),
            ]
        )
        await uow.commit()
    async with uow_factory() as uow:
        a, b = sorted(
            await uow.objects.get_many([("PodGroup", "ml", "a"), ("PodGroup", "ml", "b")]),
            key=lambda o: o.name,
        )
    assert (a.generation, a.resource_version, a.metadata["labels"]) == (1, 2, {"seen": "yes"})
    assert (b.generation, b.resource_version, b.spec) == (2, 2, {"minCount": 2})
    assert written == [a, b]  # as stored, the store's columns included
    if database_url.startswith("postgresql"):  # revisions taken as rows are written, not at commit
        assert [w.revision for w in written] == [a.revision, b.revision]

    async with uow_factory() as uow:
        with pytest.raises(ConflictError, match="ml/b"):
            await uow.objects.replace_many_at(
                [
                    (make_draft("a", spec={"minCount": 5}), a.resource_version),
                    (make_draft("b", spec={"minCount": 5}), first.resource_version),  # stale
                ]
            )
        await uow.rollback()
    async with uow_factory() as uow:
        unchanged = await uow.objects.get("PodGroup", "ml", "a")
    assert unchanged is not None
    assert unchanged.spec == {"minCount": 1}


async def test_find_filters_by_kind_namespace_and_every_label(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft("a", labels={"app.kubernetes.io/name": "llm", "tier": "gold"}))
        await uow.objects.upsert(make_draft("b", labels={"app.kubernetes.io/name": "llm"}))
        await uow.objects.upsert(make_draft("c", namespace="other", labels={"app.kubernetes.io/name": "llm"}))
        await uow.objects.upsert(make_draft("d", kind="Pod"))
        await uow.commit()

    async with uow_factory() as uow:
        every_podgroup = await uow.objects.find("PodGroup")
        in_ml = await uow.objects.find("PodGroup", "ml", labels={"app.kubernetes.io/name": "llm"})
        gold = await uow.objects.find("PodGroup", labels={"app.kubernetes.io/name": "llm", "tier": "gold"})

    assert [o.name for o in every_podgroup] == ["a", "b", "c"]
    assert [o.name for o in in_ml] == ["a", "b"]
    assert [o.name for o in gold] == ["a"]


async def test_deletion_is_requested_then_done(uow_factory: UowFactory, fake_clock: FakeClock) -> None:
    async with uow_factory() as uow:
        stored = await uow.objects.upsert(make_draft())
        marked = await uow.objects.request_deletion("PodGroup", "ml", "train-0")
        with pytest.raises(ConflictError):
            await uow.objects.delete(
                "PodGroup", "ml", "train-0", expected_resource_version=stored.resource_version
            )
        assert await uow.objects.delete("PodGroup", "ml", "train-0", expected_resource_version=2)
        assert not await uow.objects.delete("PodGroup", "ml", "train-0")
        with pytest.raises(NotFoundError):
            await uow.objects.request_deletion("PodGroup", "ml", "train-0")
        await uow.commit()

    assert marked.deletion_requested_at == fake_clock.now


async def test_leaving_the_block_without_commit_rolls_back(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft())
    async with uow_factory() as uow:
        assert await uow.objects.get("PodGroup", "ml", "train-0") is None


async def test_statuses_of_many_objects_are_written_in_one_compare_and_set(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with uow_factory() as uow:
        first = await uow.objects.upsert(make_draft("train-0"))
        second = await uow.objects.upsert(make_draft("train-1"))
        await uow.commit()
    fake_clock.advance(timedelta(seconds=3))

    async with uow_factory() as uow:
        written = await uow.objects.update_statuses(
            [
                (first, {"placement": {"nodes": ["n-1"]}}),
                (second, {"phase": "Running", "n": [1, 2], "note": 'naïve "x"', "r": 0.5}),
            ]
        )
        await uow.commit()
    async with uow_factory() as uow:
        stored = [await uow.objects.get("PodGroup", "ml", name) for name in ("train-0", "train-1")]

    assert stored == written
    assert [s.status for s in written] == [
        {"placement": {"nodes": ["n-1"]}},
        {"phase": "Running", "n": [1, 2], "note": 'naïve "x"', "r": 0.5},
    ]
    assert [s.resource_version for s in written] == [2, 2]
    assert all(s.updated_at == fake_clock.now for s in written)
    assert [s.generation for s in written] == [1, 1]


async def test_statuses_written_together_are_refused_together_when_one_object_moved_on(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        first = await uow.objects.upsert(make_draft("train-0"))
        second = await uow.objects.upsert(make_draft("train-1"))
        await uow.commit()
    async with uow_factory() as uow:
        await uow.objects.update_status("PodGroup", "ml", "train-1", {"phase": "Failed"})
        await uow.commit()

    async with uow_factory() as uow:
        with pytest.raises(ConflictError, match="PodGroup ml/train-1"):
            await uow.objects.update_statuses([(first, {"phase": "A"}), (second, {"phase": "B"})])

    async with uow_factory() as uow:
        assert (await uow.objects.get("PodGroup", "ml", "train-0")).status == first.status
        assert (await uow.objects.get("PodGroup", "ml", "train-1")).status == {"phase": "Failed"}


async def test_find_can_keep_only_objects_marked_for_deletion(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        for name in ("train-0", "train-1", "train-2"):
            await uow.objects.upsert(make_draft(name))
        await uow.objects.request_deletion("PodGroup", "ml", "train-1")
        await uow.commit()

    async with uow_factory() as uow:
        marked = await uow.objects.find("PodGroup", marked_for_deletion=True)
        every = await uow.objects.find("PodGroup")

    assert [o.name for o in marked] == ["train-1"]
    assert [o.name for o in every] == ["train-0", "train-1", "train-2"]


async def test_objects_of_several_kinds_marked_for_deletion_come_in_one_query_kind_by_kind(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        for kind, name in [
            ("PodGroup", "b"),
            ("PodGroup", "a"),
            ("Job", "a"),
            ("Workload", "a"),
            ("Job", "c"),
        ]:
            await uow.objects.upsert(make_draft(name, kind=kind))
            await uow.objects.request_deletion(kind, "ml", name)
        await uow.objects.upsert(make_draft("kept", kind="Job"))
        await uow.commit()

    async with uow_factory() as uow:
        marked = await uow.objects.find_marked(("PodGroup", "Job"))

    assert [(o.kind, o.name) for o in marked] == [
        ("PodGroup", "a"),
        ("PodGroup", "b"),
        ("Job", "a"),
        ("Job", "c"),
    ]


async def test_controllers_of_objects_are_named_without_reading_the_objects(uow_factory: UowFactory) -> None:
    def owned(name: str, *owners: dict[str, object]) -> ObjectDraft:
        draft = make_draft(name, kind="Pod")
        return dataclasses.replace(draft, metadata={"ownerReferences": list(owners)})

    job = {"kind": "Job", "name": "train", "controller": True}
    async with uow_factory() as uow:
        await uow.objects.create_many(
            [
                owned("p-0", job),
                owned("p-1", job, {"kind": "Job", "name": "watcher"}),  # not its controller
                owned("p-2", {"kind": "ReplicaSet", "name": "rs", "controller": True}),
                owned("p-3"),
                owned("p-4", {**job, "name": "other"}),
            ]
        )
        await uow.commit()

    async with uow_factory() as uow:
        keys = [("Pod", "ml", name) for name in ("p-0", "p-1", "p-2", "p-3", "missing")]
        assert await uow.objects.controllers_of(keys, "Job") == {("ml", "train")}
        assert await uow.objects.controllers_of([("Pod", "ml", "p-4"), ("Pod", "ml", "p-0")], "Job") == {
            ("ml", "train"),
            ("ml", "other"),
        }
        assert await uow.objects.controllers_of([], "Job") == set()


async def test_objects_created_together_go_in_together_or_not_at_all(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.create_many([make_draft("train-0"), make_draft("train-1")])
        await uow.commit()
    assert [o.name for o in created] == ["train-0", "train-1"]
    assert all(o.resource_version == 1 for o in created)

    async with uow_factory() as uow:
        with pytest.raises(ConflictError, match="already exists"):
            await uow.objects.create_many([make_draft("train-2"), make_draft("train-1")])
        await uow.rollback()

    async with uow_factory() as uow:
        assert await uow.objects.get("PodGroup", "ml", "train-2") is None
        assert [o.name for o in await uow.objects.get_many([("PodGroup", "ml", "train-1")])] == ["train-1"]


async def test_documents_read_back_as_written_even_with_integers_beyond_64_bits(
    uow_factory: UowFactory,
) -> None:
    spec = {
        "minCount": 2,
        "huge": 2**70,
        "ratio": 0.25,
        "text": "ünïcode",
        "nested": [{"a": None, "b": True}],
    }
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft(spec=spec))
        await uow.commit()

    async with uow_factory() as uow:
        stored = await uow.objects.get("PodGroup", "ml", "train-0")

    assert stored is not None
    assert stored.spec == spec


async def test_a_removal_decided_on_an_earlier_incarnation_leaves_the_new_one_alone(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        old = await uow.objects.upsert(
            make_draft(uid="incarnation-1"), expected_resource_version=MUST_NOT_EXIST
        )
        await uow.commit()
    # Deleted and applied again while a controller decided to remove what it had read.
    async with uow_factory() as uow:
        await uow.objects.delete("PodGroup", "ml", "train-0")
        await uow.objects.upsert(make_draft(uid="incarnation-2"), expected_resource_version=MUST_NOT_EXIST)
        await uow.commit()
    decision = BatchDecision(
        removals=[ObjectRemoval("PodGroup", "ml", "train-0", old.uid, old.resource_version)]
    )

    async with uow_factory() as uow:
        with pytest.raises(ConflictError, match="UID in precondition: incarnation-1"):
            await write_decision(uow, decision, now=T0)
    marked = dataclasses.replace(decision.removals[0], mark_only=True)
    async with uow_factory() as uow:
        with pytest.raises(ConflictError, match="UID in precondition: incarnation-1"):
            await write_decision(uow, BatchDecision(removals=[marked]), now=T0)

    async with uow_factory() as uow:
        kept = await uow.objects.get("PodGroup", "ml", "train-0")
    assert kept is not None
    assert kept.uid == "incarnation-2"
    assert kept.deletion_requested_at is None


async def test_a_removal_decided_on_an_earlier_version_is_a_conflict(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        read = await uow.objects.upsert(make_draft(), expected_resource_version=MUST_NOT_EXIST)
        await uow.objects.upsert(make_draft(spec={"minCount": 3}))
        await uow.commit()
    decision = BatchDecision(
        removals=[ObjectRemoval("PodGroup", "ml", "train-0", read.uid, read.resource_version)]
    )

    async with uow_factory() as uow:
        with pytest.raises(ConflictError, match="the object has been modified"):
            await write_decision(uow, decision, now=T0)


async def test_objects_by_key_and_every_object_of_a_kind_are_read_together(
    uow_factory: UowFactory, database_url: str
) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.create_many([make_draft("a"), make_draft("b")])
        await uow.objects.upsert(
            ObjectDraft(
                kind="PriorityClass",
                api_version="scheduling.k8s.io/v1",
                namespace="",
                name="high",
                spec={"value": 1000},
                metadata={"name": "high"},
            )
        )
        await uow.commit()
    async with uow_factory() as uow:
        found = [
            read.stored
            for read in await uow.objects.get_many_with_facts(
                [("PodGroup", "ml", "a"), ("PriorityClass", "", "high")], every_of="PriorityClass"
            )
        ]
        stored_a = await uow.objects.get("PodGroup", "ml", "a")
    assert sorted((o.kind, o.name) for o in found) == [("PodGroup", "a"), ("PriorityClass", "high")]
    assert stored_a is not None
    if database_url.startswith("postgresql"):  # the revision the create took as it was written
        assert created[0].revision == stored_a.revision is not None


async def test_objects_read_for_a_write_come_with_their_binding_and_conditions(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    pod = ObjectDraft(kind="Pod", api_version="v1", namespace="ml", name="p", spec={}, metadata={"name": "p"})
    async with uow_factory() as uow:
        stored_pod, group = await uow.objects.create_many([pod, make_draft("g")])
        lease = await uow.leases.acquire_or_renew("scheduler", "a", fake_clock.now, timedelta(seconds=15))
        assert lease is not None
        await uow.bindings.bind_many(
            [PodBinding(pod_uid=stored_pod.uid, node_name="node-3", podgroup_uid="", bound_at=T0)],
            fence=lease.fence,
        )
        later = Condition(object_uid=stored_pod.uid, type="Ready", status="False", owner="t", reason="B")
        earlier = Condition(object_uid=stored_pod.uid, type="PodScheduled", status="True", owner="t")
        await uow.conditions.set_many([earlier, later])
        await uow.commit()

    async with uow_factory() as uow:
        found = await uow.objects.get_many_with_facts(
            [("Pod", "ml", "p"), ("PodGroup", "ml", "g")], every_of="PodGroup"
        )
        listed = await uow.conditions.list_for_many([stored_pod.uid])
    by_name = {read.stored.name: read for read in found}
    assert sorted(by_name) == ["g", "p"]  # the PodGroup read by key and by kind comes once
    assert by_name["p"].bound_to == "node-3"
    assert [(c.type, c.status, c.reason) for c in by_name["p"].conditions or []] == [
        ("PodScheduled", "True", ""),
        ("Ready", "False", "B"),
    ]
    assert by_name["p"].conditions == listed[stored_pod.uid]  # as the conditions' own read has them
    assert (by_name["g"].bound_to, by_name["g"].conditions) == (None, [])  # read by key: it has none
    assert by_name["g"].stored == group
