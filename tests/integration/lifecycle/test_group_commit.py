"""Applies are written in group commits; one request that the database refuses fails alone, with an answer,
and every other request of its group is written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from libs.core.admission.apply import prepare_batch
from libs.events.rpc import ApplyReply
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService, PreparedApply
from tests.integration.scheduler.manifests import NAMESPACE, pod

# PostgreSQL refuses a NUL character in a JSON document: a real failure of the group's transaction.
POSTGRES_ONLY = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


@pytest.fixture
async def admission(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[AdmissionService]:
    service = AdmissionService(
        PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path)
    )
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


def request(index: int, *, poisoned: bool = False) -> PreparedApply:
    manifest = pod(f"p-{index}")
    if poisoned:
        manifest["metadata"]["annotations"]["example.com/note"] = "nul \x00 here"
    return PreparedApply(f"req-{index}", prepare_batch([manifest]))


@POSTGRES_ONLY
async def test_a_request_the_database_refuses_fails_alone_and_its_group_is_written(
    admission: AdmissionService,
):
    requests = [request(i, poisoned=i == 3) for i in range(8)]

    # Submitted in one turn of the event loop, the eight requests form one group commit.
    replies: list[ApplyReply] = await asyncio.gather(*(admission.batcher.submit(r) for r in requests))

    outcomes = {reply.request_id: [r.outcome for r in reply.results] for reply in replies}
    assert outcomes.pop("req-3") == ["rejected"]
    assert set(map(tuple, outcomes.values())) == {("created",)}
    bad = next(reply for reply in replies if reply.request_id == "req-3").results[0]
    assert bad.message.startswith("Internal error occurred: ")
    assert bad.status is not None
    assert bad.status["reason"] == "InternalError"
    async with admission.uow() as uow:
        stored = {o.name for o in await uow.objects.find("Pod", NAMESPACE)}
    assert stored == {f"p-{i}" for i in range(8) if i != 3}
