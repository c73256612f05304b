"""An operator's own tokens file (`podway up --api-tokens FILE`, `PODWAY_API_TOKENS_FILE`): its users are the
only ones let in, each with its groups' verbs, and the kubeconfig names the first who may write. Admission and
the API server in-process on a real nats-server and database; `podway up` refusing a file it cannot use runs
as a user runs it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from libs.client.commands.stack import api_server_env
from tests.conftest import SQLITE_ONLY
from tests.integration.cli.conftest import podway
from tests.integration.kubeapi.conftest import admission_and_api

TOKENS = """\
# the platform team's tokens
reader-token,bob,uid-bob,"podway:read-only"
writer-token,alice,uid-alice,"podway:read-write,ml-team"
"""
PODS = "/api/v1/namespaces/team/pods"


@pytest.fixture
async def api(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(TOKENS)
    settings = api_server_env_settings(tokens)
    async with admission_and_api(nats_url, database_url, tmp_path, **settings) as (_, server, _):
        yield server.url, tmp_path / "kubeconfig"


def api_server_env_settings(tokens: Path) -> dict[str, Path]:
    """What `podway up --api-tokens` hands the API server, as its setting."""
    env = api_server_env(tokens)
    return {"api_tokens_file": Path(env["PODWAY_API_TOKENS_FILE"])}


async def call(url: str, token: str, method: str, path: str, body: object = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.request(method, url + path, json=body) as response,
    ):
        return response.status, json.loads(await response.read())


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team"},
    "spec": {"containers": [{"name": "c", "image": "registry.example.com/app:v1"}]},
}


@SQLITE_ONLY
@pytest.mark.nats
async def test_the_files_users_are_let_in_with_their_groups_verbs(api: tuple[str, Path]) -> None:
    url, kubeconfig = api
    config = yaml.safe_load(kubeconfig.read_text())
    (user,) = config["users"]
    assert user == {"name": "alice", "user": {"token": "writer-token"}}

    assert (await call(url, "writer-token", "POST", PODS, POD))[0] == 201
    code, listed = await call(url, "reader-token", "GET", PODS)
    assert code == 200
    assert [p["metadata"]["name"] for p in listed["items"]] == ["p"]
    code, refused = await call(url, "reader-token", "DELETE", f"{PODS}/p")
    assert code == 403
    assert refused["message"] == (
        'pods "p" is forbidden: User "bob" cannot delete resource "pods" in API group "" in the namespace "team"'
    )
    code, unknown = await call(url, "generated-admin-token", "GET", PODS)
    assert (code, unknown["reason"]) == (401, "Unauthorized")
    code, whoami = await call(
        url,
        "writer-token",
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert code == 201
    assert whoami["status"]["userInfo"]["username"] == "alice"
    assert "ml-team" in whoami["status"]["userInfo"]["groups"]


def test_a_tokens_file_podway_up_cannot_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("# nobody yet\n")
    broken = tmp_path / "broken.csv"
    broken.write_text("just-a-token\n")
    data = tmp_path / "data"

    for path, says in (
        (tmp_path / "missing.csv", "No such file or directory"),
        (empty, "no token in it"),
        (broken, "token file line 1: expected token,user,uid[,groups]"),
    ):
        run = podway("up", "--data-dir", str(data), "--api-tokens", str(path))
        assert run.code == 2, run
        assert run.err.startswith(
            f"podway up: --api-tokens: {path}" if path != broken else "podway up: --api-tokens:"
        )
        assert says in run.err
    assert not (data / "stack.json").exists()
