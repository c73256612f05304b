"""`podway up` on a 3-node JetStream cluster with every stream on three servers, gang Jobs applied all along:
the server leading the events stream is SIGKILLed mid-load, then a second server too, so that no stream has a
quorum (publishes fail, the outbox relays log it and retry); both come back. Every Job runs to completion and
`podway check` finds nothing lost or doubled."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from libs.client.client import PodwayClient
from libs.db.engine import create_engine
from libs.db.schema import outbox
from libs.events.catalogue import EVENTS_STREAM
from libs.messaging.broker import jetstream, make_broker
from tests.chaos.harness import _apply, _decided, _retrying, example, job, podway, stack_info
from tests.nats_cluster import NatsCluster, kill_leader_of, until_stream_leader
from tests.support import eventually

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)

SERVICES = "admission,scheduler,preemptor,dra_allocator,node_agent"
RELAY_FAILED = "publishes failed; retrying next pass"


@pytest.fixture
def stack(tmp_path: Path, database_url: str) -> Iterator[tuple[NatsCluster, Path]]:
    cluster = NatsCluster(tmp_path / "nats").start()
    data_dir = tmp_path / "stack"
    try:
        up = podway(
            data_dir,
            "up", "--detach", "--services", SERVICES, "--nats-url", cluster.url, "--replicas", "3",
            "--database-url", database_url,
        )  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        yield cluster, data_dir
    finally:
        podway(data_dir, "down", timeout_s=120)
        cluster.stop()


class Load:
    """Gang Jobs applied one after another until stopped, each retried until admission wrote it."""

    def __init__(self, client: PodwayClient) -> None:
        self.client = client
        self.applied: list[str] = []
        self.stopping = asyncio.Event()

    async def run(self) -> None:
        while not self.stopping.is_set():
            name = f"load-{len(self.applied)}"
            await _apply(self.client, [job(name, 2, 1, seconds=1, rack=len(self.applied) % 2 == 0)])
            self.applied.append(name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 0.3)

    async def until_applied(self, count: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.applied) < count:
            assert time.monotonic() < deadline, f"only {len(self.applied)} Jobs applied"
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def running(load: Load) -> AsyncIterator[Load]:
    task = asyncio.create_task(load.run())
    try:
        yield load
    finally:
        load.stopping.set()
        await task


def relay_failures(data_dir: Path) -> int:
    return sum(
        log.read_text(errors="replace").count(RELAY_FAILED) for log in (data_dir / "logs").glob("*.log")
    )


async def test_jobs_run_through_a_lost_stream_leader_and_a_lost_quorum_and_nothing_is_lost_or_doubled(
    stack: tuple[NatsCluster, Path], database_url: str
) -> None:
    cluster, data_dir = stack
    url = stack_info(data_dir)["nats_url"]
    assert url == cluster.url
    inspector = make_broker(url, "test-inspector")
    await inspector.connect()
    js = jetstream(inspector)
    try:
        assert (await js.stream_info(EVENTS_STREAM)).config.num_replicas == 3
        async with PodwayClient(url, timeout_s=20) as client:
            await _retrying(lambda: client.apply(example("01-priorityclasses.yaml")))
            async with running(Load(client)) as load:
                await load.until_applied(4)
                leader = await until_stream_leader(js, EVENTS_STREAM)
                first = kill_leader_of(cluster, leader)
                await until_stream_leader(js, EVENTS_STREAM, not_on=leader)
                await load.until_applied(len(load.applied) + 4)

                failures = relay_failures(data_dir)
                second = next(i for i, node in enumerate(cluster.nodes) if node.running)
                cluster.kill(second)  # one server of three: no stream can store a message
                said = await eventually(
                    lambda: asyncio.to_thread(relay_failures, data_dir), lambda n: n > failures, timeout_s=30
                )
                assert said > failures, "no outbox relay said its publishes failed"
                await asyncio.to_thread(cluster.restart, first)
                await asyncio.to_thread(cluster.restart, second)
                restored = datetime.now(UTC)
                await load.until_applied(len(load.applied) + 4)
            jobs = set(load.applied)

            async def decided() -> int:
                found = await _retrying(lambda: client.get("Job", namespace="ml"))
                return sum(1 for j in found if j["metadata"]["name"] in jobs and _decided(j))

            assert await eventually(decided, lambda n: n == len(jobs), timeout_s=90) == len(jobs)
    finally:
        await inspector.stop()

    # Every event committed before the quorum came back was published since (later ones may be on their way).
    assert await eventually(lambda: unpublished_outbox_rows(database_url, restored), lambda n: n == 0) == 0
    check = podway(data_dir, "check", "--database-url", database_url)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "0 violations" in check.stdout


async def unpublished_outbox_rows(database_url: str, committed_before: datetime) -> int:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            query = (
                sa.select(sa.func.count())
                .select_from(outbox)
                .where(outbox.c.published_at.is_(None), outbox.c.created_at < committed_before)
            )
            return int((await connection.execute(query)).scalar_one())
    finally:
        await engine.dispose()
