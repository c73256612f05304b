"""Demo steps for gang scheduling: the node agent's cluster, gangs placed whole in one rack, a Job deleted and
run again, a gang that cannot fit and is not bound at all, and a gang that waits for capacity and fits when
others finish."""

from __future__ import annotations

from functools import partial
from typing import Any

from libs.client.client import PodwayClient
from libs.client.describe import event_line
from libs.client.output import render
from libs.demo.steps import Demo, check, example, wait_for

RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"


def gang(
    name: str, pods: int, gpus: int, *, run_seconds: int, rack: bool, namespace: str = "demo"
) -> list[dict[str, Any]]:
    """A Workload, its PodGroup and `pods` pods of `gpus` GPUs each."""
    constraints = {"schedulingConstraints": {"topology": [{"key": RACK}]}} if rack else {}
    template = {"name": "worker", "schedulingPolicy": {"gang": {"minCount": pods}}, **constraints}
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podGroupTemplates": [template]},
    }
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": f"{name}-0", "namespace": namespace},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "worker"}},
            "schedulingPolicy": {"gang": {"minCount": pods}},
            **constraints,
        },
    }
    members = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-0-{i}",
                "namespace": namespace,
                "annotations": {"podway.io/run-seconds": str(run_seconds)},
            },
            "spec": {
                "schedulingGroup": {"podGroupName": f"{name}-0"},
                "containers": [
                    {
                        "name": "trainer",
                        "image": "registry.example.com/trainer:v1",
                        "resources": {
                            "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": str(gpus)}
                        },
                    }
                ],
            },
        }
        for i in range(pods)
    ]
    return [workload, group, *members]


async def story_types(client: PodwayClient, podgroup: str) -> list[str]:
    return [e["type"] for e in (await client.events(podgroup=podgroup)).events]


async def bound_nodes(client: PodwayClient, namespace: str, prefix: str) -> list[str]:
    pods = await client.get("Pod", namespace=namespace)
    return [p["spec"].get("nodeName", "") for p in pods if p["metadata"]["name"].startswith(prefix)]


