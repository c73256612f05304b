"""Scheduling end to end: admission, scheduler and node agent on a real nats-server and both databases,
driven through the Python client on the 64-node cluster of deploy/examples/cluster-small.yaml."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from libs.events.envelope import Envelope
from libs.events.scheduling import ClaimsAllocated, ClaimsAllocationFailed, PodGroupRef
from libs.messaging.publisher import NatsPublisher
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.support import eventually

RACK = "topology.example.com/rack"


async def pods_of(stack: Stack, group: str | None = None) -> list[dict[str, Any]]:
    pods = await stack.client.get("Pod", namespace=NAMESPACE)
    if group is None:
        return pods
    return [p for p in pods if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group]


def phases(pods: list[dict[str, Any]]) -> list[str]:
    return [p.get("status", {}).get("phase") for p in pods]


async def wait_running(stack: Stack, group: str | None, count: int) -> list[dict[str, Any]]:
    return await eventually(
        lambda: pods_of(stack, group),
        lambda pods: len(pods) == count and set(phases(pods)) == {"Running"},
        timeout_s=30,
    )


async def story(stack: Stack, group: str) -> list[dict[str, Any]]:
    return (await stack.client.events(podgroup=f"{NAMESPACE}/{group}")).events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def test_gangs_that_fit_are_bound_together_and_no_node_is_over_committed(stack: Stack):
    names = [f"fit-{i}" for i in range(12)]
    manifests = [m for name in names for m in gang(name, 8, gpus=3)]

    await stack.client.apply(manifests)

    pods = await wait_running(stack, None, 96)
    assert set(phases(pods)) == {"Running"}
    devices_on: dict[str, list[str]] = defaultdict(list)
    for name in names:
        events = await story(stack, name)
        bound = [e for e in events if e["type"] == "pods.bound"]
        assert len(bound) == 1, types(events)
        assert len(bound[0]["payload"]["pods"]) == 8
        assert types(events).index("podgroup.cycle.placed") < types(events).index("pods.bound")
        for placement in bound[0]["payload"]["pods"]:
            devices_on[placement["node"]] += placement["devices"]["gpu.example.com"]
    assert all(len(devices) <= 8 for devices in devices_on.values())
    assert all(len(set(devices)) == len(devices) for devices in devices_on.values())
    groups = await stack.client.get("PodGroup", namespace=NAMESPACE)
    for group in groups:
        scheduled = {c["type"]: c for c in group["status"]["conditions"]}["PodGroupScheduled"]
        assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")
        assert len(group["status"]["placement"]["pods"]) == 8


async def test_a_gang_that_does_not_fit_waits_with_the_reason_and_runs_when_others_finish(stack: Stack):
    filling = [f"fill-{i}" for i in range(8)]
    await stack.client.apply([m for n in filling for m in gang(n, 8, gpus=8, run_seconds=60)])
    await wait_running(stack, None, 64)

    await stack.client.apply(gang("late", 2, gpus=8))
    waiting = await eventually(
        lambda: story(stack, "late"), lambda events: "podgroup.unschedulable" in types(events)
    )
    unschedulable = next(e for e in waiting if e["type"] == "podgroup.unschedulable")
    assert unschedulable["payload"]["message"].startswith(
        "0/64 nodes are available: 64 Insufficient nvidia.com/gpu"
    )
    assert unschedulable["payload"]["reasons"]["Insufficient nvidia.com/gpu"] == 64
    (group,) = await stack.client.get("PodGroup", "late", namespace=NAMESPACE)
    scheduled = {c["type"]: c for c in group["status"]["conditions"]}["PodGroupScheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")

    stack.agent_clock.advance(timedelta(seconds=61))
    stack.agent.wake()

    late = await wait_running(stack, "late", 2)
    assert set(phases(late)) == {"Running"}
    finished = await pods_of(stack, "fill-0")
    assert set(phases(finished)) == {"Succeeded"}
    events = types(await story(stack, "late"))
    assert (
        events.index("podgroup.unschedulable")
        < events.index("pods.bound")
        < events.index("podgroup.scheduled")
    )


async def test_a_topology_gang_that_fits_in_only_one_rack_lands_in_that_rack(stack: Stack):
    racks = [f"zone-0-b{b}-r{r}" for b in range(2) for r in range(4)]
    free_rack = racks[-1]
    # One GPU taken in every other rack leaves exactly one rack with room for 64 GPUs.
    blockers = [
        pod(f"blocker-{i}", gpus=1, node_selector={"kubernetes.io/hostname": f"{rack}-n00"})
        for i, rack in enumerate(racks[:-1])
    ]
    await stack.client.apply(blockers)
    await wait_running(stack, None, 7)

    await stack.client.apply([*gang("rack-wide", 8, gpus=8, topology_key=RACK)])

    placed = await wait_running(stack, "rack-wide", 8)
    assert {p["spec"]["nodeName"].rsplit("-n", 1)[0] for p in placed} == {free_rack}
    (group,) = await stack.client.get("PodGroup", "rack-wide", namespace=NAMESPACE)
    assert group["status"]["placement"]["domain"] == {"key": RACK, "value": free_rack}


async def test_a_gang_with_claims_is_bound_only_after_its_claims_are_allocated(stack: Stack):
    claims = [{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]
    await stack.client.apply([*gang("fabric", 2, claims=claims)])
    proposed = await eventually(
        lambda: story(stack, "fabric"), lambda events: "placement.proposed" in types(events)
    )
    assert "pods.bound" not in types(proposed)
    (group,) = await stack.client.get("PodGroup", "fabric", namespace=NAMESPACE)
    ref = PodGroupRef(namespace=NAMESPACE, name="fabric", uid=group["metadata"]["uid"])
    publisher = NatsPublisher(stack.client.broker)

    await publisher.publish(_dra_event(ClaimsAllocationFailed(podgroup=ref, reason="no fabric left"), ref))
    retried = await eventually(
        lambda: story(stack, "fabric"), lambda events: types(events).count("placement.proposed") == 2
    )
    refused = next(e for e in retried if e["type"] == "podgroup.unschedulable")
    assert "no fabric left" in refused["payload"]["message"]
    assert "Running" not in phases(await pods_of(stack, "fabric"))

    await publisher.publish(_dra_event(ClaimsAllocated(podgroup=ref, allocations=[]), ref))
    await wait_running(stack, "fabric", 2)
    events = types(await story(stack, "fabric"))
    assert events.count("pods.bound") == 1
    assert events.index("pods.bound") > len(events) - 1 - events[::-1].index("placement.proposed")


def _dra_event(payload: ClaimsAllocated | ClaimsAllocationFailed, ref: PodGroupRef) -> Envelope:
    return Envelope.wrap(
        payload, producer="dra-allocator-stand-in", correlation_id=ref.uid, occurred_at=datetime.now(UTC)
    )
