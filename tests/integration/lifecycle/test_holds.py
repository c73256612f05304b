"""A binding is a current hold: a pod that ends releases it (the PodGroup no longer counts it as placed) and
still shows the node it ran on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from libs.events.envelope import AggregateRef, Envelope
from libs.events.scheduling import PodGroupRef, PodRef, PodsEvicted
from libs.messaging.publisher import NatsPublisher
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually


async def group_pods(stack: Stack, group: str) -> list[dict[str, Any]]:
    pods = await stack.client.get("Pod", namespace=NAMESPACE)
    return [p for p in pods if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group]


def all_in(phase: str, count: int):
    return lambda pods: (
        len(pods) == count and all((p.get("status") or {}).get("phase") == phase for p in pods)
    )


async def placed(stack: Stack, group: str) -> int:
    (found,) = await stack.client.get("PodGroup", group, NAMESPACE)
    return int(found["status"]["podway"]["placed"])


async def test_pods_that_succeed_release_their_nodes_and_still_show_where_they_ran(stack: Stack):
    await stack.client.apply(gang("short", 4, run_seconds=10))
    running = await eventually(lambda: group_pods(stack, "short"), all_in("Running", 4), timeout_s=30)
    nodes = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in running}
    assert await placed(stack, "short") == 4

    stack.agent_clock.advance(timedelta(seconds=11))
    stack.agent.wake()

    done = await eventually(lambda: group_pods(stack, "short"), all_in("Succeeded", 4), timeout_s=30)
    assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in done} == nodes
    assert await placed(stack, "short") == 0
    wide = await stack.client.get("Pod", done[0]["metadata"]["name"], NAMESPACE)
    assert wide[0]["spec"]["nodeName"] == nodes[done[0]["metadata"]["name"]]
    (group,) = await stack.client.get("PodGroup", "short", NAMESPACE)
    story = (await stack.client.events(correlation_id=group["metadata"]["uid"])).events
    (started,) = [e for e in story if e["type"] == "pods.running"]
    (succeeded,) = [e for e in story if e["type"] == "pods.succeeded"]
    assert succeeded["causation_id"] == started["event_id"]


async def test_pods_evicted_by_preemption_release_their_nodes(stack: Stack):
    await stack.client.apply(gang("victim", 2))
    running = await eventually(lambda: group_pods(stack, "victim"), all_in("Running", 2), timeout_s=30)
    (group,) = await stack.client.get("PodGroup", "victim", NAMESPACE)
    ref = PodGroupRef(namespace=NAMESPACE, name="victim", uid=group["metadata"]["uid"])
    refs = [
        PodRef(
            namespace=NAMESPACE,
            name=p["metadata"]["name"],
            uid=p["metadata"]["uid"],
            node=p["spec"]["nodeName"],
        )
        for p in running
    ]
    evicted = PodsEvicted(pods=refs, reason="PreemptionByScheduler", podgroup=ref)
    subject = AggregateRef(kind="PodGroup", namespace=NAMESPACE, name="victim", uid=ref.uid)
    envelope = Envelope.wrap(
        evicted, producer="preemptor", correlation_id=ref.uid, occurred_at=datetime.now(UTC), subject=subject
    )

    await NatsPublisher(stack.client.broker).publish(envelope)

    failed = await eventually(lambda: group_pods(stack, "victim"), all_in("Failed", 2), timeout_s=30)
    assert {p["status"]["reason"] for p in failed} == {"DisruptionTarget"}
    assert await eventually(lambda: placed(stack, "victim"), lambda n: n == 0) == 0
    assert all(p["spec"].get("nodeName") for p in failed)
