"""Two admission replicas share one bus and one database: applies spread over both through the RPC queue group,
Jobs submitted as events spread over their shared durable consumer, and every object is admitted once, with one
admission event, however the work fell between them."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from libs.client.client import PodwayClient
from libs.db.engine import create_engine
from libs.db.schema import events, leases, objects, outbox
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from tests.integration.scheduler.conftest import example
from tests.integration.scheduler.manifests import gang
from tests.support import eventually

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


async def _rows(database_url: str, statement: sa.Select) -> list[sa.Row]:  # type: ignore[type-arg]
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return list((await connection.execute(statement)).all())
    finally:
        await engine.dispose()


async def test_two_admission_replicas_admit_everything_once(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    replicas = [
        AdmissionService(
            PodwaySettings(
                nats_url=nats_url, database_url=database_url, data_dir=tmp_path / f"a{i}", instance=str(i)
            )
        )
        for i in range(2)
    ]
    for replica in replicas:
        await replica.start()
    try:
        async with PodwayClient(nats_url, timeout_s=30) as client:
            await client.apply(example("01-priorityclasses.yaml"))
            replies = await asyncio.gather(*(client.apply(gang(f"spread-{i}", 2)) for i in range(12)))
            assert all(r.outcome == "created" for reply in replies for r in reply.results)
            (template,) = example("05-indexed-job.yaml")
            for i in range(6):
                job = copy.deepcopy(template)
                job["metadata"]["name"] = f"submitted-{i}"
                await client.submit_job(job)
            await eventually(
                lambda: client.get("Job", namespace="ml"),
                lambda jobs: len([j for j in jobs if j["metadata"]["name"].startswith("submitted-")]) == 6,
                timeout_s=30,
            )
    finally:
        for replica in replicas:
            await replica.stop()

    stored = await _rows(database_url, sa.select(objects.c.kind, objects.c.namespace, objects.c.name))
    assert len(stored) == len(set(stored))
    admitted = await _rows(
        database_url,
        sa.select(
            events.c.type, events.c.subject_kind, events.c.subject_namespace, events.c.subject_name
        ).where(events.c.type.like("%.admitted")),
    )
    twice = [key for key, count in Counter(admitted).items() if count > 1]
    assert twice == []
    groups = {name for kind, _, name in stored if kind == "PodGroup"}
    assert {f"spread-{i}" for i in range(12)} <= groups
    assert {f"submitted-{i}-worker-0" for i in range(6)} <= groups
    # Each submission is in the audit log, once and never published again, and what admitted it names it.
    submitted = await _rows(
        database_url, sa.select(events.c.event_id).where(events.c.type == "job.submitted")
    )
    assert len(submitted) == 6
    republished = await _rows(
        database_url,
        sa.select(outbox.c.seq).where(
            outbox.c.event_id.in_([event_id for (event_id,) in submitted]), outbox.c.published_at.is_(None)
        ),
    )
    assert republished == []
    causes = await _rows(
        database_url, sa.select(events.c.causation_id).where(events.c.type == "job.admitted")
    )
    assert {cause for (cause,) in causes} == {str(event_id) for (event_id,) in submitted}
    # Both replicas run the retention schedule; one of them holds its lease.
    (holder,) = await _rows(database_url, sa.select(leases.c.holder).where(leases.c.name == "retention"))
    assert holder[0].startswith(("admission-0-", "admission-1-"))
