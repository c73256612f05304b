"""`pods/log` for pods the process runtime runs: their containers' output, read from the log files the node
agent keeps (`status.podwayRuntime.logDir`), as kubelet serves it: `container`, `previous`, `tailLines`,
`limitBytes` and `follow`. The files are read where the API server runs: a pod on another host's agent is
answered with where its logs are."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from libs.kubeapi import status
from libs.runtime.pod_logs import log_file, read_run
from services.api_server.answers import Refused
from services.api_server.requests import flag, int_param

FOLLOW_POLL_S = 0.25
"""How often a followed log is read again while its pod runs."""
ENDED = ("Succeeded", "Failed")


def log_dir(pod: dict[str, Any]) -> Path:
    """Where the agent keeps the pod's logs; refused, in the API server's words, when it keeps none here."""
    name = pod["metadata"]["name"]
    runtime = (pod.get("status") or {}).get("podwayRuntime") or {}
    if not runtime.get("logDir"):
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise Refused(
                status.bad_request(f'pod "{name}" has no container logs yet: it is not bound to a node')
            )
        message = (
            f'pod "{name}" has no container logs: its node {node} runs a simulated kubelet, which runs no '
            "containers"
        )
        raise Refused(status.bad_request(message))
    directory = Path(str(runtime["logDir"]))
    if not directory.is_dir():
        node = (pod.get("spec") or {}).get("nodeName")
        message = f'the logs of pod "{name}" are on the host of node {node}: run `podway logs {name}` there'
        raise Refused(status.failure(404, "NotFound", message))
    return directory


def chosen_container(pod: dict[str, Any], asked: str | None) -> str:
    """The container asked for, or the pod's only one; refused as the API server refuses otherwise."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    names = [c.get("name") for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]]
    if asked is None:
        main = [c.get("name") for c in spec.get("containers") or []]
        if len(main) == 1:
            return str(main[0])
        message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(main)}]"
        raise Refused(status.bad_request(message))
    if asked not in names:
        raise Refused(status.bad_request(f"container {asked} is not valid for pod {name}"))
    return asked


def tail(text: str, lines: int | None, limit: int | None) -> str:
    """The last `lines` lines, then at most `limit` bytes from the start of what is left (kubelet's order)."""
    if lines is not None:
        kept = text.splitlines(keepends=True)
        text = "".join(kept[-lines:]) if lines > 0 else ""
    if limit is not None:
        text = text.encode()[:limit].decode(errors="ignore")
    return text


async def serve_log(
    request: web.Request, pod: dict[str, Any], reread: Callable[[], Awaitable[dict[str, Any]]]
) -> web.StreamResponse:
    """The container's log; with `follow`, streamed as it grows until the pod has ended."""
    query = request.query
    directory = log_dir(pod)
    container = chosen_container(pod, query.get("container"))
    previous = flag(query.get("previous"))
    path = log_file(directory, container, previous=previous)
    if path is None:
        qualifier = "previous terminated container" if previous else "container"
        message = f'{qualifier} "{container}" in pod "{pod["metadata"]["name"]}" not found'
        raise Refused(status.bad_request(message))
    text = tail(
        read_run(path),
        int_param("tailLines", query.get("tailLines")),
        int_param("limitBytes", query.get("limitBytes")),
    )
    if not flag(query.get("follow")) or previous:
        return web.Response(text=text, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(text.encode())
    sent = len(read_run(path).encode())
    while True:
        ended = ((await reread()).get("status") or {}).get("phase") in ENDED
        body = read_run(path).encode()
        if len(body) > sent:
            await response.write(body[sent:])
            sent = len(body)
        if ended:
            break
        await asyncio.sleep(FOLLOW_POLL_S)
    await response.write_eof()
    return response
