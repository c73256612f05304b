"""An elastic gang through the real stack: resizing a running gang Indexed Job (parallelism with completions)
adds indexes that join the running gang's rack, and removes the highest indexes first, lowering minCount."""

from __future__ import annotations

import copy
from typing import Any

from tests.integration.lifecycle.conftest import example
from tests.integration.scheduler.conftest import Stack
from tests.support import eventually

RACK = "topology.example.com/rack"
INDEX = "batch.kubernetes.io/job-completion-index"


def _job(size: int) -> dict[str, Any]:
    (job,) = [doc for doc in copy.deepcopy(example("05-indexed-job.yaml")) if doc["kind"] == "Job"]
    job["spec"]["parallelism"] = job["spec"]["completions"] = size
    job["spec"]["template"]["metadata"]["annotations"]["podway.io/run-seconds"] = "100000"
    return job


async def _running(stack: Stack, count: int) -> list[dict[str, Any]]:
    return await eventually(
        lambda: stack.client.get("Pod", namespace="ml"),
        lambda pods: (
            len([p for p in pods if (p.get("status") or {}).get("phase") == "Running"]) == count
            and len(pods) == count
        ),
        timeout_s=30,
    )


def _index(pod: dict[str, Any]) -> int:
    metadata = pod["metadata"]
    return int((metadata.get("annotations") or {}).get(INDEX) or metadata["labels"][INDEX])


async def test_a_gang_job_grows_into_its_rack_and_shrinks_from_its_highest_indexes(stack: Stack) -> None:
    await stack.client.apply(example("01-priorityclasses.yaml") + [_job(4)])
    pods = await _running(stack, 4)
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in await stack.client.get("Node")}
    (rack,) = {labels[p["spec"]["nodeName"]][RACK] for p in pods}

    await stack.client.apply([_job(6)])
    grown = await _running(stack, 6)

    assert sorted(_index(p) for p in grown) == list(range(6))
    assert {labels[p["spec"]["nodeName"]][RACK] for p in grown} == {rack}, "new indexes join the gang's rack"
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in grown} == {"finetune-worker-0"}
    (group,) = await stack.client.get("PodGroup", "finetune-worker-0", namespace="ml")
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4, "minCount is the floor, kept on growth"

    await stack.client.apply([_job(3)])
    shrunk = await _running(stack, 3)

    assert sorted(_index(p) for p in shrunk) == [0, 1, 2]
    (group,) = await stack.client.get("PodGroup", "finetune-worker-0", namespace="ml")
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
