"""Nothing waits in silence: every pending pod and PodGroup read back carries the condition saying why it
waits, whether a cycle failed for it or none tried it yet."""

from __future__ import annotations

from typing import Any

from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.support import eventually


def waiting(obj: dict[str, Any], type_: str) -> tuple[str, str] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition["type"] == type_ and condition["status"] == "False":
            return condition["reason"], condition["message"]
    return None


async def one(stack: Stack, kind: str, name: str) -> dict[str, Any]:
    (found,) = await stack.client.get(kind, name, NAMESPACE)
    return found


async def test_a_pod_whose_podgroup_does_not_exist_says_so(stack: Stack):
    await stack.client.apply([pod("orphan", group="nowhere")])

    orphan = await one(stack, "Pod", "orphan")

    assert waiting(orphan, "PodScheduled") == (
        "SchedulingGated",
        f"waiting for PodGroup {NAMESPACE}/nowhere, which does not exist",
    )


async def test_a_gang_short_of_pods_says_how_many_exist_and_its_pods_say_the_same(stack: Stack):
    workload, group, first, *_ = gang("short", 4)
    await stack.client.apply([workload, group, first])

    expected = ("SchedulingGated", "waiting for pods: 1 of 4 exist")
    assert waiting(await one(stack, "PodGroup", "short"), "PodGroupScheduled") == expected
    assert waiting(await one(stack, "Pod", "short-0"), "PodScheduled") == expected


async def test_an_unschedulable_gang_and_its_pods_show_the_schedulers_message(stack: Stack):
    await stack.client.apply(gang("huge", 2, gpus=16))

    group = await eventually(
        lambda: one(stack, "PodGroup", "huge"),
        lambda g: (waiting(g, "PodGroupScheduled") or ("",))[0] == "Unschedulable",
    )

    reason, message = waiting(group, "PodGroupScheduled") or ("", "")
    assert reason == "Unschedulable"
    assert message.startswith("0/64 nodes are available")
    assert waiting(await one(stack, "Pod", "huge-1"), "PodScheduled") == (reason, message)


async def test_running_pods_and_placed_groups_do_not_wait(stack: Stack):
    await stack.client.apply(gang("fits", 2))
    await eventually(
        lambda: stack.client.get("Pod", namespace=NAMESPACE),
        lambda pods: all((p.get("status") or {}).get("phase") == "Running" for p in pods) and len(pods) == 2,
        timeout_s=30,
    )

    assert waiting(await one(stack, "PodGroup", "fits"), "PodGroupScheduled") is None
    assert waiting(await one(stack, "Pod", "fits-0"), "PodScheduled") is None


async def test_a_gang_whose_workload_was_deleted_says_so_and_its_pods_say_the_same(stack: Stack):
    workload, group, first, *_ = gang("unowned", 4)
    await stack.client.apply([workload, group, first])
    short = ("SchedulingGated", "waiting for pods: 1 of 4 exist")
    assert waiting(await one(stack, "PodGroup", "unowned"), "PodGroupScheduled") == short

    await stack.client.delete("Workload", "unowned", NAMESPACE)

    expected = ("SchedulingGated", f"waiting for Workload {NAMESPACE}/unowned")
    assert waiting(await one(stack, "PodGroup", "unowned"), "PodGroupScheduled") == expected
    assert waiting(await one(stack, "Pod", "unowned-0"), "PodScheduled") == expected
    listed = {p["metadata"]["name"]: p for p in await stack.client.get("PodGroup", namespace=NAMESPACE)}
    assert waiting(listed["unowned"], "PodGroupScheduled") == expected
