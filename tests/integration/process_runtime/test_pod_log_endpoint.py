"""`pods/log` on the Kubernetes API endpoint for pods the process runtime ran: the official client reads a
container's output (all of it, its tail, the run before a restart), and the refusals are the API server's."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
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


GATED = python(
    "import pathlib,time\nprint('first')\n"
    "while not pathlib.Path('go').exists(): time.sleep(0.02)\nprint('second')\n"
)
"""A container that prints a line, waits until the test creates `go` in its working directory, prints another
and exits."""


async def _running_after_its_first_line(process_stack: ProcessStack, api: Any, name: str) -> None:
    """Start `GATED` as pod `name` and wait until it runs and its log holds its first line."""
    from kubernetes.client import ApiException

    await process_stack.client.apply([pod(name, GATED, container={"workingDir": str(process_stack.work)})])
    found = await eventually(
        lambda: get_pod(process_stack, name), lambda p: phase(p) == "Running", timeout_s=30
    )
    assert phase(found) == "Running"

    async def log() -> str:
        try:
            return str(await asyncio.to_thread(api.read_namespaced_pod_log, name, NAMESPACE))
        except ApiException:  # no log file yet: the container is starting
            return ""

    assert await eventually(log, lambda text: text == "first\n", timeout_s=30) == "first\n"


async def test_the_official_client_follows_a_running_process_pods_log_until_it_ends(
    process_stack: ProcessStack, api: Any
) -> None:
    await _running_after_its_first_line(process_stack, api, "followed")
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def follow() -> None:
        response = api.read_namespaced_pod_log(
            "followed", NAMESPACE, follow=True, _preload_content=False, _request_timeout=60
        )
        try:
            for line in response:
                loop.call_soon_threadsafe(lines.put_nowait, line.decode())
        finally:
            response.release_conn()
            loop.call_soon_threadsafe(lines.put_nowait, None)

    following = asyncio.ensure_future(asyncio.to_thread(follow))
    try:
        assert await asyncio.wait_for(lines.get(), 30) == "first\n"
        assert not following.done(), "the stream stays open while the container runs"
        assert phase(await get_pod(process_stack, "followed")) == "Running"
        (process_stack.work / "go").touch()
        assert await asyncio.wait_for(lines.get(), 30) == "second\n"
        assert await asyncio.wait_for(lines.get(), 30) is None, "the stream ends once the container exits"
        assert phase(await get_pod(process_stack, "followed")) == "Succeeded"
    finally:
        (process_stack.work / "go").touch()
        await asyncio.wait_for(following, 60)


async def _stderr(process: asyncio.subprocess.Process) -> str:
    """What a process wrote on stderr, once it has exited (a failure's explanation)."""
    assert process.stderr is not None
    return (await asyncio.wait_for(process.stderr.read(), 30)).decode()


@pytest.fixture
async def kubeconfig(
    process_stack: ProcessStack, nats_url: str, database_url: str, tmp_path: Path
) -> AsyncIterator[Path]:
    """The kubeconfig of an API server on TLS (kubectl sends a kubeconfig's token only over TLS)."""
    server = ApiServerService(
        ApiServerSettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path / "tls", api_port=0)
    )
    await server.start()
    try:
        yield tmp_path / "tls" / "kubeconfig"
    finally:
        await server.stop()


async def test_kubectl_logs_follows_a_running_process_pod_until_it_ends(
    process_stack: ProcessStack, api: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH (the machine image has v1.32)")
    await _running_after_its_first_line(process_stack, api, "tailed")
    following = await asyncio.create_subprocess_exec(
        kubectl,
        f"--kubeconfig={kubeconfig}",
        "logs",
        "-f",
        "-n",
        NAMESPACE,
        "pod/tailed",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert following.stdout is not None
    try:
        first = await asyncio.wait_for(following.stdout.readline(), 30)
        assert first == b"first\n", await _stderr(following)
        assert following.returncode is None, "kubectl follows while the container runs"
        (process_stack.work / "go").touch()
        assert await asyncio.wait_for(following.stdout.readline(), 30) == b"second\n"
        assert await asyncio.wait_for(following.stdout.read(), 30) == b"", "it ends with the container"
        assert await asyncio.wait_for(following.wait(), 30) == 0
        assert phase(await get_pod(process_stack, "tailed")) == "Succeeded"
    finally:
        (process_stack.work / "go").touch()
        if following.returncode is None:
            following.terminate()
        await following.wait()
