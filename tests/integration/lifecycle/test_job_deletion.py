"""Deleting a Job, as upstream's foreground deletion: its pods are terminated on their nodes, its PodGroup and
Workload go with them, the Job last; the same Job applied again is a new incarnation that binds and runs."""

from __future__ import annotations

import copy
from typing import Any

from tests.integration.lifecycle.conftest import example
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually

JOB = "finetune"
GROUP = "finetune-worker-0"


async def pods_of(stack: Stack, group: str) -> list[dict[str, Any]]:
    pods = await stack.client.get("Pod", namespace=NAMESPACE)
    return [p for p in pods if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group]


def running(pods: list[dict[str, Any]], count: int) -> bool:
    return len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


async def gone(stack: Stack, kind: str, name: str) -> bool:
    return await stack.client.get(kind, name, NAMESPACE) == []


async def run_job_once(stack: Stack) -> dict[str, str]:
    """Apply the indexed Job, wait until its 8 pods run, and return pod name -> uid."""
    reply = await stack.client.apply(example("05-indexed-job.yaml"))
    assert [r.outcome for r in reply.results] == ["created"], [r.message for r in reply.results]
    pods = await eventually(lambda: pods_of(stack, GROUP), lambda pods: running(pods, 8), timeout_s=30)
    assert running(pods, 8), [(p["metadata"]["name"], p.get("status")) for p in pods]
    assert all(p["spec"].get("nodeName") for p in pods)
    (group,) = await stack.client.get("PodGroup", GROUP, NAMESPACE)
    assert group["status"]["podway"]["placed"] == 8
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


async def delete_job_and_wait(stack: Stack) -> None:
    reply = await stack.client.delete("Job", JOB, NAMESPACE)
    assert reply.results[0].outcome in ("deleted", "pending"), reply.results
    for kind, name in (("Job", JOB), ("PodGroup", GROUP), ("Workload", JOB)):
        assert await eventually(lambda kind=kind, name=name: gone(stack, kind, name), bool, timeout_s=30), (
            f"{kind} {name} was not deleted"
        )
    assert await pods_of(stack, GROUP) == []


async def test_a_job_deleted_and_applied_again_three_times_binds_and_runs_each_time(stack: Stack):
    seen_uids: set[str] = set()
    for _ in range(3):
        pods = await run_job_once(stack)
        assert seen_uids.isdisjoint(pods.values()), "a new incarnation must not reuse its pods' uids"
        seen_uids.update(pods.values())
        await delete_job_and_wait(stack)


def big_job(name: str, pods: int, gpus: int) -> dict[str, Any]:
    (job,) = example("05-indexed-job.yaml")
    job = copy.deepcopy(job)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"].pop("podway.io/topology-key")
    job["spec"].update(parallelism=pods, completions=pods)
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = str(gpus)
    resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return job


async def test_deleting_a_running_job_terminates_its_pods_on_their_nodes_and_frees_their_gpus(stack: Stack):
    # 64 pods of 8 GPUs take every GPU of the cluster.
    await stack.client.apply([big_job("hog", 64, 8)])
    hog = await eventually(
        lambda: pods_of(stack, "hog-worker-0"), lambda pods: running(pods, 64), timeout_s=30
    )
    assert running(hog, 64)
    await stack.client.apply(gang("next", 2, gpus=8))
    story = await eventually(
        lambda: stack.client.events(podgroup=f"{NAMESPACE}/next"),
        lambda s: "podgroup.unschedulable" in [e["type"] for e in s.events],
    )
    assert "pods.bound" not in [e["type"] for e in story.events]
    (hog_group,) = await stack.client.get("PodGroup", "hog-worker-0", NAMESPACE)

    await stack.client.delete("Job", "hog", NAMESPACE)

    nxt = await eventually(lambda: pods_of(stack, "next"), lambda pods: running(pods, 2), timeout_s=30)
    assert running(nxt, 2)
    assert await eventually(lambda: gone(stack, "Job", "hog"), bool, timeout_s=30)
    terminated = [
        e
        for e in (await stack.client.events(correlation_id=hog_group["metadata"]["uid"])).events
        if e["type"] == "object.deleted" and e["payload"]["kind"] == "Pod"
    ]
    hog_uids = {p["metadata"]["uid"] for p in hog}
    assert {e["payload"]["uid"] for e in terminated} == hog_uids
    node_of = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in hog}
    for event in terminated:
        assert event["payload"]["reason"] == f"terminated on node {node_of[event['payload']['uid']]}"
