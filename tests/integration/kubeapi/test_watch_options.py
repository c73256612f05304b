"""A watch's options over the REST API as client-go's reflector sends them: a watch-list
(`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`, bookmarks allowed, from no resourceVersion)
gets every object, then the bookmark that ends them, then changes; `sendInitialEvents=false` starts from
now; options the API server refuses are refused in its words. Admission and the API server in-process on a
real nats-server and database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import SQLITE_ONLY
from tests.integration.kubeapi.conftest import admission_and_api

pytestmark = [SQLITE_ONLY, pytest.mark.nats]
PODS = "/api/v1/namespaces/watched/pods"
INITIAL_END = "k8s.io/initial-events-end"


@dataclass
class Api:
    url: str
    session: aiohttp.ClientSession

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        async with self.session.request(method, self.url + path, data=data) as response:
            return response.status, json.loads(await response.read() or b"null")

    async def create(self, name: str) -> str:
        code, created = await self.call("POST", PODS, pod(name))
        assert code == 201, created
        return str(created["metadata"]["resourceVersion"])


@pytest.fixture
async def api(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with admission_and_api(nats_url, database_url, tmp_path) as (_, server, token):
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=30)) as session:
            yield Api(server.url, session)


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "watched"},
        "spec": {"containers": [{"name": "c", "image": "registry.example.com/app:v1"}]},
    }


async def events_until(
    watch: aiohttp.ClientResponse, done: Any, *, most: int = 50
) -> list[tuple[str, dict[str, Any]]]:
    """The watch's events, read until `done(events)` holds (each read bounded by the session's timeout)."""
    events: list[tuple[str, dict[str, Any]]] = []
    while not done(events):
        line = await asyncio.wait_for(watch.content.readline(), timeout=20)
        assert line, f"the watch ended after {events}"
        event = json.loads(line)
        events.append((event["type"], event["object"]))
        assert len(events) <= most, events
    return events


def names(events: list[tuple[str, dict[str, Any]]], kind: str) -> list[str]:
    return [obj["metadata"]["name"] for type_, obj in events if type_ == kind]


async def test_a_watch_list_from_no_revision_ends_its_initial_events_with_a_bookmark(api: Api) -> None:
    await api.create("first")
    await api.create("second")
    params = {
        "watch": "1",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "resourceVersion": "",
        "timeoutSeconds": "30",
    }
    async with api.session.get(api.url + PODS, params=params) as watch:
        assert watch.status == 200
        initial = await events_until(watch, lambda seen: any(t == "BOOKMARK" for t, _ in seen))
        assert sorted(names(initial, "ADDED")) == ["first", "second"]
        kind, bookmark = initial[-1]
        assert kind == "BOOKMARK"
        assert bookmark["metadata"]["annotations"] == {INITIAL_END: "true"}
        end = int(bookmark["metadata"]["resourceVersion"])
        assert end >= max(int(obj["metadata"]["resourceVersion"]) for _, obj in initial[:-1])
        revision = await api.create("third")
        later = await events_until(watch, lambda seen: "third" in names(seen, "ADDED"))
        assert int(revision) > end
        assert names(later, "ADDED") == ["third"]


async def test_a_watch_list_from_a_revision_also_ends_with_the_bookmark(api: Api) -> None:
    revision = await api.create("first")
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "resourceVersion": revision,
    }
    async with api.session.get(api.url + PODS, params=params) as watch:
        initial = await events_until(watch, lambda seen: any(t == "BOOKMARK" for t, _ in seen))
    assert names(initial, "ADDED") == ["first"]
    assert initial[-1][1]["metadata"]["annotations"] == {INITIAL_END: "true"}


async def test_a_legacy_watch_from_no_revision_gets_the_objects_and_no_initial_end_bookmark(api: Api) -> None:
    await api.create("first")
    params = {"watch": "true", "allowWatchBookmarks": "true"}
    async with api.session.get(api.url + PODS, params=params) as watch:
        seen = await events_until(watch, lambda seen: "first" in names(seen, "ADDED"))
        await api.create("second")
        seen += await events_until(watch, lambda seen: "second" in names(seen, "ADDED"))
    assert not [obj for kind, obj in seen if kind == "BOOKMARK" and obj["metadata"].get("annotations")]


async def test_without_initial_events_a_watch_from_no_revision_starts_from_now(api: Api) -> None:
    await api.create("before")
    params = {"watch": "true", "sendInitialEvents": "false", "resourceVersionMatch": "NotOlderThan"}
    async with api.session.get(api.url + PODS, params=params) as watch:
        await api.create("after")
        seen = await events_until(watch, lambda seen: "after" in names(seen, "ADDED"))
    assert names(seen, "ADDED") == ["after"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"sendInitialEvents": "true"},
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
            "NotOlderThan",
        ),
        (
            {"resourceVersionMatch": "NotOlderThan"},
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
            "sendInitialEvents is provided",
        ),
        (
            {"sendInitialEvents": "true", "resourceVersionMatch": "Exact"},
            "[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
            'NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]',
        ),
    ],
)
async def test_watch_options_the_api_server_refuses_are_refused_in_its_words(
    api: Api, params: dict[str, str], message: str
) -> None:
    async with api.session.get(api.url + PODS, params={"watch": "true", **params}) as refused:
        assert refused.status == 422
        answer = await refused.json()
    assert answer["reason"] == "Invalid"
    assert answer["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'
    assert answer["details"]["causes"][0]["field"] == "resourceVersionMatch"


async def test_initial_events_asked_of_a_list_are_refused(api: Api) -> None:
    async with api.session.get(api.url + PODS, params={"sendInitialEvents": "true"}) as refused:
        assert refused.status == 422
        answer = await refused.json()
    assert answer["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'
    )
