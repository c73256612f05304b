"""`podway up` on a PostgreSQL primary and its synchronous standby, through the multi-host URL, while gang Jobs
are applied one batch after another: the primary is killed mid-load (SIGKILL to all its processes) and the
standby promoted. The services reconnect to the new primary on their own, the scheduler keeps leading,
every Job completes (every gang bound and run), and `podway check` finds nothing lost or doubled. The time
from the kill to the services' first write on the new primary, and until every service wrote there, is
printed (docs/reliability.md states it)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from libs.client.client import PodwayClient
from tests.chaos.harness import _apply, _retrying, _wait_decided, example, job, podway, stack_info
from tests.integration.pg_failover.postgres_pair import PostgresPair
from tests.integration.pg_failover.recovery import watch_recovery, write_marks
from tests.integration.reliability.private_postgres import postgres_bin

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        postgres_bin() is None, reason="no PostgreSQL binaries to start a primary and a standby"
    ),
]
SERVICES = ("admission", "scheduler", "node_agent")
BATCHES = 10
JOBS_PER_BATCH = 3
KILL_AFTER_BATCH = 4


@pytest.fixture
def pair() -> Iterator[PostgresPair]:
    databases = PostgresPair.create(synchronous=True)
    try:
        yield databases
    finally:
        databases.remove()


@pytest.fixture
def stack(pair: PostgresPair, tmp_path: Path) -> Iterator[Path]:
    data_dir = tmp_path / "stack"
    up = podway(data_dir, "up", "--detach", "--services", ",".join(SERVICES), "--database-url", pair.url)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield data_dir
    finally:
        podway(data_dir, "down", timeout_s=120)


def jobs() -> list[list[dict[str, Any]]]:
    return [
        [job(f"gang-{b}-{i}", 4, 1, seconds=1, rack=True) for i in range(JOBS_PER_BATCH)]
        for b in range(BATCHES)
    ]


async def _apply_in_batches(
    client: PodwayClient, batches: list[list[dict[str, Any]]], half: asyncio.Event
) -> None:
    for number, batch in enumerate(batches, start=1):
        await _apply(client, batch)
        if number == KILL_AFTER_BATCH:
            half.set()
        await asyncio.sleep(0.3)


async def test_the_stack_rides_out_a_failover_mid_load_and_keeps_every_promise(
    pair: PostgresPair, stack: Path
) -> None:
    batches = jobs()
    standby = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{pair.standby.port}/postgres")
    try:
        async with PodwayClient(stack_info(stack)["nats_url"], timeout_s=20) as client:
            await _retrying(lambda: client.apply(example("01-priorityclasses.yaml")))
            half = asyncio.Event()
            load = asyncio.create_task(_apply_in_batches(client, batches, half))
            await half.wait()

            await asyncio.to_thread(pair.crash_primary)
            before = await write_marks(standby)  # all the primary acknowledged: the standby is synchronous
            failover = await asyncio.to_thread(pair.promote_standby)
            recovery = await watch_recovery(standby, before, SERVICES, killed_at=failover.killed_at)
            await load
            names = {j["metadata"]["name"] for batch in batches for j in batch}
            decided = await _wait_decided(pair.url, names, time.monotonic() + 90)
            load_done_s = round(time.monotonic() - failover.killed_at, 1)
            complete = {
                j["metadata"]["name"] for j in await client.get("Job", namespace="ml") if _complete(j)
            }
    finally:
        await standby.close()
    checked = await asyncio.to_thread(podway, stack, "check", "-o", "json")
    print(json.dumps({"failover": vars(failover), "recovery": vars(recovery), "load_done_s": load_done_s}))

    assert failover.new_port == pair.primary.port
    assert recovery.all_written_s is not None, recovery
    assert decided == len(names)
    assert complete == names
    assert checked.returncode == 0, checked.stdout + checked.stderr
    verdict = json.loads(checked.stdout)
    assert verdict["found"] == []
    assert verdict["checked"]["objects"] > len(names)  # it read the run: the Jobs, their pods and gangs


def _complete(job_object: dict[str, Any]) -> bool:
    conditions = (job_object.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)
