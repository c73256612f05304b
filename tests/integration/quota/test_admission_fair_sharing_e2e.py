"""Admission fair sharing end to end, on a real nats-server and database: two namespaces' LocalQueues share one
ClusterQueue with `UsageBasedAdmissionFairSharing`; the scheduler writes each LocalQueue's decayed usage in its
status, and once the queue frees up the gang of the LocalQueue that used less goes first, though it came later."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.quota.teams import Teams, gang, running_teams
from tests.support import eventually

QUEUE = "shared"
SHARED_QUEUE: list[dict[str, Any]] = [
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": QUEUE},
        "spec": {
            "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h200",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "64"},
                                {"name": "memory", "nominalQuota": "512Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "64"},
                            ],
                        }
                    ],
                }
            ],
        },
    },
    *(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": QUEUE},
        }
        for namespace in ("llm", "vision")
    ),
]


def queued(name: str, namespace: str) -> list[dict[str, Any]]:
    """A gang of 8 pods of 8 GPUs (the whole queue) in the shared LocalQueue of its namespace."""
    documents = gang(name, namespace, 8, "batch")
    for document in documents:
        document["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = QUEUE
    return documents


@pytest.fixture
async def teams(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Teams]:
    async with running_teams(
        nats_url,
        database_url,
        tmp_path,
        admission_fair_sharing_half_life_seconds=2.0,
        admission_fair_sharing_sampling_seconds=0.2,
    ) as running:
        yield running


async def consumed_gpus(teams: Teams, namespace: str) -> float:
    (queue,) = await teams.client.get("LocalQueue", QUEUE, namespace=namespace)
    status = ((queue.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
    return float((status.get("consumedResources") or {}).get("nvidia.com/gpu", "0"))


async def test_the_local_queue_that_used_less_is_admitted_first_and_its_usage_is_in_its_status(
    teams: Teams,
) -> None:
    await teams.client.apply(SHARED_QUEUE)
    first = queued("llm-first", "llm")
    await teams.client.apply(first)
    await teams.running("llm", "llm-first", 8)
    used = await eventually(lambda: consumed_gpus(teams, "llm"), lambda gpus: gpus >= 8, timeout_s=30)
    assert used <= 64
    assert await consumed_gpus(teams, "vision") == 0

    await teams.client.apply(queued("llm-next", "llm"))
    await eventually(
        lambda: teams.conditions("llm", "llm-next"),
        lambda found: found.get("QuotaReserved", {}).get("status") == "False",
        timeout_s=30,
    )
    await teams.client.apply(queued("vision-next", "vision"))
    for document in reversed(first):
        await teams.client.delete(document["kind"], document["metadata"]["name"], namespace="llm")

    await teams.running("vision", "vision-next", 8)
    # llm-next is tried again once vision-next holds the quota; its condition is written a moment later.
    waiting = await eventually(
        lambda: teams.conditions("llm", "llm-next"),
        lambda found: "insufficient unused quota" in found.get("QuotaReserved", {}).get("message", ""),
        timeout_s=30,
    )
    assert waiting["QuotaReserved"]["status"] == "False", "vision-next holds it now"
