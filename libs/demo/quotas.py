"""Demo steps for quotas: two teams share the fleet by Kueue's ClusterQueues (deploy/examples/11-two-teams.yaml);
llm borrows everything vision lends, then vision takes its share back by evicting exactly one borrowed gang,
whole, and nothing else."""

from __future__ import annotations

from functools import partial
from typing import Any

from libs.client.client import PodwayClient
from libs.client.describe import event_line
from libs.demo.steps import Demo, check, clear_namespace, example, wait_for

LLM_GANGS = [f"llm-{i}" for i in range(7)]
"""7 gangs of 8 pods x 8 GPUs: llm's nominal 320 GPUs and the 128 vision lends."""
GPU = "nvidia.com/gpu"


def team_gang(name: str, namespace: str, pods: int, priority_class: str) -> list[dict[str, Any]]:
    """A Workload, its PodGroup and `pods` pods of 8 GPUs that run until they are evicted. No queue label:
    the namespace's LocalQueue `default` takes them."""
    template = {
        "name": "worker",
        "schedulingPolicy": {"gang": {"minCount": pods}},
        "priorityClassName": priority_class,
    }
    container = {
        "name": "trainer",
        "image": "registry.example.com/trainer:v1",
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: "8"}},
    }
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"podGroupTemplates": [template]},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "worker"}},
                "schedulingPolicy": {"gang": {"minCount": pods}},
                "priorityClassName": priority_class,
            },
        },
        *(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "namespace": namespace},
                "spec": {
                    "schedulingGroup": {"podGroupName": name},
                    "priorityClassName": priority_class,
                    "containers": [container],
                },
            }
            for i in range(pods)
        ),
    ]


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


async def gpus_held(client: PodwayClient) -> int:
    """GPUs requested by pods bound to a node and not ended, in every namespace."""
    held = 0
    for pod in await client.get("Pod", all_namespaces=True):
        if pod["spec"].get("nodeName") and _phase(pod) not in ("Succeeded", "Failed"):
            for container in pod["spec"].get("containers") or []:
                held += int(((container.get("resources") or {}).get("requests") or {}).get(GPU) or 0)
    return held


async def running(client: PodwayClient, namespace: str, group: str) -> int:
    pods = await client.get("Pod", namespace=namespace)
    mine = [p for p in pods if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group]
    return sum(_phase(p) == "Running" for p in mine)


async def conditions(client: PodwayClient, namespace: str, group: str) -> dict[str, dict[str, Any]]:
    found = await client.get("PodGroup", group, namespace=namespace)
    return {c["type"]: c for c in ((found[0].get("status") or {}).get("conditions") or [])} if found else {}


async def quota_steps(demo: Demo) -> None:
    client, out = demo.client, demo.out
    llm_pods: dict[str, set[str]] = {}

    async def llm_borrows() -> None:
        free = await wait_for(lambda: gpus_held(client), lambda held: held == 0, timeout_s=90)
        check(free == 0, f"the fleet must be idle before the teams come ({free} GPUs still held)")
        await client.apply(example("01-priorityclasses.yaml") + example("11-two-teams.yaml"))
        for name in LLM_GANGS:
            await client.apply(team_gang(name, "llm", 8, "batch"))
        for name in LLM_GANGS:
            count = await wait_for(partial(running, client, "llm", name), lambda n: n == 8, 60)
            check(count == 8, f"llm's gang {name} must run whole ({count} of 8 pods run)")
        await client.apply(team_gang("llm-extra", "llm", 8, "batch"))
        waits = await wait_for(
            lambda: conditions(client, "llm", "llm-extra"), lambda found: "QuotaReserved" in found, 30
        )
        reserved = waits.get("QuotaReserved") or {}
        check(reserved.get("status") == "False", f"llm-extra must wait for quota: {reserved}")
        for name in LLM_GANGS:
            pods = await client.get("Pod", namespace="llm")
            llm_pods[name] = {
                p["metadata"]["uid"] for p in pods if p["metadata"]["name"].startswith(f"{name}-")
            }
        out(
            "   team-llm runs 7 gangs x 64 GPUs: its nominal 320 and the 128 team-vision lends;"
            f" an 8th waits: {reserved.get('message')}"
        )

    async def vision_reclaims() -> None:
        await client.apply(team_gang("vision-train", "vision", 16, "high-priority"))
        count = await wait_for(lambda: running(client, "vision", "vision-train"), lambda n: n == 16, 60)
        if count != 16:
            why = (await conditions(client, "vision", "vision-train")).get("PodGroupScheduled") or {}
            check(False, f"vision's gang must run whole ({count} of 16 run): {why.get('message')}")
        pods = {p["metadata"]["uid"]: p for p in await client.get("Pod", namespace="llm")}
        evicted = [
            name
            for name, uids in llm_pods.items()
            if any(_phase(pods[uid]) != "Running" for uid in uids if uid in pods) or not uids <= set(pods)
        ]
        check(len(evicted) == 1, f"exactly one borrowed llm gang must go, whole: {evicted}")
        (group,) = await client.get("PodGroup", evicted[0], namespace="llm")
        story = await wait_for(
            lambda: client.events(correlation_id=group["metadata"]["uid"]),
            lambda found: any(e["type"] == "pods.evicted" for e in found.events),
            30,
        )
        for event in story.events:
            if event["type"] in ("pods.evicted", "pods.failed"):
                out("   " + event_line(event))
        (eviction,) = [e for e in story.events if e["type"] == "pods.evicted"]
        message = str(eviction["payload"].get("message") or "")
        check(
            message.endswith("due to reclamation within the cohort")
            and len(eviction["payload"]["pods"]) == 8,
            f"the eviction must be Kueue's reclaim of a whole gang: {message}",
        )
        still = await running(client, "llm", "llm-extra")
        check(still == 0, "the waiting llm gang must not take what vision reclaimed")
        out(f"   team-vision's 128 GPUs run; {evicted[0]} (64 borrowed GPUs) was evicted whole, nothing else")

    async def teams_leave() -> None:
        for namespace in ("llm", "vision"):
            await clear_namespace(client, namespace)
        held = await wait_for(lambda: gpus_held(client), lambda n: n == 0, 90)
        check(held == 0, f"the teams' gangs must be gone ({held} GPUs still held)")
        for doc in reversed(example("11-two-teams.yaml")):
            meta = doc["metadata"]
            await client.delete(doc["kind"], meta["name"], meta.get("namespace"))

    await demo.step(
        "Team llm borrows all the quota team vision lends; one more gang waits for quota", llm_borrows
    )
    await demo.step(
        "Team vision takes its share back: exactly one borrowed gang is evicted, whole", vision_reclaims
    )
    await demo.step("The teams leave; the fleet is idle again", teams_leave)
