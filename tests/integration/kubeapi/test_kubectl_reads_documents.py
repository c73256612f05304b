"""The real kubectl against the discovery and OpenAPI documents, served as they are by a tiny HTTP server:
the proof that kubectl maps names, lists resources and explains fields from them as from kube-apiserver."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from libs.kubeapi import discovery, openapi

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


def _json(document: dict[str, Any] | None, content_type: str = "application/json") -> web.Response:
    if document is None:
        raise web.HTTPNotFound()
    return web.Response(body=json.dumps(document).encode(), headers={"Content-Type": content_type})


async def _discovery_root(request: web.Request) -> web.Response:
    media = discovery.negotiate_discovery(request.headers.get("Accept"))
    core = request.path == "/api"
    if media is not None:
        return _json(discovery.aggregated_discovery(core, media), media)
    return _json(discovery.api_versions(request.host) if core else discovery.api_group_list())


async def _document(request: web.Request) -> web.Response:
    path, match = request.path, request.match_info
    if path == "/version":
        return _json(discovery.version_info())
    if path == "/openapi/v2":
        return _json(openapi.openapi_v2())
    if path == "/openapi/v3":
        return _json(openapi.openapi_v3_index("test"))
    if path.startswith("/openapi/v3/"):
        parts = match["path"].split("/")
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        return _json(openapi.openapi_v3_document(group, version))
    if "version" in match:
        return _json(discovery.api_resource_list(match.get("group", ""), match["version"]))
    return _json(discovery.api_group(match["group"]))


def _app() -> web.Application:
    app = web.Application()
    for root in ("/api", "/apis"):
        app.router.add_get(root, _discovery_root)
    for path in ("/version", "/api/{version}", "/apis/{group}", "/apis/{group}/{version}", "/openapi/v2"):
        app.router.add_get(path, _document)
    app.router.add_get("/openapi/v3", _document)
    app.router.add_get("/openapi/v3/{path:.+}", _document)
    return app


@pytest.fixture
async def server() -> AsyncIterator[str]:
    runner = web.AppRunner(_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def kubectl(server: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl ARGS` against the server, with no kubeconfig and a fresh discovery cache."""
    command = [KUBECTL or "kubectl", f"--server={server}", f"--cache-dir={tmp_path / 'cache'}", *args]
    env = {"KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    return await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, env=env, timeout=60
    )


async def test_api_resources_lists_every_served_resource(server: str, tmp_path: Path) -> None:
    run = await kubectl(server, tmp_path, "api-resources")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert "pods po v1 true Pod" in [" ".join(line.split()) for line in lines]
    assert "podgroups pg scheduling.k8s.io/v1beta1 true PodGroup" in [
        " ".join(line.split()) for line in lines
    ]
    assert "compositepodgroups cpg scheduling.k8s.io/v1alpha3 true CompositePodGroup" in [
        " ".join(line.split()) for line in lines
    ]
    assert "clusterqueues cq kueue.x-k8s.io/v1beta2 false ClusterQueue" in [
        " ".join(line.split()) for line in lines
    ]
    assert "localqueues queue,queues,lq kueue.x-k8s.io/v1beta2 true LocalQueue" in [
        " ".join(line.split()) for line in lines
    ]
    assert len(lines) == 1 + 19  # Workloads and PodGroups are listed once, under their newest version


async def test_explain_reads_the_v1beta1_shapes_by_default(server: str, tmp_path: Path) -> None:
    run = await kubectl(server, tmp_path, "explain", "podgroups.spec")
    assert run.returncode == 0, run.stderr
    assert "VERSION:    v1beta1" in run.stdout
    assert "workloadRef\t<WorkloadReference>" in run.stdout
    assert "disruptionMode\t<DisruptionMode>" in run.stdout


async def test_explain_reads_upstream_names_and_list_semantics(server: str, tmp_path: Path) -> None:
    run = await kubectl(server, tmp_path, "explain", "pods.spec.containers")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("KIND:       Pod\nVERSION:    v1\n")
    assert "FIELD: containers <[]Container>" in run.stdout
    assert "resources\t<ResourceRequirements>" in run.stdout


async def test_explain_an_alpha_version(server: str, tmp_path: Path) -> None:
    run = await kubectl(
        server, tmp_path, "explain", "podgroups.spec", "--api-version=scheduling.k8s.io/v1alpha2"
    )
    assert run.returncode == 0, run.stderr
    assert "GROUP:      scheduling.k8s.io" in run.stdout
    assert "schedulingPolicy\t<PodGroupSchedulingPolicy>" in run.stdout
