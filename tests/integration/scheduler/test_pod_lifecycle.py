"""Pods after binding: the node agent runs only bound pods and fails evicted ones; a gang that breaks is
restarted when its policy says so; the scheduler's metrics are served."""

from __future__ import annotations

import asyncio
import urllib.request
from datetime import UTC, datetime
from typing import Any

from libs.events.envelope import AggregateRef, Envelope, EventPayload
from libs.events.scheduling import PodGroupRef, PodPlacement, PodRef, PodsBound, PodsEvicted, PodsFailed
from libs.messaging.publisher import NatsPublisher
from tests.conftest import SQLITE_ONLY
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.integration.scheduler.test_scheduling_e2e import pods_of, story, types, wait_running
from tests.support import eventually

pytestmark = SQLITE_ONLY


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


async def publish(stack: Stack, payload: EventPayload, correlation: str) -> None:
    envelope = Envelope.wrap(
        payload,
        producer="test",
        correlation_id=correlation,
        occurred_at=datetime.now(UTC),
        subject=AggregateRef(kind="PodGroup", namespace=NAMESPACE, name="test", uid=correlation),
    )
    await NatsPublisher(stack.client.broker).publish(envelope)


def ref(pod_manifest: dict[str, Any]) -> PodRef:
    meta = pod_manifest["metadata"]
    return PodRef(
        namespace=NAMESPACE, name=meta["name"], uid=meta["uid"], node=pod_manifest["spec"].get("nodeName")
    )


async def test_a_running_gang_that_loses_a_pod_is_restarted_when_its_policy_says_always(stack: Stack):
    await stack.client.apply(gang("fragile", 4, annotations={"podway.io/gang-restart": "Always"}))
    running = await wait_running(stack, "fragile", 4)
    (group,) = await stack.client.get("PodGroup", "fragile", namespace=NAMESPACE)
    crashed, *rest = sorted(running, key=lambda p: p["metadata"]["name"])

    # The node agent reports one pod crashed.
    await publish(stack, PodsFailed(pods=[ref(crashed)], reason="Error"), group["metadata"]["uid"])

    events = await eventually(
        lambda: story(stack, "fragile"), lambda events: "podgroup.restarted" in types(events)
    )
    evicted = next(e for e in events if e["type"] == "pods.evicted")
    assert evicted["payload"]["reason"] == "GangRestart"
    assert sorted(p["name"] for p in evicted["payload"]["pods"]) == sorted(
        p["metadata"]["name"] for p in rest
    )
    stopped = await eventually(
        lambda: pods_of(stack, "fragile"),
        lambda pods: sum(p.get("status", {}).get("reason") == "DisruptionTarget" for p in pods) == 3,
    )
    assert {
        p["status"]["phase"] for p in stopped if p["metadata"]["name"] != crashed["metadata"]["name"]
    } == {"Failed"}


async def test_pods_evicted_by_the_preemptor_fail_with_disruption_target_and_free_their_room(stack: Stack):
    await stack.client.apply(gang("victim", 2, gpus=8))
    running = await wait_running(stack, "victim", 2)
    (group,) = await stack.client.get("PodGroup", "victim", namespace=NAMESPACE)
    uid = group["metadata"]["uid"]
    podgroup = PodGroupRef(namespace=NAMESPACE, name="victim", uid=uid)

    await publish(
        stack,
        PodsEvicted(pods=[ref(p) for p in running], reason="PreemptionByScheduler", podgroup=podgroup),
        uid,
    )

    failed = await eventually(
        lambda: pods_of(stack, "victim"),
        lambda pods: {p.get("status", {}).get("phase") for p in pods} == {"Failed"},
    )
    assert {p["status"]["reason"] for p in failed} == {"DisruptionTarget"}
    events = types(await story(stack, "victim"))
    assert "pods.failed" in events
    assert "podgroup.restarted" not in events
    uids = [p["metadata"]["uid"] for p in failed]
    freed = await eventually(lambda: _free_gpus(stack), lambda free: free == 512)
    assert freed == 512, uids


async def _free_gpus(stack: Stack) -> int:
    world = stack.scheduler.world
    assert world is not None
    return sum(node.count("gpu.example.com") for node in world.snapshot.node_states())


async def test_the_node_agent_never_runs_a_pod_that_has_no_binding(stack: Stack):
    await stack.client.apply([pod("unbound", gpus=1, node_selector={"kubernetes.io/hostname": "nowhere"})])
    (unbound,) = await eventually(lambda: stack.client.get("Pod", "unbound", namespace=NAMESPACE), bool)
    placement = PodPlacement(pod="unbound", pod_uid=unbound["metadata"]["uid"], node="zone-0-b0-r0-n00")

    # A forged pods.bound without a binding row behind it.
    await publish(stack, PodsBound(podgroup=None, pods=[placement], epoch=99), unbound["metadata"]["uid"])
    await stack.client.apply(gang("after", 1))
    await wait_running(stack, "after", 1)

    (still,) = await stack.client.get("Pod", "unbound", namespace=NAMESPACE)
    assert still.get("status", {}).get("phase") in (None, "Pending")


async def test_the_scheduler_serves_its_metrics(stack: Stack):
    await stack.client.apply(gang("measured", 2))
    await wait_running(stack, "measured", 2)
    port = stack.scheduler.metrics_port
    assert port

    text = await asyncio.to_thread(_scrape, port)

    assert 'podway_scheduler_cycle_seconds_count{result="placed"}' in text
    assert "podway_scheduler_queue_depth" in text
    bound = next(line for line in text.splitlines() if line.startswith("podway_scheduler_pods_bound_total"))
    assert float(bound.split()[1]) >= 2
