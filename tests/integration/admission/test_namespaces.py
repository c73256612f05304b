"""Namespaces as admission reads them: the built-in ones, those that hold objects, and those stored (created
or applied), which keep their labels and creation time and are listed while empty."""

from __future__ import annotations

from typing import Any

from libs.db.records import ObjectDraft
from libs.events.rpc import GetRequest
from services.admission import queries
from tests.integration.db.conftest import UowFactory


def namespace(name: str, labels: dict[str, str]) -> ObjectDraft:
    metadata = {"name": name, "labels": labels}
    return ObjectDraft(
        kind="Namespace", api_version="v1", namespace="", name=name, spec={}, metadata=metadata
    )


def pod(name: str, namespace: str) -> ObjectDraft:
    metadata = {"name": name, "namespace": namespace}
    return ObjectDraft(
        kind="Pod", api_version="v1", namespace=namespace, name=name, spec={}, metadata=metadata
    )


async def read(uow_factory: UowFactory, name: str | None = None) -> dict[str, dict[str, Any]]:
    async with uow_factory() as uow:
        reply = await queries.get_objects(uow, GetRequest(kind="Namespace", name=name))
    return {item["metadata"]["name"]: item for item in reply.items}


async def test_stored_namespaces_are_listed_with_their_metadata_and_implicit_ones_beside_them(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(namespace("research", {"team": "a"}))
        await uow.objects.upsert(pod("p", "ml"))
        await uow.commit()

    listed = await read(uow_factory)

    assert sorted(listed) == ["default", "kube-public", "kube-system", "ml", "research"]
    research = listed["research"]
    assert research["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "research"}
    assert "creationTimestamp" in research["metadata"]
    assert (research["status"], research["spec"]) == ({"phase": "Active"}, {"finalizers": ["kubernetes"]})
    assert "creationTimestamp" not in listed["ml"]["metadata"]  # never stored: writing it stores it
    assert listed["ml"]["metadata"]["labels"] == {"kubernetes.io/metadata.name": "ml"}


async def test_a_namespace_nothing_names_is_not_found_and_one_being_emptied_is_terminating(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(pod("p", "ml"))
        await uow.objects.upsert(pod("q", "ml"))
        await uow.commit()
    assert await read(uow_factory, "nowhere") == {}
    assert (await read(uow_factory, "ml"))["ml"]["status"] == {"phase": "Active"}

    async with uow_factory() as uow:
        await uow.objects.request_deletion("Pod", "ml", "p")
        await uow.commit()
    assert (await read(uow_factory, "ml"))["ml"]["status"] == {"phase": "Active"}  # q still lives there

    async with uow_factory() as uow:
        await uow.objects.request_deletion("Pod", "ml", "q")
        await uow.commit()
    assert (await read(uow_factory, "ml"))["ml"]["status"] == {"phase": "Terminating"}
