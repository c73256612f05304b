"""`pods/log` on the Kubernetes API endpoint for pods the process runtime ran: the official client reads a
container's output (all of it, its tail, the run before a restart), and the refusals are the API server's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from libs.kubeapi.security import ADMIN
from services.api_server.app import ApiServerService
from services.api_server.settings import ApiServerSettings
from tests.integration.process_runtime.conftest import NAMESPACE, ProcessStack, get_pod, phase, pod, python
from tests.support import eventually


@pytest.fixture
async def api(
    process_stack: ProcessStack, nats_url: str, database_url: str, tmp_path: Path
) -> AsyncIterator[Any]:
    from kubernetes import client

    server = ApiServerService(
        ApiServerSettings(
            nats_url=nats_url, database_url=database_url, data_dir=tmp_path / "api", api_port=0, api_tls=False
        )
    )
    await server.start()
    try:
        assert server.tokens is not None
        configuration = client.Configuration(host=server.url)
        configuration.api_key = {"authorization": server.tokens.token_of(ADMIN.name) or ""}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        yield client.CoreV1Api(client.ApiClient(configuration))
    finally:
        await server.stop()


async def test_the_official_client_reads_a_process_pods_log(process_stack: ProcessStack, api: Any) -> None:
    from kubernetes.client import ApiException

    script = 'import os\nfor i in range(3): print(f\'line {i} of try {os.environ.get("TRY", "?")}\')\n'
    flaky = python(
        "import pathlib,sys\np=pathlib.Path('tried')\nfirst=not p.exists()\np.touch()\n"
        "print('first' if first else 'second')\nsys.exit(1 if first else 0)"
    )
    await process_stack.client.apply(
        [
            pod("talker", python(script)),
            pod("flaky", flaky, restartPolicy="OnFailure", container={"workingDir": str(process_stack.work)}),
        ]
    )
    for name in ("talker", "flaky"):
        await eventually(
            lambda n=name: get_pod(process_stack, n), lambda p: phase(p) == "Succeeded", timeout_s=30
        )

    read = api.read_namespaced_pod_log
    whole = await asyncio.to_thread(read, "talker", NAMESPACE)
    last = await asyncio.to_thread(read, "talker", NAMESPACE, tail_lines=1)
    current = await asyncio.to_thread(read, "flaky", NAMESPACE, container="main")
    before = await asyncio.to_thread(read, "flaky", NAMESPACE, previous=True)

    assert whole == "line 0 of try ?\nline 1 of try ?\nline 2 of try ?\n"
    assert last == "line 2 of try ?\n"
    assert (current, before) == ("second\n", "first\n")
    with pytest.raises(ApiException) as refused:
        await asyncio.to_thread(read, "talker", NAMESPACE, container="sidecar")
    assert refused.value.status == 400
    assert json.loads(refused.value.body)["message"] == "container sidecar is not valid for pod talker"
    with pytest.raises(ApiException) as none_before:
        await asyncio.to_thread(read, "talker", NAMESPACE, previous=True)
    message = json.loads(none_before.value.body)["message"]
    assert message == 'previous terminated container "main" in pod "talker" not found'
