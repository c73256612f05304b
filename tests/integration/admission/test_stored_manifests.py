"""A list keeps what it read of each object by revision: the next list reads only which versions are stored,
yet shows every change, and what reads derive from other objects is derived again each time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from libs.db.records import Condition, ObjectDraft, PodBinding, StoredObject
from libs.events.rpc import GetRequest, decode_get_reply, encode_objects
from services.admission import queries
from services.admission.stored_cache import StoredManifests
from tests.conftest import FakeClock
from tests.integration.db.conftest import UowFactory


def pod(name: str, group: str) -> ObjectDraft:
    return ObjectDraft(
        kind="Pod",
        api_version="v1",
        namespace="ml",
        name=name,
        spec={"schedulingGroup": {"podGroupName": group}, "containers": [{"name": "main", "image": "x"}]},
        metadata={"name": name, "namespace": "ml", "labels": {}},
    )


def gang(name: str, min_count: int) -> ObjectDraft:
    return ObjectDraft(
        kind="PodGroup",
        api_version="scheduling.k8s.io/v1alpha2",
        namespace="ml",
        name=name,
        spec={"schedulingPolicy": {"gang": {"minCount": min_count}}},
        metadata={"name": name, "namespace": "ml", "labels": {}},
    )


async def list_pods(uow_factory: UowFactory, kept: StoredManifests | None) -> dict[str, dict[str, Any]]:
    """With `kept`, as admission answers a list (each pod encoded, from what it kept); else read afresh."""
    asked = GetRequest(kind="Pod", namespace="ml", limit=500)
    async with uow_factory() as uow:
        if kept is None:
            items = (await queries.get_objects(uow, asked)).items
        else:
            reply = await queries.get_objects(uow, asked, kept, encoded=True)
            items = decode_get_reply(encode_objects(reply)).items
    return {item["metadata"]["name"]: item for item in items}


def scheduled(pod: dict[str, Any]) -> list[tuple[str, str]]:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return [(c["reason"], c["message"]) for c in conditions if c["type"] == "PodScheduled"]


async def test_a_kept_list_reads_as_a_fresh_one_and_keeps_nothing_derived(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(pod("a", "nowhere"))
        await uow.objects.upsert(pod("b", "nowhere"))
        await uow.commit()
    kept = StoredManifests()

    first = await list_pods(uow_factory, kept)
    again = await list_pods(uow_factory, kept)

    assert len(kept) == 2
    assert again == first == await list_pods(uow_factory, None)
    # The waiting condition is derived on each read, never kept with the object: it appears once.
    assert scheduled(again["a"]) == [
        ("SchedulingGated", "waiting for PodGroup ml/nowhere, which does not exist")
    ]


async def test_what_other_objects_change_shows_though_the_pod_is_kept(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(pod("a", "train"))
        await uow.commit()
    kept = StoredManifests()
    await list_pods(uow_factory, kept)

    async with uow_factory() as uow:
        await uow.objects.upsert(gang("train", 2))
        await uow.commit()
    after = await list_pods(uow_factory, kept)

    assert scheduled(after["a"]) == [("SchedulingGated", "waiting for pods: 1 of 2 exist")]


async def test_a_condition_written_moves_the_revision_and_the_list_reads_it(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        stored = await uow.objects.upsert(pod("a", "nowhere"))
        await uow.commit()
    kept = StoredManifests()
    before = await list_pods(uow_factory, kept)

    async with uow_factory() as uow:
        written = Condition(
            object_uid=stored.uid,
            type="PodScheduled",
            status="False",
            owner="scheduler",
            reason="Unschedulable",
            message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        )
        await uow.conditions.set_many([written])
        await uow.commit()
    after = await list_pods(uow_factory, kept)

    assert after["a"]["metadata"]["resourceVersion"] != before["a"]["metadata"]["resourceVersion"]
    assert scheduled(after["a"]) == [
        ("Unschedulable", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    ]
    assert after == await list_pods(uow_factory, None)


async def test_an_object_deleted_between_its_version_and_its_documents_is_left_out(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(pod("a", "nowhere"))
        await uow.objects.upsert(pod("b", "nowhere"))
        await uow.commit()
    async with uow_factory() as uow:
        versions = await uow.objects.find_versions("Pod", "ml")
        await uow.objects.delete("Pod", "ml", "a")
        read = await StoredManifests().read(uow, versions, queries.with_conditions)

    assert [manifest["metadata"]["name"] for manifest, _ in read] == ["b"]


async def test_the_least_recently_read_go_first(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        for name in "abc":
            await uow.objects.upsert(pod(name, "nowhere"))
        await uow.commit()
    kept = StoredManifests(kept=2)

    await list_pods(uow_factory, kept)

    assert len(kept) == 2


async def test_objects_kept_as_created_read_as_the_database_has_them(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.create_many([pod("a", "nowhere"), pod("b", "nowhere")])
        await uow.commit()
    kept = StoredManifests()
    kept.keep_created(created)

    async with uow_factory() as uow:
        read_documents: list[list[str]] = []
        get_by_uids = uow.objects.get_by_uids

        async def counted(uids: Any) -> Any:
            read_documents.append(list(uids))
            return await get_by_uids(uids)

        uow.objects.get_by_uids = counted  # type: ignore[method-assign]
        reply = await queries.get_objects(uow, GetRequest(kind="Pod", namespace="ml", limit=500), kept)

    assert read_documents == []  # both came from what was kept
    assert {i["metadata"]["name"]: i for i in reply.items} == await list_pods(uow_factory, None)


async def test_a_replica_reads_what_another_replica_wrote_since_it_kept_the_object(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.create_many([pod("a", "nowhere")])
        await uow.commit()
    this, other = StoredManifests(), StoredManifests()
    this.keep_created(created)  # this replica created it and kept it
    await list_pods(uow_factory, other)

    async with uow_factory() as uow:  # the other replica writes a new label
        labelled = pod("a", "nowhere")
        labelled.metadata["labels"] = {"team": "b"}
        await uow.objects.upsert(labelled)
        await uow.commit()
    seen = await list_pods(uow_factory, this)

    assert seen["a"]["metadata"]["labels"] == {"team": "b"}
    assert seen == await list_pods(uow_factory, other) == await list_pods(uow_factory, StoredManifests())


async def test_a_pod_bound_since_its_last_list_shows_its_node_and_no_longer_waits(
    uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    async with uow_factory() as uow:
        stored = await uow.objects.upsert(pod("a", "nowhere"))
        await uow.objects.upsert(pod("b", "nowhere"))
        await uow.commit()
    kept = StoredManifests()
    before = await list_pods(uow_factory, kept)
    assert before == await list_pods(uow_factory, kept)  # the second from the encodings kept

    async with uow_factory() as uow:
        lease = await uow.leases.acquire_or_renew("scheduler", "a", fake_clock.now, timedelta(seconds=15))
        assert lease is not None
        bound = PodBinding(pod_uid=stored.uid, node_name="node-7", podgroup_uid="", bound_at=fake_clock.now)
        await uow.bindings.bind_many([bound], fence=lease.fence)
        await uow.commit()
    after = await list_pods(uow_factory, kept)

    assert after["a"]["spec"]["nodeName"] == "node-7"
    assert scheduled(after["a"]) == []
    assert after["b"] == before["b"]
    assert after == await list_pods(uow_factory, None)


async def test_a_pod_whose_podgroup_appears_reads_its_new_reason_from_the_same_kept_version(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(pod("a", "train"))
        await uow.commit()
    kept = StoredManifests()
    before = await list_pods(uow_factory, kept)
    assert scheduled(before["a"]) == [
        ("SchedulingGated", "waiting for PodGroup ml/train, which does not exist")
    ]

    async with uow_factory() as uow:
        await uow.objects.upsert(gang("train", 1))
        await uow.commit()
    after = await list_pods(uow_factory, kept)

    assert after["a"]["metadata"]["resourceVersion"] == before["a"]["metadata"]["resourceVersion"]
    assert scheduled(after["a"]) == [("Queued", "waiting for a scheduling cycle")]
    assert after == await list_pods(uow_factory, None)


async def test_pods_kept_as_created_are_encoded_once_before_a_list_reads_them(
    uow_factory: UowFactory, monkeypatch: Any
) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.create_many([pod("a", "nowhere"), pod("b", "nowhere")])
        await uow.commit()
    kept = StoredManifests()
    kept.keep_created(created)
    assert kept.has_unlisted()

    async with uow_factory() as uow:
        assert await queries.encode_unlisted_pods(uow, kept, most=1) == 1
        assert await queries.encode_unlisted_pods(uow, kept, most=100) == 1
        assert await queries.encode_unlisted_pods(uow, kept, most=100) == 0
    assert not kept.has_unlisted()
    copies: list[str] = []
    copy = queries.copy_for_derived

    def counted(manifest: dict[str, Any]) -> dict[str, Any]:
        copies.append(manifest["metadata"]["name"])
        return copy(manifest)

    monkeypatch.setattr(queries, "copy_for_derived", counted)
    listed = await list_pods(uow_factory, kept)

    assert copies == []  # both sent as encoded ahead of the list
    assert listed == await list_pods(uow_factory, None)


async def test_a_pod_encoded_ahead_reads_what_changed_since(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.create_many([pod("a", "train")])
        await uow.commit()
    kept = StoredManifests()
    kept.keep_created(created)
    async with uow_factory() as uow:
        await queries.encode_unlisted_pods(uow, kept, most=100)
        await uow.objects.upsert(gang("train", 1))
        await uow.commit()

    listed = await list_pods(uow_factory, kept)

    assert scheduled(listed["a"]) == [("Queued", "waiting for a scheduling cycle")]
    assert listed == await list_pods(uow_factory, None)


async def test_a_pod_a_list_read_first_is_not_encoded_again(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        created = await uow.objects.create_many([pod("a", "nowhere"), pod("b", "nowhere")])
        await uow.commit()
    kept = StoredManifests()
    kept.keep_created(created)
    await list_pods(uow_factory, kept)

    assert kept.unlisted_pods(100) == []
    assert not kept.has_unlisted()


def stored_pod(name: str) -> StoredObject:
    drafted, now = pod(name, "nowhere"), datetime(2026, 12, 6, tzinfo=UTC)
    return StoredObject(
        kind="Pod",
        api_version="v1",
        namespace="ml",
        name=name,
        uid=f"uid-{name}",
        generation=1,
        resource_version=1,
        spec=drafted.spec,
        metadata=drafted.metadata,
        status={},
        created_at=now,
        updated_at=now,
    )


def test_pods_waiting_to_be_encoded_are_bounded_by_what_is_kept() -> None:
    kept, keeping_none = StoredManifests(kept=2), StoredManifests(kept=0)
    kept.keep_created([stored_pod(name) for name in "abc"])
    keeping_none.keep_created([stored_pod("a")])

    assert [manifest["metadata"]["name"] for _, manifest in kept.unlisted_pods(100)] == ["b", "c"]
    assert not keeping_none.has_unlisted()
