"""v1.35 manifests split over several applies: a `scheduling.k8s.io/v1alpha1` Workload and the pods that name
it with `spec.workloadRef`, in either order, end up in one gang that is bound and runs."""

from __future__ import annotations

from typing import Any

from tests.integration.lifecycle.conftest import example
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE
from tests.support import eventually

IMPLIED_GROUP = "legacy-train-workers"


def split_example() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    docs = example("04-v135-workload.yaml")
    return [d for d in docs if d["kind"] == "Workload"], [d for d in docs if d["kind"] == "Pod"]


async def legacy_pods(stack: Stack) -> list[dict[str, Any]]:
    pods = await stack.client.get("Pod", namespace=NAMESPACE)
    return [p for p in pods if p["metadata"]["name"].startswith("legacy-train-")]


def running(pods: list[dict[str, Any]]) -> bool:
    return len(pods) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def waiting_message(pod: dict[str, Any]) -> str:
    conditions = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
    scheduled = conditions.get("PodScheduled") or {}
    assert scheduled.get("status") == "False", pod.get("status")
    return str(scheduled.get("message"))


async def test_pods_applied_before_their_v135_workload_wait_for_it_by_name_then_run(stack: Stack):
    workload, pods = split_example()

    reply = await stack.client.apply(pods)

    assert [r.outcome for r in reply.results] == ["created", "created"], [r.message for r in reply.results]
    waiting = await legacy_pods(stack)
    assert len(waiting) == 2
    for pod in waiting:
        assert f"waiting for Workload {NAMESPACE}/legacy-train" in waiting_message(pod)
    assert await stack.client.get("PodGroup", IMPLIED_GROUP, NAMESPACE) == []

    reply = await stack.client.apply(workload)

    assert [r.outcome for r in reply.results] == ["created"]
    ran = await eventually(lambda: legacy_pods(stack), running, timeout_s=30)
    assert running(ran)
    (group,) = await stack.client.get("PodGroup", IMPLIED_GROUP, NAMESPACE)
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


async def test_pods_applied_after_their_v135_workload_form_its_gang_and_run(stack: Stack):
    workload, pods = split_example()
    await stack.client.apply(workload)

    reply = await stack.client.apply(pods)

    assert "rejected" not in [r.outcome for r in reply.results], [r.message for r in reply.results]
    ran = await eventually(lambda: legacy_pods(stack), running, timeout_s=30)
    assert running(ran)
    (group,) = await stack.client.get("PodGroup", IMPLIED_GROUP, NAMESPACE)
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}

    again = await stack.client.apply(pods)

    assert {r.outcome for r in again.results} == {"unchanged"}, [(r.kind, r.outcome) for r in again.results]


async def test_deleting_the_v135_file_takes_the_podgroup_made_for_its_pods_once_they_stop(stack: Stack):
    workload, pods = split_example()
    await stack.client.apply(workload + pods)
    assert running(await eventually(lambda: legacy_pods(stack), running, timeout_s=30))

    for doc in workload + pods:
        meta = doc["metadata"]
        await stack.client.delete(doc["kind"], meta["name"], meta["namespace"])

    async def left() -> list[dict[str, Any]]:
        return await stack.client.get("PodGroup", IMPLIED_GROUP, NAMESPACE) + await legacy_pods(stack)

    assert await eventually(left, lambda objects: objects == [], timeout_s=30) == []