async def scheduling_steps(demo: Demo) -> None:
    client, out = demo.client, demo.out

    async def cluster_registered() -> None:
        nodes = await wait_for(lambda: client.get("Node"), lambda items: len(items) >= 64)
        slices = await client.get("ResourceSlice")
        racks = {n["metadata"]["labels"][RACK] for n in nodes}
        out(
            f"   {len(nodes)} nodes in {len(racks)} racks, {len(slices)} ResourceSlices (GPUs as DRA devices)"
        )
        check(
            len(nodes) == 64 and len(slices) >= 64, "the node agent must register 64 nodes and their slices"
        )

    async def gang_in_one_rack() -> None:
        group = "ml/llm-train-worker-0"
        types = await wait_for(lambda: story_types(client, group), lambda t: "podgroup.scheduled" in t)
        for event in (await client.events(podgroup=group)).events:
            if event["type"].startswith(("podgroup.cycle", "pods.bound", "podgroup.scheduled")):
                out("   " + event_line(event))
        check(types.count("pods.bound") == 1, "the gang must be bound by exactly one pods.bound event")
        nodes = await bound_nodes(client, "ml", "llm-train-worker-0-")
        racks = {n.rsplit("-", 1)[0] for n in nodes}
        out(f"   pods on {sorted(set(nodes))}: one rack {racks}")
        check(len(nodes) == 4 and all(nodes) and len(racks) == 1, "all 4 pods must be bound in one rack")

    async def composite_in_one_block() -> None:
        await client.apply(example("09-composite-job.yaml"))
        await wait_for(
            lambda: client.get("CompositePodGroup", "rl-train-0", "ml"),
            lambda items: (
                bool(items) and (items[0].get("status") or {}).get("podway", {}).get("phase") == "Scheduled"
            ),
        )
        pods = [
            p
            for p in await client.get("Pod", namespace="ml")
            if p["metadata"]["name"].startswith("rl-train-0-")
        ]
        nodes = await client.get("Node")
        block_of = {n["metadata"]["name"]: n["metadata"]["labels"][BLOCK] for n in nodes}
        rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][RACK] for n in nodes}
        blocks = {block_of[p["spec"]["nodeName"]] for p in pods if p["spec"].get("nodeName")}
        for group in ("rl-train-0-driver", "rl-train-0-workers"):
            racks = {rack_of[p["spec"]["nodeName"]] for p in pods if group in p["metadata"]["name"]}
            out(f"   {group}: rack {sorted(racks)}")
            check(len(racks) == 1, f"{group} must be in one rack")
        out(f"   CompositePodGroup rl-train-0: both groups placed together in block {sorted(blocks)}")
        check(len(pods) == 5 and len(blocks) == 1, "all 5 pods of the composite must be bound in one block")

    async def job_gang_runs() -> None:
        group = "ml/finetune-worker-0"
        types = await wait_for(lambda: story_types(client, group), lambda t: "pods.running" in t)
        check("pods.bound" in types and "pods.running" in types, "the Job's gang must be bound and run")
        out(render("PodGroup", await client.get("PodGroup", namespace="ml"), "table"))

    async def too_big_is_never_half_bound() -> None:
        # 9 pods x 8 GPUs cannot fit in any rack of 8 nodes x 8 GPUs: the gang waits whole.
        await client.apply(gang("too-big", 9, 8, run_seconds=60, rack=True))
        types = await wait_for(
            lambda: story_types(client, "demo/too-big-0"), lambda t: "podgroup.unschedulable" in t
        )
        story = (await client.events(podgroup="demo/too-big-0")).events
        message = next(e for e in story if e["type"] == "podgroup.unschedulable")["payload"]["message"]
        out(f"   {message}")
        check("pods.bound" not in types, "no pod of an unschedulable gang may be bound")
        check(not any(await bound_nodes(client, "demo", "too-big-0-")), "no orphaned half-gang")
        await client.delete("Workload", "too-big", "demo")

    async def waits_then_fits() -> None:
        # A filler takes 60 of 64 nodes for a few (compressed) seconds; a rack-bound gang of 8 waits for a
        # whole rack, then fits when the filler finishes.
        await client.apply(gang("filler", 60, 8, run_seconds=30, rack=False))
        await wait_for(lambda: story_types(client, "demo/filler-0"), lambda t: "pods.bound" in t)
        await client.apply(gang("waiter", 8, 8, run_seconds=10, rack=True))
        waiting = await wait_for(
            lambda: story_types(client, "demo/waiter-0"), lambda t: "podgroup.unschedulable" in t
        )
        check("pods.bound" not in waiting, "the waiter must wait while the filler holds the racks")
        out("   waiter is unschedulable while the filler runs")
        types = await wait_for(
            lambda: story_types(client, "demo/waiter-0"), lambda t: "pods.bound" in t, timeout_s=60
        )
        check("pods.bound" in types, "the waiter must be bound once the filler finished")
        filler = await story_types(client, "demo/filler-0")
        check("pods.succeeded" in filler, "the filler must have finished first")
        nodes = await bound_nodes(client, "demo", "waiter-0-")
        out(
            f"   waiter bound after the filler succeeded, in rack {sorted({n.rsplit('-', 1)[0] for n in nodes})}"
        )

    async def delete_the_job() -> None:
        (group,) = await client.get("PodGroup", "finetune-worker-0", "ml")
        reply = await client.delete("Job", "finetune", "ml")
        out(f"   job/finetune: {reply.results[0].outcome} {reply.results[0].message}".rstrip())
        for kind, name in (("Job", "finetune"), ("PodGroup", "finetune-worker-0"), ("Workload", "finetune")):
            left = await wait_for(partial(client.get, kind, name, "ml"), lambda items: items == [])
            check(left == [], f"{kind} {name} must be gone once the Job is deleted")
        pods = await client.get("Pod", namespace="ml")
        check(
            not any(p["metadata"]["name"].startswith("finetune-") for p in pods),
            "the Job's pods must be gone",
        )
        story = (await client.events(correlation_id=group["metadata"]["uid"])).events
        deleted = [e for e in story if e["type"] == "object.deleted" and e["payload"]["kind"] == "Pod"]
        terminated = [e for e in deleted if e["payload"]["reason"].startswith("terminated on node")]
        out(
            f"   8 pods gone: {len(terminated)} terminated on their nodes, {len(deleted) - len(terminated)} had ended"
        )
        check(len(deleted) == 8, "every pod of the Job must be deleted, with an event each")

    async def rerun_the_job() -> None:
        reply = await client.apply(example("05-indexed-job.yaml"))
        check([r.outcome for r in reply.results] == ["created"], "the Job applied again must be created anew")
        group = "ml/finetune-worker-0"
        types = await wait_for(lambda: story_types(client, group), lambda t: "pods.running" in t)
        check("pods.bound" in types and "pods.running" in types, "the new incarnation must be bound and run")
        nodes = await bound_nodes(client, "ml", "finetune-worker-0-")
        check(len(nodes) == 8 and all(nodes), "all 8 pods of the new incarnation must be bound")
        out(f"   the new incarnation runs on {len(set(nodes))} node(s): {', '.join(sorted(set(nodes)))}")

    await demo.step("The node agent registers a 64-node GPU cluster through admission", cluster_registered)
    await demo.step("A rack-constrained gang is placed whole, in one rack, in one cycle", gang_in_one_rack)
    await demo.step(
        "A v1.37 CompositePodGroup: a driver and a worker group placed together in one block, each in one rack",
        composite_in_one_block,
    )
    await demo.step("The Indexed Job's gang is bound and runs", job_gang_runs)
    await demo.step(
        "Delete the Job: its pods, PodGroup and Workload go with it, the Job last", delete_the_job
    )
    await demo.step("Apply the same Job again: a new incarnation is bound and runs", rerun_the_job)
    await demo.step(
        "A gang that cannot fit is never half-bound; the reason is kube-scheduler's",
        too_big_is_never_half_bound,
    )
    await demo.step("A gang waits for a free rack, then fits when others finish", waits_then_fits)
