"""On PostgreSQL, binding pods reads only those pods, whatever the table's statistics say."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import text

from libs.db.records import PodBinding
from libs.db.uow import SqlAlchemyUnitOfWork
from tests.conftest import FakeClock
from tests.integration.db.builders import T0, make_draft, make_pod

pytestmark = pytest.mark.postgres
UowFactory = Callable[[], SqlAlchemyUnitOfWork]
STORED_PODS = 3000
POD_SPEC = {"containers": [{"name": "w", "image": "trainer:v1", "args": ["--config=" + "x" * 1000]}]}
_OBJECT_ROWS_READ = text(
    "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables WHERE relname = 'objects'"
)
"""Rows of `objects` this connection has read so far (its statistics not yet reported included)."""


async def test_binding_reads_only_the_pods_it_binds_when_statistics_predate_every_pod(
    pg_uow_factory: UowFactory, fake_clock: FakeClock
) -> None:
    # Statistics taken while the table held no pod (a fresh database), then thousands of pods of the size
    # real ones have: a plan that trusts the kind's statistics would read every pod to bind a few.
    async with pg_uow_factory() as uow:
        await uow.objects.create_many([make_draft(f"node-{i}", kind="Node") for i in range(200)])
        await uow.commit()
    async with pg_uow_factory() as uow:
        await uow.session.execute(text("ANALYZE objects"))
        pods = [dataclasses.replace(make_pod(f"pod-{i}"), spec=POD_SPEC) for i in range(STORED_PODS)]
        await uow.objects.create_many(pods)
        lease = await uow.leases.acquire_or_renew("scheduler", "scheduler-a", fake_clock.now, timedelta(1))
        assert lease is not None
        await uow.commit()
    bound = [PodBinding(f"pod-{i}", "node-1", "pg-1", T0) for i in range(16)]

    for _ in range(8):  # past the executions after which PostgreSQL may switch to a generic plan
        async with pg_uow_factory() as uow:
            before = (await uow.session.execute(_OBJECT_ROWS_READ)).scalar_one()
            await uow.bindings.bind_many(bound, fence=lease.fence)
            read = (await uow.session.execute(_OBJECT_ROWS_READ)).scalar_one() - before
            await uow.rollback()

        assert read <= 2 * len(bound)  # each bound pod, and the binding's check that it exists
