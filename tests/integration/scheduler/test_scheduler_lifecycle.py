"""The scheduler's lifecycle over a real nats-server and database: late events, claims that never come, and
a placement waiting for its claims across a change of leader."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from libs.client.client import PodwayClient
from libs.events.admission import ObjectDeleted, PodAdmitted
from libs.events.envelope import Envelope, EventPayload
from libs.events.scheduling import ClaimsAllocated, PodGroupRef
from libs.messaging.publisher import NatsPublisher
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import FakeClock
from tests.integration.scheduler.conftest import CLUSTER_SMALL, example
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.support import eventually

FABRIC = [{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]


@dataclass
class ClockedStack:
    client: PodwayClient
    scheduler: SchedulerService
    clock: FakeClock
    settings: PodwaySettings

    async def story(self, group: str) -> list[dict[str, Any]]:
        return (await self.client.events(podgroup=f"{NAMESPACE}/{group}")).events

    async def publish(self, payload: EventPayload, correlation: str) -> None:
        envelope = Envelope.wrap(
            payload, producer="test", correlation_id=correlation, occurred_at=datetime.now(UTC)
        )
        await NatsPublisher(self.client.broker).publish(envelope)


@pytest.fixture
async def clocked(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[ClockedStack]:
    """Admission, the node agent and a scheduler whose clock the test moves (its lease is long enough
    that moving the clock never costs it the lease)."""
    settings = PodwaySettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, lease_seconds=3600
    )
    clock = FakeClock()
    admission = AdmissionService(settings)
    await admission.start()
    agent = NodeAgentService(NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL))
    scheduler = SchedulerService(settings, clock=clock, holder="first")
    async with PodwayClient(nats_url, timeout_s=30) as client:
        await client.apply(example("02-dra.yaml"))
        await agent.start()
        await scheduler.start()
        stack = ClockedStack(client, scheduler, clock, settings)
        try:
            await eventually(lambda: _nodes(stack.scheduler), lambda count: count == 64, timeout_s=20)
            yield stack
        finally:
            await stack.scheduler.stop()
            await agent.stop()
            await admission.stop()


async def _nodes(scheduler: SchedulerService) -> int:
    world = scheduler.world
    return 0 if world is None else len(world.snapshot)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


async def story_of(stack: ClockedStack, correlation: str) -> list[str]:
    return types((await stack.client.events(correlation_id=correlation)).events)


async def test_a_pod_admitted_after_its_deletion_was_seen_is_never_scheduled(clocked: ClockedStack):
    ghost = pod("ghost", gpus=1)
    ghost["metadata"]["uid"] = uid = "3f0c8e43-8a8d-4d61-a5f4-0b6e2a6f0c11"
    deleted = ObjectDeleted(kind="Pod", namespace=NAMESPACE, name="ghost", uid=uid)
    late = PodAdmitted(
        kind="Pod", api_version="v1", namespace=NAMESPACE, name="ghost", uid=uid, outcome="created",
        resource_version=1, object=ghost,
    )  # fmt: skip

    # The deletion overtook the creation on the bus (two processes published them).
    await clocked.publish(deleted, uid)
    await clocked.publish(late, uid)
    (sentinel,) = (await clocked.client.apply([pod("sentinel", gpus=1)])).results

    # The scheduler handles events in order: once the sentinel is bound, it has seen the late admission.
    assert sentinel.uid is not None
    await eventually(lambda: story_of(clocked, str(sentinel.uid)), lambda story: "pods.bound" in story)
    assert "pods.bound" not in await story_of(clocked, uid)


async def test_a_placement_whose_claims_never_come_is_released_and_the_gang_retries(clocked: ClockedStack):
    await clocked.client.apply(gang("claimed", 2, gpus=8, claims=FABRIC))
    await eventually(lambda: clocked.story("claimed"), lambda e: "placement.proposed" in types(e))
    world = clocked.scheduler.world
    assert world is not None
    assert world.snapshot.is_assumed(next(iter(world.book.groups["ml/claimed"].placed)))

    clocked.clock.advance(timedelta(seconds=31))
    clocked.scheduler.wake()

    story = await eventually(lambda: clocked.story("claimed"), lambda e: "podgroup.unschedulable" in types(e))
    released = next(e for e in story if e["type"] == "podgroup.unschedulable")
    assert released["payload"]["message"] == (
        "ResourceClaims fabric were not allocated within 30 s; the placement was released"
    )
    assert "pods.bound" not in types(story)
    (group,) = await clocked.client.get("PodGroup", "claimed", namespace=NAMESPACE)
    assert "proposal" not in group["status"]
    condition = {c["type"]: c for c in group["status"]["conditions"]}["PodGroupScheduled"]
    assert condition["message"] == released["payload"]["message"]
    # It backs off and proposes again.
    clocked.clock.advance(timedelta(seconds=2))
    clocked.scheduler.wake()
    await eventually(lambda: clocked.story("claimed"), lambda e: types(e).count("placement.proposed") == 2)


async def test_a_new_leader_binds_a_placement_whose_claims_the_old_one_was_waiting_for(
    clocked: ClockedStack,
):
    await clocked.client.apply(gang("claimed", 2, gpus=8, claims=FABRIC))
    proposed = await eventually(lambda: clocked.story("claimed"), lambda e: "placement.proposed" in types(e))
    proposal = next(e for e in proposed if e["type"] == "placement.proposed")["payload"]
    (group,) = await clocked.client.get("PodGroup", "claimed", namespace=NAMESPACE)
    assert group["status"]["proposal"]["pods"].keys() == {"claimed-0", "claimed-1"}

    await clocked.scheduler.stop()
    successor = SchedulerService(
        clocked.settings.model_copy(update={"instance": "1"}), clock=clocked.clock, holder="successor"
    )
    clocked.scheduler = successor
    await successor.start()
    await eventually(lambda: _nodes(successor), lambda count: count == 64, timeout_s=20)

    ref = PodGroupRef(namespace=NAMESPACE, name="claimed", uid=group["metadata"]["uid"])
    await clocked.publish(ClaimsAllocated(podgroup=ref, allocations=[]), ref.uid)

    story = await eventually(lambda: clocked.story("claimed"), lambda e: "pods.bound" in types(e))
    (bound,) = [e for e in story if e["type"] == "pods.bound"]
    assert bound["payload"]["epoch"] == 2
    assert {(p["pod"], p["node"]) for p in bound["payload"]["pods"]} == {
        (p["pod"], p["node"]) for p in proposal["placements"]
    }
