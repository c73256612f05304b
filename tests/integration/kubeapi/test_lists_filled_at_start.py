"""The API server decodes the pods for its lists before it listens, as kube-apiserver fills its watch cache
before it serves: the first list after a start finds them decoded. Without admission it listens at once.
Admission and the API server in-process on a real nats-server and database."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from libs.client.client import PodwayClient
from libs.kubeapi.security import ADMIN
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.api_server.app import ApiServerService
from services.api_server.settings import ApiServerSettings
from tests.conftest import SQLITE_ONLY

pytestmark = [SQLITE_ONLY, pytest.mark.nats]
PODS = 1_200  # more than one page of admission's


def pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{index:04d}", "namespace": f"ns-{index % 3}"},
        "spec": {"containers": [{"name": "c", "image": "registry.example.com/app:v1"}]},
    }


def api_settings(nats_url: str, database_url: str, tmp_path: Path, **extra: Any) -> ApiServerSettings:
    return ApiServerSettings(
        nats_url=nats_url, database_url=database_url, data_dir=tmp_path, api_port=0, api_tls=False, **extra
    )


async def test_pods_stored_before_the_start_are_decoded_before_the_first_list(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    admission = AdmissionService(
        PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path)
    )
    await admission.start()
    server = ApiServerService(api_settings(nats_url, database_url, tmp_path, api_listed_objects=1_000))
    try:
        async with PodwayClient(nats_url, timeout_s=60) as client:
            await client.apply([pod(i) for i in range(PODS)], create_only=True)
        await server.start()
        listed = server.verbs.listed
        # Filled up to its room, no further: a list of more decodes the rest as it goes.
        assert len(listed) == 1_000
        assert listed.full("Pod")
        decoded = {id(entry.shown) for entry in listed._kinds["Pod"].entries.values()}

        assert server.tokens is not None
        headers = {"Authorization": f"Bearer {server.tokens.token_of(ADMIN.name)}"}
        async with (
            aiohttp.ClientSession(headers=headers) as http,
            http.get(f"{server.url}/api/v1/pods", params={"limit": "500"}) as first,
        ):
            page = await first.json()

        in_order = sorted((i % 3, f"p-{i:04d}") for i in range(PODS))
        assert [p["metadata"]["name"] for p in page["items"]] == [name for _, name in in_order[:500]]
        # The page was shown from what the start decoded: nothing decoded again took the place of any of it.
        assert {id(entry.shown) for entry in listed._kinds["Pod"].entries.values()} == decoded
    finally:
        await server.stop()
        await admission.stop()


async def test_without_admission_the_api_server_listens_at_once(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    server = ApiServerService(api_settings(nats_url, database_url, tmp_path))
    await asyncio.wait_for(server.start(), 20)
    try:
        assert len(server.verbs.listed) == 0
        async with aiohttp.ClientSession() as http, http.get(f"{server.url}/openapi/v2") as answered:
            assert answered.status == 401  # listening: the request was read and answered
    finally:
        await server.stop()


async def test_a_pod_changed_after_the_start_lists_as_it_is_now(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    admission = AdmissionService(
        PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path)
    )
    await admission.start()
    server = ApiServerService(api_settings(nats_url, database_url, tmp_path))
    try:
        async with PodwayClient(nats_url, timeout_s=60) as client:
            await client.apply([pod(i) for i in range(3)], create_only=True)
            await server.start()
            assert len(server.verbs.listed) == 3
            # Written behind the API server's back, as by another replica: its decoded copy is now stale.
            relabelled = pod(1)
            relabelled["metadata"]["labels"] = {"team": "b"}
            await client.apply([relabelled])

        assert server.tokens is not None
        headers = {"Authorization": f"Bearer {server.tokens.token_of(ADMIN.name)}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.get(f"{server.url}/api/v1/pods") as listed:
                items = {p["metadata"]["name"]: p for p in (await listed.json())["items"]}
            async with http.get(f"{server.url}/api/v1/namespaces/ns-1/pods/p-0001") as read:
                stored = await read.json()

        assert items["p-0001"]["metadata"]["labels"] == {"team": "b"}
        assert items["p-0001"]["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        assert not items["p-0000"]["metadata"].get("labels")
    finally:
        await server.stop()
        await admission.stop()
