"""DRA end to end on a real nats-server and database: admission, node agent, scheduler and DRA allocator
in-process. A NUMA gang with a rack fabric is placed in one rack, its claims allocated before its pods are
bound, and released when they finish; two pods share one GPU by capacity; two pods naming one existing
ResourceClaim share its GPU, and it is released after both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from libs.client.output import render
from libs.core.dra.ledger import ClaimsCommitted
from libs.db.engine import create_engine, create_session_factory
from libs.db.errors import ConflictError
from libs.db.uow import unit_of_work_factory
from services.dra_allocator.app import DraAllocatorService
from tests.integration.scheduler.conftest import Stack, example
from tests.integration.scheduler.conftest import stack as scheduling_stack  # noqa: F401  (a fixture)
from tests.support import eventually

NAMESPACE = "ml"
SHARED_SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "zone-0-b0-r0-n00-shared-gpu.example.com"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "zone-0-b0-r0-n00-shared", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "zone-0-b0-r0-n00",
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


@pytest.fixture
async def allocator(scheduling_stack: Stack) -> AsyncIterator[DraAllocatorService]:  # noqa: F811
    """The DRA allocator, leading."""
    service = DraAllocatorService(scheduling_stack.settings)
    await service.start()
    await eventually(lambda: _leading(service), bool, timeout_s=20)
    try:
        yield service
    finally:
        await service.stop()


@pytest.fixture
async def stack(scheduling_stack: Stack, allocator: DraAllocatorService) -> Stack:  # noqa: F811
    """The scheduling stack with the DRA allocator leading too."""
    return scheduling_stack


async def _leading(allocator: DraAllocatorService) -> bool:
    return allocator.world is not None


async def pods_named(stack: Stack, prefix: str) -> list[dict[str, Any]]:
    return [
        p
        for p in await stack.client.get("Pod", namespace=NAMESPACE)
        if p["metadata"]["name"].startswith(prefix)
    ]


def phases(pods: list[dict[str, Any]]) -> set[str]:
    return {p.get("status", {}).get("phase") for p in pods}


async def claims(stack: Stack) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in await stack.client.get("ResourceClaim", namespace=NAMESPACE)}


async def test_a_numa_gang_with_a_rack_fabric_is_allocated_bound_and_released(stack: Stack):
    await stack.client.apply(example("06-dra-numa-gang.yaml"))

    running = await eventually(
        lambda: pods_named(stack, "numa-train-worker-0-"),
        lambda pods: len(pods) == 4 and phases(pods) == {"Running"},
        timeout_s=30,
    )

    assert len({p["spec"]["nodeName"].rsplit("-n", 1)[0] for p in running}) == 1
    allocated = await claims(stack)
    assert sorted(allocated) == [
        "numa-train-worker-0-0-gpus",
        "numa-train-worker-0-1-gpus",
        "numa-train-worker-0-2-gpus",
        "numa-train-worker-0-3-gpus",
        "numa-train-worker-0-fabric",
    ]
    rack = running[0]["spec"]["nodeName"].rsplit("-n", 1)[0]
    (fabric,) = allocated["numa-train-worker-0-fabric"]["status"]["allocation"]["devices"]["results"]
    assert fabric["pool"] == rack
    for pod in running:
        results = allocated[f"{pod['metadata']['name']}-gpus"]["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
        assert len(results) == 2
    story = [
        e["type"] for e in (await stack.client.events(podgroup=f"{NAMESPACE}/numa-train-worker-0")).events
    ]
    assert story.index("placement.proposed") < story.index("claims.allocated") < story.index("pods.bound")

    stack.agent_clock.advance(timedelta(seconds=31))
    stack.agent.wake()
    assert await eventually(lambda: claims(stack), lambda found: found == {}, timeout_s=30) == {}, (
        "the claims made for the pods go when they finish"
    )
    engine = create_engine(stack.settings.resolved_database_url())
    try:
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            assert await uow.device_allocations.holders(f"fabric.example.com/{rack}/fabric") == []
    finally:
        await engine.dispose()


async def remaining(stack: Stack, manifests: list[dict[str, Any]]) -> list[str]:
    """The objects of `manifests` that still exist (terminating ones included)."""
    wanted = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    found: list[str] = []
    for kind in sorted({kind for kind, _ in wanted}):
        found += [
            f"{kind}/{o['metadata']['name']}"
            for o in await stack.client.get(kind, namespace=NAMESPACE)
            if (kind, o["metadata"]["name"]) in wanted
        ]
    return found


async def test_a_gang_deleted_and_applied_again_gets_claims_of_its_own(stack: Stack):
    manifests = example("06-dra-numa-gang.yaml")
    await stack.client.apply(manifests)
    first = await eventually(
        lambda: pods_named(stack, "numa-train-worker-0-"),
        lambda pods: len(pods) == 4 and phases(pods) == {"Running"},
        timeout_s=30,
    )
    for manifest in reversed(manifests):
        metadata = manifest["metadata"]
        await stack.client.delete(manifest["kind"], metadata["name"], metadata.get("namespace"))
    stack.agent.wake()
    assert await eventually(lambda: claims(stack), lambda found: found == {}, timeout_s=30) == {}
    left = await eventually(lambda: remaining(stack, manifests), lambda found: found == [], timeout_s=30)
    assert left == [], "everything deleted, as `podway delete --wait` waits for"

    reply = await stack.client.apply(manifests)
    assert {r.outcome for r in reply.results} == {"created"}
    again = await eventually(
        lambda: pods_named(stack, "numa-train-worker-0-"),
        lambda pods: len(pods) == 4 and phases(pods) == {"Running"},
        timeout_s=20,  # under the scheduler's 30 s wait for claims: allocated at once, not after a time-out
    )

    assert phases(again) == {"Running"}
    assert {p["metadata"]["uid"] for p in again}.isdisjoint(p["metadata"]["uid"] for p in first)
    allocated = await claims(stack)
    for pod in again:
        claim = allocated[f"{pod['metadata']['name']}-gpus"]
        assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ]


async def test_two_pods_share_one_gpu_by_capacity(stack: Stack):
    await stack.client.apply([SHARED_SLICE])
    await stack.client.apply(example("07-dra-shared-gpu.yaml"))

    await eventually(
        lambda: pods_named(stack, "infer-"),
        lambda pods: len(pods) == 2 and phases(pods) == {"Running"},
        timeout_s=30,
    )

    allocated = await claims(stack)
    devices = {
        result["device"]: result["consumedCapacity"]
        for name in ("infer-a-gpu", "infer-b-gpu")
        for result in allocated[name]["status"]["allocation"]["devices"]["results"]
    }
    assert list(devices) == ["gpu-shared-0"]
    assert devices["gpu-shared-0"]["gpu.example.com/cores"] == "400m"


async def test_two_pods_naming_one_claim_share_its_gpu_and_it_is_released_after_both(stack: Stack):
    await stack.client.apply(example("08-dra-named-claim.yaml"))

    running = await eventually(
        lambda: pods_named(stack, "pair-"),
        lambda pods: len(pods) == 2 and phases(pods) == {"Running"},
        timeout_s=30,
    )

    assert len({p["spec"]["nodeName"] for p in running}) == 1
    node = running[0]["spec"]["nodeName"]
    claim = (await claims(stack))["shared-gpu"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == node
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["pair-a", "pair-b"]
    assert {r["uid"] for r in claim["status"]["reservedFor"]} == {p["metadata"]["uid"] for p in running}
    _, row = render("ResourceClaim", [claim], "").splitlines()  # as `podway get resourceclaims` shows it
    _, state, devices, reserved_for, _ = row.split()
    assert (state, devices) == ("allocated,reserved", f"{node}/{result['device']}")
    assert sorted(reserved_for.split(",")) == ["pair-a", "pair-b"]
    device = f"{result['driver']}/{result['pool']}/{result['device']}"
    engine = create_engine(stack.settings.resolved_database_url())
    try:
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            assert await uow.device_allocations.holders(device) == [f"{NAMESPACE}/shared-gpu"]

        stack.agent_clock.advance(timedelta(seconds=31))
        stack.agent.wake()
        released = await eventually(
            lambda: claims(stack), lambda found: not found["shared-gpu"].get("status"), timeout_s=30
        )

        assert released["shared-gpu"]["spec"]["devices"]["requests"][0]["name"] == "gpu"
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            assert await uow.device_allocations.holders(device) == []
    finally:
        await engine.dispose()


async def test_a_claim_deleted_while_its_pods_run_holds_its_gpu_until_they_end_even_across_a_restart(
    stack: Stack, allocator: DraAllocatorService
):
    await stack.client.apply(example("08-dra-named-claim.yaml"))
    running = await eventually(
        lambda: pods_named(stack, "pair-"),
        lambda pods: len(pods) == 2 and phases(pods) == {"Running"},
        timeout_s=30,
    )
    node = running[0]["spec"]["nodeName"]

    reply = await stack.client.delete("ResourceClaim", "shared-gpu", namespace=NAMESPACE)
    assert reply.results[0].outcome == "pending"
    claim = (await claims(stack))["shared-gpu"]
    assert claim["metadata"].get("deletionTimestamp")
    # A new allocator reads the claim as held: the GPU is not handed out to a pod that wants every GPU there.
    await allocator.stop()
    restarted = DraAllocatorService(stack.settings.model_copy(update={"instance": "1"}))
    await restarted.start()
    await eventually(lambda: _leading(restarted), bool, timeout_s=20)
    try:
        greedy = pod_wanting_all_gpus("greedy", node)
        await stack.client.apply([greedy])
        waiting = await eventually(
            lambda: pods_named(stack, "greedy"),
            lambda pods: (scheduled(pods[0]) or ("",))[0] == "Unschedulable" or phases(pods) == {"Running"},
            timeout_s=30,
        )
        assert phases(waiting) != {"Running"}, waiting[0].get("status")
        assert scheduled(waiting[0]) == (
            "Unschedulable",
            "0/64 nodes are available: 63 node(s) didn't match Pod's node affinity/selector, "
            "1 Insufficient nvidia.com/gpu.",
        )

        stack.agent_clock.advance(timedelta(seconds=31))
        stack.agent.wake()
        gone = await eventually(lambda: claims(stack), lambda found: "shared-gpu" not in found, timeout_s=30)
        assert "shared-gpu" not in gone
    finally:
        await restarted.stop()


def pod_wanting_all_gpus(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "8"}}}
            ],
        },
    }


def scheduled(pod: dict[str, Any]) -> tuple[str, str] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return str(condition.get("reason")), str(condition.get("message"))
    return None


async def test_a_pod_naming_a_missing_claim_waits_until_it_is_applied(stack: Stack):
    claim, *pods = example("08-dra-named-claim.yaml")
    await stack.client.apply(pods[:1])

    (waiting,) = await eventually(
        lambda: pods_named(stack, "pair-a"),
        lambda found: len(found) == 1 and (scheduled(found[0]) or ("",))[0] == "Unschedulable",
        timeout_s=30,
    )

    assert scheduled(waiting) == (
        "Unschedulable",
        '0/64 nodes are available: resourceclaim "shared-gpu" not found.',
    )
    await stack.client.apply([claim])
    await eventually(
        lambda: pods_named(stack, "pair-a"), lambda found: phases(found) == {"Running"}, timeout_s=30
    )


async def test_a_pass_that_could_not_be_written_is_decided_again_after_the_reload(stack: Stack, monkeypatch):
    """Standalone pods' proposals are in no PodGroup's status: a failed write must not leave them to the
    scheduler's 30 s wait for claims."""
    from services.dra_allocator import app

    failures: list[int] = []
    write = app.write_outputs

    async def fails_once(uow, outputs, *, now):
        if not failures and any(isinstance(output, ClaimsCommitted) for output in outputs):
            failures.append(len(outputs))
            raise ConflictError("the database refused the pass")
        await write(uow, outputs, now=now)

    monkeypatch.setattr(app, "write_outputs", fails_once)
    await stack.client.apply(example("08-dra-named-claim.yaml"))

    running = await eventually(
        lambda: pods_named(stack, "pair-"),
        lambda pods: len(pods) == 2 and phases(pods) == {"Running"},
        timeout_s=20,
    )
    assert failures, "a pass failed to be written"
    assert phases(running) == {"Running"}, "bound well before the scheduler's 30 s wait for claims ends"
