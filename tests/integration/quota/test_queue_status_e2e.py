"""Queue status end to end: the two teams on a real nats-server and database, a gang of llm's borrowing part of
what vision lends and another waiting for quota; the ClusterQueue, its LocalQueue and the Cohort read through
the client and the Kubernetes API endpoint show what is used, borrowed, admitted and pending, and a gang whose
pods are gone gives its quota back (`QuotaReserved` False)."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from libs.kubeapi.security import ADMIN
from services.api_server.app import ApiServerService
from services.api_server.settings import ApiServerSettings
from tests.integration.quota.teams import Teams, gang
from tests.support import eventually

GPU = "nvidia.com/gpu"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@pytest.fixture
async def kube_api(teams: Teams, nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Any]:
    """GET on the Kubernetes API endpoint, as the admin: (status code, JSON answer)."""
    server = ApiServerService(
        ApiServerSettings(
            nats_url=nats_url, database_url=database_url, data_dir=tmp_path, api_port=0, api_tls=False
        )
    )
    await server.start()
    try:
        assert server.tokens is not None
        token = server.tokens.token_of(ADMIN.name)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:

            async def get(path: str, accept: str = "application/json") -> tuple[int, Any]:
                headers = {"Authorization": f"Bearer {token}", "Accept": accept}
                async with session.get(server.url + path, headers=headers) as response:
                    return response.status, json.loads(await response.read())

            yield get
    finally:
        await server.stop()


def usage_of(status: dict[str, Any], resource: str) -> dict[str, str]:
    ((flavor,),) = [[f for f in status.get("flavorsUsage") or [] if f["name"] == "h200"]]
    (used,) = [r for r in flavor["resources"] if r["name"] == resource]
    return used


async def test_a_borrowing_queue_shows_its_usage_counts_and_share_to_the_client_and_the_endpoint(
    teams: Teams, kube_api: Any
) -> None:
    # 1. vision runs 16 GPUs; llm runs 48 pods of 8 GPUs: 384, 64 past its nominal 320; a second gang of 128
    # would pass the 448 the cohort lets llm use, and waits.
    await teams.client.apply(gang("vision-small", "vision", 2, "batch"))
    await teams.running("vision", "vision-small", 2)
    await teams.client.apply(gang("llm-big", "llm", 48, "batch"))
    await teams.running("llm", "llm-big", 48)
    await teams.client.apply(gang("llm-more", "llm", 16, "batch"))
    await eventually(
        lambda: teams.conditions("llm", "llm-more"),
        lambda found: found.get("QuotaReserved", {}).get("status") == "False",
        timeout_s=30,
    )

    # 2. The ClusterQueue through the client: one admitted, one pending, 64 GPUs borrowed.
    (llm,) = await teams.client.get("ClusterQueue", "team-llm")
    status = llm["status"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"], status["admittedWorkloads"]) == (
        1,
        1,
        1,
    )
    assert usage_of(status, GPU) == {"name": GPU, "total": "384", "borrowed": "64"}
    assert usage_of(status, "cpu") == {"name": "cpu", "total": "384", "borrowed": "0"}
    assert usage_of(status, "memory") == {"name": "memory", "total": "3Ti", "borrowed": "0"}
    assert status["flavorsReservation"] == status["flavorsUsage"]
    # 64 borrowed of the 448 the cohort could lend (llm's 320, and the 128 vision lends), at weight 2.
    assert status["fairSharing"] == {"weightedShare": math.ceil(64 * 1000 / 448 / 2)}
    (active,) = [c for c in status["conditions"] if c["type"] == "Active"]
    assert (active["status"], active["reason"], active["message"]) == (
        "True",
        "Ready",
        "Can admit new workloads",
    )
    (vision,) = await teams.client.get("ClusterQueue", "team-vision")
    assert (vision["status"]["pendingWorkloads"], vision["status"]["admittedWorkloads"]) == (0, 1)
    assert usage_of(vision["status"], GPU) == {"name": GPU, "total": "16", "borrowed": "0"}

    # 3. Its LocalQueue shows the same gangs, and the root cohort a share of 0.
    (queue,) = await teams.client.get("LocalQueue", "default", namespace="llm")
    assert (queue["status"]["pendingWorkloads"], queue["status"]["admittedWorkloads"]) == (1, 1)
    assert usage_of(queue["status"], GPU) == {"name": GPU, "total": "384"}
    (cohort,) = await teams.client.get("Cohort", "research")
    assert cohort["status"] == {"fairSharing": {"weightedShare": 0}}

    # 4. The Kubernetes API endpoint serves the same status, and its table the counts.
    code, served = await kube_api(f"{KUEUE}/clusterqueues/team-llm")
    assert code == 200, served
    assert served["status"] == status
    code, table = await kube_api(f"{KUEUE}/clusterqueues", TABLE)
    assert code == 200, table
    names = [column["name"] for column in table["columnDefinitions"]]
    rows = {row["cells"][0]: dict(zip(names, row["cells"], strict=True)) for row in table["rows"]}
    assert (rows["team-llm"]["Pending Workloads"], rows["team-llm"]["Admitted Workloads"]) == (1, 1)

    # 5. vision's gang ends (its pods deleted): it holds no quota any more, its PodGroup and queue say so.
    for pod in await teams.pods("vision", "vision-small"):
        await teams.client.delete("Pod", pod["metadata"]["name"], namespace="vision")
    released = await eventually(
        lambda: teams.conditions("vision", "vision-small"),
        lambda found: found.get("QuotaReserved", {}).get("status") == "False",
        timeout_s=30,
    )
    assert released["QuotaReserved"]["reason"] == "Finished"
    assert (
        released["QuotaReserved"]["message"]
        == "Quota released in ClusterQueue team-vision: the gang's pods ended"
    )
    (vision,) = await teams.client.get("ClusterQueue", "team-vision")
    assert (vision["status"]["pendingWorkloads"], vision["status"]["admittedWorkloads"]) == (0, 0)
    assert usage_of(vision["status"], GPU) == {"name": GPU, "total": "0", "borrowed": "0"}
