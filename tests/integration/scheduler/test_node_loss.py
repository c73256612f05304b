"""Node loss end to end, as Kubernetes handles it: a node whose host is taken away stops beating, is NotReady
after the grace period (nothing new goes there, its pods keep their room), and lost after the eviction
timeout: its pods fail (`NodeLost`), their bindings go, their gang restarts elsewhere; a new leader sees the
same and writes nothing twice; the host brought back makes the node Ready again. On a real nats-server and
both databases; the scheduler's clock is the test's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from libs.client.check import violations
from libs.client.client import PodwayClient
from libs.events.envelope import AggregateRef, Envelope
from libs.events.scheduling import PodGroupRef, PodRef, PodsEvicted
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

GRACE_S, EVICTION_S = 40.0, 300.0
STEP = timedelta(seconds=10)
"""Time moves in steps below the grace, each after the other nodes beat again and were heard."""


@dataclass
class Stack:
    client: PodwayClient
    agent: NodeAgentService
    clock: FakeClock
    settings: PodwaySettings
    scheduler: SchedulerService


@pytest.fixture
async def stack(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    settings = PodwaySettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=tmp_path,
        lease_seconds=3600,  # the test's clock moves by minutes: the lease must not lapse meanwhile
        node_heartbeat_seconds=0.1,
        node_monitor_grace_seconds=GRACE_S,
        node_eviction_seconds=EVICTION_S,
    )
    clock = FakeClock()
    admission = AdmissionService(settings)
    await admission.start()
    agent = NodeAgentService(NodeAgentSettings(**settings.model_dump(), cluster_file=CLUSTER_SMALL))
    holder = Stack(
        PodwayClient(nats_url, timeout_s=30), agent, clock, settings, SchedulerService(settings, clock=clock)
    )
    async with holder.client as client:
        await client.apply(example("02-dra.yaml"))
        await agent.start()
        await holder.scheduler.start()
        try:
            yield holder
        finally:
            await holder.scheduler.stop()
            await agent.stop()
            await admission.stop()


async def heard_again(stack: Stack) -> None:
    """Wait until the scheduler observed a beat of every node whose host is up that came after now."""
    async with stack.scheduler.plain_uow() as uow:
        before = await uow.node_heartbeats.counts()
    live = set(before) - stack.agent.down

    async def observed() -> bool:
        world = stack.scheduler.world
        return world is not None and all((world.health.beats(node) or 0) > before[node] for node in live)

    assert await eventually(observed, bool, timeout_s=20)


async def advance(stack: Stack, seconds: float) -> None:
    """Move the scheduler's clock by `seconds`, one step at a time, the live nodes heard at each step."""
    left = seconds
    while left > 0:
        await heard_again(stack)
        step = min(left, STEP.total_seconds())
        stack.clock.advance(timedelta(seconds=step))
        left -= step
    await heard_again(stack)
    stack.scheduler.wake()


async def pods(stack: Stack) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in await stack.client.get("Pod", namespace=NAMESPACE)}


async def node(stack: Stack, name: str) -> dict[str, Any]:
    (found,) = await stack.client.get("Node", name)
    return found


async def node_after_a_pass(stack: Stack, name: str) -> dict[str, Any]:
    """The node as read after waking the scheduler again: a wake that came while a pass ran on the clock's
    older reading would otherwise leave the scheduler idle until its next tick."""
    stack.scheduler.wake()
    return await node(stack, name)


