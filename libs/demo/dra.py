"""Demo steps for DRA: a gang of 4 pods, each with its own claim for 2 GPUs on one NUMA node and all sharing
a claim on their rack's fabric, allocated before it is bound and released when it finishes; two pods
sharing one GPU by capacity."""

from __future__ import annotations

from typing import Any

from libs.client.describe import claim_lines, event_line, node_device_lines
from libs.client.output import render
from libs.demo.steps import Demo, check, example, wait_for

SHARED_NODE = "zone-0-b0-r0-n00"
SHARED_SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": f"{SHARED_NODE}-shared-gpu.example.com"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": f"{SHARED_NODE}-shared", "generation": 1, "resourceSliceCount": 1},
        "nodeName": SHARED_NODE,
        "devices": [
            {
                "name": "gpu-shared-0",
                "attributes": {"model": {"string": "H200"}, "numaNode": {"int": 0}},
                "capacity": {
                    "cores": {"value": "1"},
                    "memory": {"value": "141Gi", "requestPolicy": {"default": "0"}},
                },
                "allowMultipleAllocations": True,
            }
        ],
    },
}
"""A shareable GPU added to one node (the generated cluster has whole GPUs only)."""


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or [])


async def dra_steps(demo: Demo) -> None:
    client, out = demo.client, demo.out

    async def numa_gang_with_rack_fabric() -> None:
        await client.apply(example("06-dra-numa-gang.yaml"))
        group = "ml/numa-train-worker-0"
        types = await wait_for(
            lambda: _story(demo, group), lambda t: "pods.bound" in t and "claims.allocated" in t, timeout_s=30
        )
        for event in (await client.events(podgroup=group)).events:
            if event["type"] in ("placement.proposed", "claims.allocated", "pods.bound"):
                out("   " + event_line(event))
        check(
            types.index("placement.proposed") < types.index("claims.allocated") < types.index("pods.bound"),
            "the gang must be bound only after its claims are allocated",
        )
        pods = [
            p for p in await client.get("Pod", namespace="ml") if p["metadata"]["name"].startswith("numa-")
        ]
        nodes = [p["spec"].get("nodeName", "") for p in pods]
        racks = {node.rsplit("-n", 1)[0] for node in nodes}
        check(len(nodes) == 4 and all(nodes) and len(racks) == 1, "all 4 pods must be bound in one rack")
        claims = [
            c
            for c in await client.get("ResourceClaim", namespace="ml")
            if c["metadata"]["name"].startswith("numa-")
        ]
        out(render("ResourceClaim", claims, "table"))
        by_name = {c["metadata"]["name"]: c for c in claims}
        (fabric,) = _results(by_name["numa-train-worker-0-fabric"])
        check(fabric["pool"] == racks.pop(), "the fabric claim must hold the fabric of the gang's rack")
        for pod in pods:
            gpus = _results(by_name[f"{pod['metadata']['name']}-gpus"])
            check(
                len(gpus) == 2 and {g["pool"] for g in gpus} == {pod["spec"]["nodeName"]},
                "each pod must hold 2 GPUs of its own node",
            )
        out("\n".join("   " + line for line in claim_lines(by_name["numa-train-worker-0-0-gpus"])))

    async def gang_claims_released() -> None:
        def gang_claims(items: list[dict[str, Any]]) -> list[str]:
            return sorted(c["metadata"]["name"] for c in items if c["metadata"]["name"].startswith("numa-"))

        claims = await wait_for(
            lambda: client.get("ResourceClaim", namespace="ml"),
            lambda items: not gang_claims(items),
            timeout_s=30,
        )
        check(not gang_claims(claims), "the claims made for the gang must go when its pods finish")
        types = await _story(demo, "ml/numa-train-worker-0")
        check("claims.released" in types, "the release must be told")
        out("   pods succeeded; the claims made for them released and deleted (claims.released)")

    async def two_pods_share_one_gpu() -> None:
        await client.apply([SHARED_SLICE])
        await client.apply(example("07-dra-shared-gpu.yaml"))
        claims = await wait_for(
            lambda: client.get("ResourceClaim", namespace="ml"),
            lambda items: (
                sum(1 for c in items if c["metadata"]["name"].startswith("infer-") and _results(c)) == 2
            ),
            timeout_s=30,
        )
        shares = [c for c in claims if c["metadata"]["name"].startswith("infer-")]
        devices = {r["device"] for c in shares for r in _results(c)}
        check(devices == {"gpu-shared-0"}, "both pods must share the one shareable GPU")
        (node,) = await client.get("Node", SHARED_NODE)
        slices = await client.get("ResourceSlice")
        lines = node_device_lines(node, slices, claims)
        out("\n".join("   " + line for line in lines if "shared" in line or line == "Devices:"))
        check(
            any("cores 0.8/1 (80%)" in line for line in lines),
            "the node must show 800m of the GPU's cores taken",
        )

    await demo.step(
        "A NUMA gang with a rack fabric: exact devices proposed, allocated, then bound in one rack",
        numa_gang_with_rack_fabric,
    )
    await demo.step("Its claims are released when its pods finish", gang_claims_released)
    await demo.step("Two pods share one GPU by consumable capacity", two_pods_share_one_gpu)


async def _story(demo: Demo, podgroup: str) -> list[str]:
    return [e["type"] for e in (await demo.client.events(podgroup=podgroup)).events]
