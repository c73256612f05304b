"""The API server's change feed behind a bulk apply: one revision larger than the bus carries is read in pages,
and a watch from before it sees every object of it once (admission and the API server in-process on a real
nats-server and database)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from libs.client.client import PodwayClient
from services.admission.app import AdmissionService
from services.api_server.app import ApiServerService
from services.api_server.settings import ApiServerSettings

PODS = 900  # about 1.4 MB of manifests in one revision: more than one answer on the bus carries
BUS_PAYLOAD = 1024 * 1024
"""nats-server's default max_payload."""


@pytest.fixture
async def api(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, str]]]:
    settings = ApiServerSettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, api_port=0, api_tls=False
    )
    admission = AdmissionService(settings)
    await admission.start()
    server = ApiServerService(settings)
    await server.start()
    try:
        config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        token = config["users"][0]["user"]["token"]
        yield server.url, {"Authorization": f"Bearer {token}"}
    finally:
        await server.stop()
        await admission.stop()


def pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bulk-{index:04d}", "namespace": "bulk", "labels": {"padding": "x" * 60}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.example.com/a-long-image-name-for-a-realistic-size:v1",
                    "args": ["--flag"] * 68,
                    "resources": {"requests": {"cpu": "1"}},
                }
            ]
        },
    }


async def test_a_watch_sees_every_object_of_a_revision_larger_than_the_bus_carries(
    api: tuple[str, dict[str, str]], nats_url: str
) -> None:
    url, headers = api
    assert sum(len(json.dumps(pod(i))) for i in range(PODS)) < BUS_PAYLOAD, "one apply request carries them"
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(f"{url}/api/v1/namespaces/bulk/pods") as listed:
            since = (await listed.json())["metadata"]["resourceVersion"]
        async with PodwayClient(nats_url, timeout_s=60) as client:
            results = await client.apply([pod(i) for i in range(PODS)])
        assert all(r.outcome == "created" for r in results.results)
        seen: set[str] = set()
        params = {"watch": "true", "resourceVersion": since, "timeoutSeconds": "30"}
        async with http.get(f"{url}/api/v1/namespaces/bulk/pods", params=params) as watch:
            async for line in watch.content:
                event = json.loads(line)
                assert event["type"] in ("ADDED", "MODIFIED"), event
                seen.add(event["object"]["metadata"]["name"])
                if len(seen) == PODS:
                    break
    assert len(seen) == PODS
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.get(f"{url}/api/v1/namespaces/bulk/pods") as listed,
    ):
        stored = (await listed.json())["items"]
    assert sum(len(json.dumps(item)) for item in stored) > BUS_PAYLOAD, "as read, the revision fits no answer"