def ready(node: dict[str, Any]) -> tuple[str, str]:
    found = [c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"]
    return (found[0]["status"], found[0]["reason"]) if found else ("", "")


async def test_a_node_taken_away_is_not_ready_then_lost_and_its_gang_restarts_elsewhere(stack: Stack):
    restart = {"podway.io/gang-restart": "Always"}
    await stack.client.apply([*gang("train", 2, gpus=8, annotations=restart), pod("solo", gpus=8)])
    running = await eventually(
        lambda: pods(stack),
        lambda found: len(found) == 3 and all(p["status"].get("phase") == "Running" for p in found.values()),
        timeout_s=30,
    )
    victim = running["train-0"]["spec"]["nodeName"]
    others = {name: p["spec"]["nodeName"] for name, p in running.items() if name != "train-0"}

    reply = await stack.client.node_power(victim, on=False)
    assert (reply.node, reply.pods_stopped) == (victim, 1)
    await advance(stack, GRACE_S)

    not_ready = await eventually(lambda: node_after_a_pass(stack, victim), lambda n: ready(n)[0] == "Unknown")
    assert ready(not_ready) == ("Unknown", "NodeStatusUnknown")
    await stack.client.apply([pod("pinned", gpus=1, node_selector={"kubernetes.io/hostname": victim})])
    waiting = await eventually(
        lambda: pods(stack),
        lambda found: "node.kubernetes.io/unreachable" in str(found["pinned"]["status"].get("conditions")),
    )
    assert waiting["train-0"]["status"]["phase"] == "Running"  # its room is kept until the node is lost

    await advance(stack, EVICTION_S)

    after = await eventually(
        lambda: pods(stack),
        lambda found: (
            found["train-0"]["status"].get("phase") == "Failed"
            and found.get("train-1", {}).get("status", {}).get("phase") != "Running"
        ),
        timeout_s=30,
    )
    assert after["train-0"]["status"]["reason"] == "NodeLost"
    assert ready(await node(stack, victim)) == ("Unknown", "NodeLost")
    story = (await stack.client.events(podgroup=f"{NAMESPACE}/train")).events
    assert {"pods.failed", "podgroup.restarted"} <= {e["type"] for e in story}
    async with stack.scheduler.plain_uow() as uow:
        held = await uow.bindings.list_for_node(victim)
    assert held == []
    assert others["solo"] != victim
    assert await violations(stack.settings.database_url or "") == []  # nothing held on the lost node

    # A new leader sees the same: nothing is lost twice, the node stays NotReady until it beats.
    await stack.scheduler.stop()
    stack.scheduler = SchedulerService(stack.settings, clock=stack.clock, holder="successor")
    await stack.scheduler.start()
    await advance(stack, EVICTION_S)
    lost = [
        e
        for e in (
            await stack.client.events(correlation_id=(await node(stack, victim))["metadata"]["uid"])
        ).events
        if e["type"] == "node.lost"
    ]
    assert len(lost) == 1

    await stack.client.node_power(victim, on=True)
    back = await eventually(
        lambda: node_after_a_pass(stack, victim), lambda n: ready(n)[0] == "True", timeout_s=30
    )
    assert ready(back) == ("True", "KubeletReady")
    await advance(stack, 300)  # the pinned pod's back-off, grown while it waited, runs out
    placed = await eventually(
        lambda: pods(stack), lambda found: found["pinned"]["status"].get("phase") == "Running", timeout_s=30
    )
    assert placed["pinned"]["spec"].get("nodeName") == victim, placed["pinned"]
    assert await violations(stack.settings.database_url or "") == []  # ready again: it may hold


async def test_a_pod_evicted_on_a_host_taken_away_holds_its_room_until_its_node_is_lost(stack: Stack):
    await stack.client.apply(gang("victim", 2, gpus=8))
    running = await eventually(
        lambda: pods(stack),
        lambda found: len(found) == 2 and all(p["status"].get("phase") == "Running" for p in found.values()),
        timeout_s=30,
    )
    dark = running["victim-0"]["spec"]["nodeName"]
    await stack.client.node_power(dark, on=False)
    (group,) = await stack.client.get("PodGroup", "victim", NAMESPACE)
    ref = PodGroupRef(namespace=NAMESPACE, name="victim", uid=group["metadata"]["uid"])
    refs = [
        PodRef(namespace=NAMESPACE, name=name, uid=p["metadata"]["uid"], node=p["spec"]["nodeName"])
        for name, p in sorted(running.items())
    ]
    evicted = PodsEvicted(pods=refs, reason="PreemptionByScheduler", podgroup=ref)
    subject = AggregateRef(kind="PodGroup", namespace=NAMESPACE, name="victim", uid=ref.uid)
    envelope = Envelope.wrap(
        evicted, producer="preemptor", correlation_id=ref.uid, occurred_at=datetime.now(UTC), subject=subject
    )

    await NatsPublisher(stack.client.broker).publish(envelope)

    stopped = await eventually(
        lambda: pods(stack), lambda found: found["victim-1"]["status"].get("phase") == "Failed", timeout_s=30
    )
    assert stopped["victim-0"]["status"]["phase"] == "Running", "nobody on a dark host reports it stopped"
    async with stack.scheduler.plain_uow() as uow:
        assert [b.pod_uid for b in await uow.bindings.list_for_node(dark)] == [refs[0].uid]
    await advance(stack, GRACE_S + EVICTION_S)
    lost = await eventually(
        lambda: pods(stack), lambda found: found["victim-0"]["status"].get("phase") == "Failed", timeout_s=30
    )
    assert lost["victim-0"]["status"]["reason"] == "NodeLost"
