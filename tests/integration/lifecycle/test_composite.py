"""A CompositePodGroup through the real stack: a v1.37 manifest of a driver group and a worker group is admitted,
both groups are placed together in one block (each in one rack), and the composite says so; a composite that
cannot place its children together places none of them, and says why."""

from __future__ import annotations

import copy
from typing import Any

from tests.integration.lifecycle.conftest import example
from tests.integration.scheduler.conftest import Stack
from tests.support import eventually

BLOCK, RACK = "topology.example.com/block", "topology.example.com/rack"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


async def _labels_of(stack: Stack) -> dict[str, dict[str, str]]:
    return {
        node["metadata"]["name"]: node["metadata"].get("labels") or {}
        for node in await stack.client.get("Node")
    }


async def test_a_driver_and_worker_group_are_placed_together_in_one_block(stack: Stack) -> None:
    await stack.client.apply(example("09-composite-job.yaml"))

    pods = await eventually(
        lambda: stack.client.get("Pod", namespace="ml"),
        lambda pods: len(pods) == 5 and all(p["spec"].get("nodeName") for p in pods),
        timeout_s=30,
    )
    labels = await _labels_of(stack)
    blocks = {labels[p["spec"]["nodeName"]][BLOCK] for p in pods}
    assert len(blocks) == 1, blocks
    for group in ("rl-train-0-driver", "rl-train-0-workers"):
        racks = {
            labels[p["spec"]["nodeName"]][RACK]
            for p in pods
            if p["spec"]["schedulingGroup"]["podGroupName"] == group
        }
        assert len(racks) == 1, (group, racks)
    (composite,) = await eventually(
        lambda: stack.client.get("CompositePodGroup", "rl-train-0", namespace="ml"),
        lambda found: (
            bool(found)
            and (_condition(found[0], "CompositePodGroupInitiallyScheduled") or {}).get("status") == "True"
        ),
        timeout_s=10,
    )
    assert composite["status"]["podway"]["scheduled"] == 2
    assert composite["status"]["podway"]["domain"] == blocks.pop()


async def test_a_composite_whose_children_do_not_fit_together_places_none(stack: Stack) -> None:
    docs = copy.deepcopy(example("09-composite-job.yaml"))
    for doc in docs:
        if doc["kind"] == "Pod" and "workers" in doc["metadata"]["name"]:
            # 4 workers of 8 GPUs fill a rack of cluster-small; with 64 CPUs each the driver cannot share a node.
            doc["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "8"
            doc["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8"
        if doc["kind"] == "Pod" and "driver" in doc["metadata"]["name"]:
            doc["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100000"  # fits no node at all
    await stack.client.apply(docs)

    (composite,) = await eventually(
        lambda: stack.client.get("CompositePodGroup", "rl-train-0", namespace="ml"),
        lambda found: bool(found) and _condition(found[0], "CompositePodGroupInitiallyScheduled") is not None,
        timeout_s=30,
    )
    condition = _condition(composite, "CompositePodGroupInitiallyScheduled")
    assert condition is not None
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert "CompositePodGroup rl-train-0" in condition["message"]
    pods = await stack.client.get("Pod", namespace="ml")
    assert not any(p["spec"].get("nodeName") for p in pods), (
        "the worker group fits alone, yet nothing is bound"
    )
    (workers,) = await stack.client.get("PodGroup", "rl-train-0-workers", namespace="ml")
    waiting = _condition(workers, "PodGroupScheduled")
    assert waiting is not None
    assert waiting["status"] == "False"
    assert waiting["message"].startswith("CompositePodGroup rl-train-0:"), waiting["message"]
