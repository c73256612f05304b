"""Demo steps for preemption: a cluster full of low-priority rack gangs (and one more waiting), a high-priority
rack gang arrives, exactly the cheapest gang (the one that has run the least) is evicted, the newcomer binds
on the room made for it while the waiting gang keeps waiting, and the stories say why."""

from __future__ import annotations

from functools import partial
from typing import Any

from libs.client.client import PodwayClient
from libs.client.describe import event_line
from libs.demo.scheduling import RACK, gang
from libs.demo.steps import Demo, check, clear_namespace, wait_for

NAMESPACE = "preempt"
SCAVENGER = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "scavenger"},
    "value": 10,
    "description": "Work that gives way first.",
}


def prioritized(name: str, priority_class: str, *, run_seconds: int) -> list[dict[str, Any]]:
    """A whole-rack gang (8 pods x 8 GPUs) of a PriorityClass."""
    manifests = gang(name, 8, 8, run_seconds=run_seconds, rack=True, namespace=NAMESPACE)
    for manifest in manifests:
        if manifest["kind"] == "Workload":
            manifest["spec"]["podGroupTemplates"][0]["priorityClassName"] = priority_class
        else:
            manifest["spec"]["priorityClassName"] = priority_class
    return manifests


async def story(client: PodwayClient, group: str) -> list[dict[str, Any]]:
    return (await client.events(podgroup=f"{NAMESPACE}/{group}")).events


async def unsettled_racks(client: PodwayClient) -> set[str]:
    """Racks that could still come free: no pod holds them, or only pods of earlier steps that will end
    (the ones with `podway.io/run-seconds`)."""
    racks = {node["metadata"]["labels"][RACK] for node in await client.get("Node")}
    ending: set[str] = set()
    for pod in await client.get("Pod", all_namespaces=True):
        node = pod["spec"].get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        rack = node.rsplit("-", 1)[0]
        racks.discard(rack)
        ends = "podway.io/run-seconds" in (pod["metadata"].get("annotations") or {})
        if ends and pod["metadata"]["namespace"] != NAMESPACE:
            ending.add(rack)
    return racks | ending


async def preemption_steps(demo: Demo) -> None:
    client, out = demo.client, demo.out

    youngest: list[str] = []

    async def fill_with_low_priority() -> None:
        # All of one low priority, so none of them preempts another; one gang more than there are racks,
        # so a rack that comes free is taken at once and only preemption can make room for the newcomer.
        await client.apply([SCAVENGER])
        racks = {node["metadata"]["labels"][RACK] for node in await client.get("Node")}
        bound: list[tuple[int, str]] = []
        for index in range(len(racks) + 1):
            name = f"fill{index}"
            await client.apply(prioritized(name, "scavenger", run_seconds=6000))
            events = await wait_for(partial(story, client, f"{name}-0"), _bound, timeout_s=5)
            seqs = [e["seq"] for e in events if e["type"] == "pods.bound"]
            if seqs:
                bound.append((seqs[0], f"{name}-0"))
        left = await wait_for(lambda: unsettled_racks(client), lambda racks: not racks, timeout_s=90)
        check(not left, f"every rack must be busy before the high-priority gang comes ({left} are not)")
        youngest.append(max(bound)[1])
        out(
            f"   {len(bound)} gangs of 8 pods x 8 GPUs at priority 10 hold every rack, one more waits;"
            f" the last bound, {youngest[0]}, has run the least"
        )

    async def high_priority_preempts() -> None:
        await client.apply(prioritized("urgent", "high-priority", run_seconds=6000))
        events = await wait_for(
            lambda: story(client, "urgent-0"), lambda events: _has(events, "pods.bound"), timeout_s=60
        )
        for event in events:
            if not event["type"].endswith("admitted"):
                out("   " + event_line(event))
        check(
            _has(events, "preemption.victims_selected"),
            f"the urgent gang must have made room by preemption: {[e['type'] for e in events]}",
        )
        selected = next(e for e in events if e["type"] == "preemption.victims_selected")["payload"]
        groups = [g["name"] for g in selected["victim_groups"]]
        check(groups == youngest, f"exactly the gang that loses the least run time must go, not {groups}")
        urgent = sorted(
            p["spec"]["nodeName"]
            for p in await client.get("Pod", namespace=NAMESPACE)
            if p["metadata"]["name"].startswith("urgent-0-")
        )
        cheap = sorted(v["node"] for v in selected["victims"])
        check(urgent == cheap, "the urgent gang must bind on the room its victims left")
        waiting = await client.get("Pod", namespace=NAMESPACE)
        check(
            not any(
                p["spec"].get("nodeName") in cheap
                for p in waiting
                if p["metadata"]["name"].startswith("fill")
                and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
            ),
            "the waiting gang must not take the room made for the urgent one",
        )
        out(
            f"   urgent bound on {urgent[0]} .. {urgent[-1]}, where {groups[0]} ran; the waiting gang still waits"
        )

    async def victims_story() -> None:
        events = await wait_for(
            lambda: story(client, youngest[0]), lambda events: _has(events, "pods.failed"), timeout_s=30
        )
        for event in events:
            if event["type"] in ("pods.evicted", "pods.failed"):
                out("   " + event_line(event))
        (group,) = await client.get("PodGroup", youngest[0], NAMESPACE)
        disruption = {c["type"]: c for c in group["status"].get("conditions", [])}.get(
            "DisruptionTarget"
        ) or {}
        check(
            (disruption.get("status"), disruption.get("reason")) == ("True", "PreemptionByScheduler"),
            "the victim's PodGroup must be marked DisruptionTarget by the preemptor",
        )
        out(
            f"   PodGroup {youngest[0]}: DisruptionTarget=True, {disruption.get('reason')}; no Job owns it: it stays"
            " preempted"
        )
        await clear_namespace(client, NAMESPACE)  # the fleet is left idle for the steps after

    await demo.step("Fill every rack with low-priority gangs", fill_with_low_priority)
    await demo.step(
        "A high-priority rack gang preempts exactly the cheapest gang and binds in the room it left",
        high_priority_preempts,
    )
    await demo.step("The victim's story says why it was chosen", victims_story)


def _bound(events: list[dict[str, Any]]) -> bool:
    return _has(events, "pods.bound")


def _has(events: list[dict[str, Any]], type_: str) -> bool:
    return any(event["type"] == type_ for event in events)
