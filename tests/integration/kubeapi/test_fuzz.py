"""The Kubernetes REST API under fuzz: admission and the API server in-process on a real nats-server and
database, driven by 10,000 generated HTTP requests (bad JSON and YAML, wrong content types, unknown groups,
versions and kinds, oversize bodies, patches that do not apply, watches from garbage or forgotten
resourceVersions). Every answer is the API server's: no 5xx, every refusal a `Status` whose code is the HTTP
code, and a refused write leaves nothing behind. Then the refusals users meet most, worded exactly as
kube-apiserver words them.

The cases are drawn from a seeded generator: the suite draws the same ones every run (a red build means a
change broke something); `HYPOTHESIS_PROFILE=explore` draws new ones, and a failure names its seed."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest
import yaml

from libs.client.client import PodwayClient
from libs.db.engine import create_engine, create_session_factory
from libs.db.uow import unit_of_work_factory
from libs.kubeapi.security import ADMIN, VIEWER
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.api_server.app import ApiServerService
from services.api_server.requests import MAX_BODY
from services.api_server.settings import ApiServerSettings
from tests.conftest import SQLITE_ONLY

pytestmark = [SQLITE_ONLY, pytest.mark.nats]

CASES: Final = 10_000
SEED: Final = (
    random.SystemRandom().randrange(2**32) if os.environ.get("HYPOTHESIS_PROFILE") == "explore" else 20260607
)
CONCURRENCY: Final = 24
FUZZ_NS: Final = "fz"
KEPT_NS: Final = "kept"
"""Where the objects the fuzz must not lose live: no generated request names this namespace."""

STATUS_REASONS: Final = frozenset(
    {
        "",
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    }
)
"""`metav1.StatusReason`'s values (`StatusReasonUnknown` is the empty string, left out of the JSON)."""

NOT_FOUND: Final = "the server could not find the requested resource"
JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC: Final = "application/strategic-merge-patch+json"
APPLY: Final = "application/apply-patch+yaml"


# ---------------------------------------------------------------- the stack


@dataclass
class KubeApi:
    url: str
    admin: str
    viewer: str
    database_url: str
    data_dir: Path
    session: aiohttp.ClientSession

    def headers(self, token: str | None = None, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.admin}", **extra}

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str | None = "application/json",
        params: dict[str, str] | None = None,
        raw: bool = False,
    ) -> tuple[int, Any]:
        """The answer's code and its JSON (its bytes with `raw`, a watch's events for one)."""
        data = body if isinstance(body, bytes | None) else json.dumps(body).encode()
        headers = self.headers()
        if content_type is not None:
            headers["Content-Type"] = content_type
        async with self.session.request(
            method, self.url + path, data=data, headers=headers, params=params
        ) as response:
            answer = await response.read()
        return response.status, (answer if raw or not answer.startswith(b"{") else json.loads(answer))


KEPT: Final[list[dict[str, Any]]] = [
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kept-pod", "namespace": KEPT_NS, "labels": {"app": "kept"}},
        "spec": {"containers": [{"name": "c", "image": "kept:v1"}]},
    },
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "kept-job", "namespace": KEPT_NS},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "kept:v1"}]}
            }
        },
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "kept-priority"},
        "value": 7,
    },
]


@pytest.fixture
async def kube_api(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[KubeApi]:
    """Admission and the API server (plain HTTP) in-process, with objects in `kept` written before the API
    server starts (so its change feed begins after them)."""
    settings = PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path)
    admission = AdmissionService(settings)
    await admission.start()
    async with PodwayClient(nats_url, timeout_s=30) as client:
        for manifest in KEPT:  # one revision each
            await client.apply([manifest])
    server = ApiServerService(
        ApiServerSettings(
            nats_url=nats_url, database_url=database_url, data_dir=tmp_path, api_port=0, api_tls=False
        )
    )
    try:
        await server.start()
        assert server.tokens is not None
        admin, viewer = server.tokens.token_of(ADMIN.name), server.tokens.token_of(VIEWER.name)
        assert admin is not None
        assert viewer is not None
        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            yield KubeApi(server.url, admin, viewer, database_url, tmp_path, session)
    finally:
        await server.stop()
        await admission.stop()


# ---------------------------------------------------------------- what every answer must be


def check_status(code: int, body: Any, where: str) -> None:
    """A refusal is a `Status` of kube-apiserver's shape whose code is the HTTP code."""
    assert isinstance(body, dict), f"{where}: {code} answered with a non-Status body {body!r:.300}"
    assert (body.get("kind"), body.get("apiVersion")) == ("Status", "v1"), f"{where}: {body}"
    assert body.get("status") == "Failure", f"{where}: {body}"
    assert body.get("code") == code, f"{where}: HTTP {code} but Status code {body.get('code')}"
    assert isinstance(body.get("message"), str), f"{where}: {body}"
    assert body["message"], f"{where}: {body}"
    assert body.get("reason", "") in STATUS_REASONS, f"{where}: reason {body.get('reason')!r}"


UPSTREAM_500: Final = ("does not contain declared merge key", "unknown patch type")
"""What kube-apiserver itself answers with 500 and no reason: a strategic merge patch error that
`interpretStrategicMergePatchError` passes through as a plain error (`ErrorToAPIStatus`)."""


def check_answer(method: str, code: int, content_type: str, raw: bytes, where: str) -> None:
    if code >= 500:
        body = json.loads(raw) if raw.startswith(b"{") else {}
        upstream = "reason" not in body and any(text in body.get("message", "") for text in UPSTREAM_500)
        assert (code, upstream) == (500, True), f"{where}: {code} {raw[:600]!r}"
    if code < 300 or method == "HEAD":
        return
    assert content_type == "application/json", f"{where}: {code} {content_type} {raw[:300]!r}"
    check_status(code, json.loads(raw), where)


def check_watch(raw: bytes, where: str) -> None:
    """A watch's body: one event a line; an ERROR event carries a Status."""
    for line in raw.splitlines():
        event = json.loads(line)
        assert event["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"), f"{where}: {event}"
        if event["type"] == "ERROR":
            check_status(event["object"]["code"], event["object"], where)


# ---------------------------------------------------------------- the cases


@dataclass
class Case:
    family: str
    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    chunked: bool = False
    token: str | None = "admin"
    writes: tuple[str, str] | None = None
    """(collection path, name) of a write that may create an object (what the leftovers check forgives)."""

    def describe(self) -> str:
        shown = self.body[:120] if self.body is not None else None
        return f"[{self.family}] {self.method} {self.path[:200]} {self.params[:6]} {self.headers} {shown!r}"


GROUP_VERSIONS: Final = [
    ("/api/v1", ""),
    ("/apis/batch/v1", "batch"),
    ("/apis/scheduling.k8s.io/v1", "scheduling.k8s.io"),
    ("/apis/scheduling.k8s.io/v1alpha2", "scheduling.k8s.io"),
    ("/apis/scheduling.k8s.io/v1alpha1", "scheduling.k8s.io"),
    ("/apis/resource.k8s.io/v1", "resource.k8s.io"),
    ("/apis/events.k8s.io/v1", "events.k8s.io"),
]
BAD_GROUP_VERSIONS: Final = [
    "/api/v2",
    "/api",
    "/apis/batch/v2",
    "/apis/apps/v1",
    "/apis/batch",
    "/apis/nope.example.com/v1",
    "/apis/scheduling.k8s.io/v9",
    "/apis/%2e%2e/v1",
    "/apis/ünïcødé/v1",
    "/api/v1beta1",
]
NAMESPACED: Final = {
    "/api/v1": ["pods", "events"],
    "/apis/batch/v1": ["jobs"],
    "/apis/scheduling.k8s.io/v1alpha2": ["workloads", "podgroups"],
    "/apis/scheduling.k8s.io/v1alpha1": ["workloads"],
    "/apis/resource.k8s.io/v1": ["resourceclaims", "resourceclaimtemplates"],
    "/apis/events.k8s.io/v1": ["events"],
}
CLUSTER: Final = {
    "/api/v1": ["namespaces", "nodes"],
    "/apis/scheduling.k8s.io/v1": ["priorityclasses"],
    "/apis/resource.k8s.io/v1": ["deviceclasses", "resourceslices"],
}
BAD_RESOURCES: Final = ["deployments", "pod", "Pods", "services", "", "..", "configmaps", "x" * 300, "pöds"]
SUBRESOURCES: Final = ["status", "log", "eviction", "scale", "binding", "..", "exec", "status/extra"]


def pod(name: str, namespace: str = FUZZ_NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"fuzz": "yes"},
            "annotations": {"podway.io/run-seconds": "600"},
        },
        "spec": {"containers": [{"name": "c", "image": "img:v1", "resources": {"requests": {"cpu": "1"}}}]},
    }


def manifests(name: str) -> dict[str, dict[str, Any]]:
    """A valid manifest of every writable kind, by its collection path in namespace `fz`."""
    meta = {"name": name, "labels": {"fuzz": "yes"}}
    ns_meta = {**meta, "namespace": FUZZ_NS}
    containers = [{"name": "c", "image": "img:v1"}]
    return {
        f"/api/v1/namespaces/{FUZZ_NS}/pods": pod(name),
        "/api/v1/namespaces": {"apiVersion": "v1", "kind": "Namespace", "metadata": meta},
        "/api/v1/nodes": {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": meta,
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
        },
        f"/apis/batch/v1/namespaces/{FUZZ_NS}/jobs": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": ns_meta,
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": containers}}},
        },
        "/apis/scheduling.k8s.io/v1/priorityclasses": {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta,
            "value": 10,
        },
        f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{FUZZ_NS}/workloads": {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": ns_meta,
            "spec": {"podGroupTemplates": [{"name": "w", "schedulingPolicy": {"gang": {"minCount": 2}}}]},
        },
        f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{FUZZ_NS}/podgroups": {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": ns_meta,
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        },
        "/apis/resource.k8s.io/v1/deviceclasses": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": meta,
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        },
        f"/apis/resource.k8s.io/v1/namespaces/{FUZZ_NS}/resourceclaims": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": ns_meta,
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
        },
        f"/apis/resource.k8s.io/v1/namespaces/{FUZZ_NS}/resourceclaimtemplates": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": ns_meta,
            "spec": {
                "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}
            },
        },
        "/apis/resource.k8s.io/v1/resourceslices": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": meta,
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            },
        },
    }


DEEP_POD: Final = (
    b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"rejected-deep"},"spec":'
    + b'{"a":' * 5000
    + b"1"
    + b"}" * 5001
)


class Generator:
    """Requests drawn from one seed."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.serial = 0

    def pick(self, options: list[Any]) -> Any:
        return options[self.r.randrange(len(options))]

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def name(self, prefix: str = "fz") -> str:
        self.serial += 1
        return f"{prefix}-{self.serial}"

    def garbage_name(self) -> str:
        return self.pick(
            [
                self.name(),
                "fz-" + "a" * self.pick([64, 253, 254, 300, 5000]),
                "fz-ünïcødé-☃",
                "..",
                ".",
                "fz-%2F",
                "FZ-UPPER",
                "fz-a.b",
                "fz_under",
                "-fz",
                "fz-\u0000",
                "fz-%00",
                "fz-%ff",
                "fz-" + "😀" * 20,
            ]
        )

    def garbage_text(self) -> str:
        return self.pick(
            [
                "",
                "!!!",
                "a=",
                "=b",
                "a in (",
                "a notin ()",
                "a,,b",
                "a==b==c",
                "metadata.name=" + "x" * 500,
                "spec.nodeName!=n1,status.phase=Running",
                "nope.field=x",
                "a=" + "b" * 64,
                "ü=ö",
                "\u0000",
                "%",
                "a in (b,c),!d",
                "x" * 10_000,
                "-1",
                "9" * 40,
                "1e9",
                "true",
            ]
        )

    # --- families ---

    def route(self) -> Case:
        method = self.pick(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE"])
        shape = self.r.randrange(8)
        gv, _ = self.pick(GROUP_VERSIONS)
        if shape == 0:
            path = self.pick(BAD_GROUP_VERSIONS) + self.pick(["", "/pods", "/namespaces/fz/jobs/x"])
        elif shape == 1:
            path = f"{gv}/{self.pick(BAD_RESOURCES)}"
        elif shape == 2:
            resource = self.pick(NAMESPACED.get(gv, ["pods"]))
            path = f"{gv}/namespaces/{self.pick([FUZZ_NS, '..', 'x' * 300, 'Ünï'])}/{resource}/{self.garbage_name()}/{self.pick(SUBRESOURCES)}"
        elif shape == 3:
            cluster = self.pick(CLUSTER.get(gv, ["nodes"]))
            path = f"{gv}/namespaces/{FUZZ_NS}/{cluster}"
        elif shape == 4:
            path = self.pick(
                [
                    "/",
                    "//",
                    "/api/v1/../../etc/passwd",
                    "/apis/../api/v1/pods",
                    "/openapi/v3/apis/nope/v1",
                    "/openapi/v3/api/v2",
                    "/openapi/v3/x",
                    "/openapi/v3/a/b/c/d",
                    "/version/x",
                    "/apis/batch/v1/namespaces",
                    "/api/v1/namespaces/fz/pods/a/b/c/d",
                    "/api/v1/namespaces/fz-none",
                    "/%ff%fe",
                    "/api/v1/" + "x/" * 200,
                    "/metrics",
                    "/logs",
                ]
            )
        elif shape == 5:
            path = f"{gv}/{self.pick(['namespaces', 'nodes', 'pods'])}/{self.garbage_name()}/{self.pick(SUBRESOURCES)}"
        elif shape == 6:
            path = self.pick(["/version", "/api", "/apis", "/openapi/v2", "/openapi/v3", gv, "/healthz"])
        else:
            path = "/" + "".join(
                self.pick(["a", "/", "..", "%2F", "ü", "api", "v1", "~", " "]) for _ in range(20)
            )
        headers = {}
        if self.chance(0.3):
            headers["Accept"] = self.pick(
                [
                    "application/json;as=Table;v=v1;g=meta.k8s.io",
                    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
                    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                    "text/html",
                    "*/*",
                    "garbage",
                ]
            )
        # A write to a path that names a real collection is a write: keep its body undecodable, and let a
        # delete select nothing (`/apis/../api/v1/pods` is `/api/v1/pods`).
        params = [("labelSelector", "fuzz=yes,nothing=matches")] if method == "DELETE" else []
        body = b"{" if method in ("POST", "PUT") else None
        return Case("route", method, path, params=params, headers=headers, body=body)

    def auth(self) -> Case:
        gv, _ = self.pick(GROUP_VERSIONS)
        path = f"{gv}/{self.pick(CLUSTER.get(gv, ['nodes']))}"
        token = self.pick([None, "viewer", "not-a-token", ""])
        method = self.pick(["GET", "POST", "DELETE"]) if token == "viewer" else "GET"
        case = Case("auth", method, path, token=token, body=b"{}" if method == "POST" else None)
        if token == "viewer" and method == "DELETE":
            case.path = f"/api/v1/namespaces/{FUZZ_NS}/pods/{self.name('rejected')}"
        return case

    def body(self) -> Case:
        """A create or update whose body is refused before admission sees it."""
        collection = self.pick(list(manifests("x")))
        name = self.name("rejected")
        method = self.pick(["POST", "PUT"])
        path = collection if method == "POST" else f"{collection}/{name}"
        content_type = self.pick(
            [
                "application/json",
                "application/yaml",
                "application/json; charset=utf-8",
                "text/plain",
                "application/xml",
                "application/vnd.kubernetes.protobuf",
                "",
                "garbage/garbage",
                "application/",
                None,
            ]
        )
        body = self.pick(
            [
                b"",
                b"{",
                b'{"a": }',
                b"[1, 2]",
                b'"a string"',
                b"42",
                b"null",
                b"\xff\xfe\xfd",
                b'{"metadata": "\xff"}',
                b"metadata:\n\t- bad",
                b"a: b: c",
                b"{{{{",
                b"- a\n- b",
                b"[" * 100_000,
                b'{"a":' * 50_000,
                b"key: [unclosed",
                b"\x00\x01\x02",
                '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ünï"}'.encode(),
                b"--- \n--- \n",
                b"!!python/object:os.system ls",
                b"&a [*a]",
                DEEP_POD,
                DEEP_POD.replace(b"{", b"[").replace(b"}", b"]"),
            ]
        )
        headers = {} if content_type is None else {"Content-Type": content_type}
        return Case("body", method, path, headers=headers, body=body)

    def oversize(self) -> Case:
        collection = self.pick(list(manifests("x")))
        method = self.pick(["POST", "PUT", "PATCH"])
        name = self.name("rejected")
        path = collection if method == "POST" else f"{collection}/{name}"
        size = MAX_BODY + self.pick([1, 1024, 512 * 1024])
        manifest = pod(name)
        manifest["metadata"]["annotations"]["big"] = "x" * size
        content_type = MERGE_PATCH if method == "PATCH" else "application/json"
        return Case(
            "oversize",
            method,
            path,
            headers={"Content-Type": content_type},
            body=json.dumps(manifest).encode(),
            chunked=self.chance(0.5),
        )

    def query(self) -> Case:
        gv, _ = self.pick(GROUP_VERSIONS)
        if gv in NAMESPACED and self.chance(0.6):
            path = f"{gv}/namespaces/{self.pick([FUZZ_NS, 'nowhere'])}/{self.pick(NAMESPACED[gv])}"
        else:
            path = f"{gv}/{self.pick(CLUSTER.get(gv, NAMESPACED.get(gv, ['pods'])))}"
        params: list[tuple[str, str]] = []
        for key in self.r.sample(
            [
                "limit",
                "continue",
                "labelSelector",
                "fieldSelector",
                "resourceVersion",
                "resourceVersionMatch",
                "fieldValidation",
                "dryRun",
                "fieldManager",
                "pretty",
                "allowWatchBookmarks",
                "sendInitialEvents",
                "timeoutSeconds",
                "gracePeriodSeconds",
                "propagationPolicy",
            ],
            k=self.r.randrange(1, 5),
        ):
            params.append((key, self.pick([self.garbage_text(), "1", "0", "-5", "abc", "All", "true"])))
        if self.chance(0.15):
            params.append(("labelSelector", "fuzz=yes"))
        if self.chance(0.3):
            params.append(("continue", self.pick(["eyJhIjoxfQ", "eyJhIjoieCIsInJ2IjoieSJ9", "!!!", "e30"])))
        method = "GET" if self.chance(0.9) else "DELETE"
        if method == "DELETE":
            # A collection delete selects nothing: it must not take the objects the others work on.
            params = [(key, value) for key, value in params if key != "labelSelector"]
            params.insert(0, ("labelSelector", "fuzz=yes,nothing=matches"))
        return Case("query", method, path, params=params)

    def watch(self) -> Case:
        gv, _ = self.pick(GROUP_VERSIONS)
        path = f"{gv}/{self.pick(CLUSTER.get(gv, NAMESPACED.get(gv, ['pods'])))}"
        params = [("watch", self.pick(["true", "1", "True"]))]
        params.append(
            (
                "timeoutSeconds",
                self.pick(
                    ["0", "0", "0", "0", "abc", "-1", "nan", "1e999", "1.5", "1" if self.chance(0.3) else "0"]
                ),
            )
        )
        if self.chance(0.7):
            params.append(("resourceVersion", self.pick(["0", "1", "2", "abc", "-3", "9" * 30, "", "1.5"])))
        if self.chance(0.3):
            params.append(("labelSelector", self.garbage_text()))
        if self.chance(0.2):
            params.append(("fieldSelector", self.garbage_text()))
        if self.chance(0.2):
            params.append(("allowWatchBookmarks", "true"))
        if self.chance(0.2):
            params.append(("sendInitialEvents", "true"))
        headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"} if self.chance(0.2) else {}
        return Case("watch", "GET", path, params=params, headers=headers)

    def patch_type(self) -> Case:
        """A patch whose content type no patcher takes (415), or whose body is refused before the write."""
        collection = self.pick(list(manifests("x")))
        content_type = self.pick(
            [
                "application/json",
                "application/yaml",
                "text/plain",
                "",
                "application/json-patch",
                None,
                JSON_PATCH,
                MERGE_PATCH,
                STRATEGIC,
                APPLY,
            ]
        )
        headers = {} if content_type is None else {"Content-Type": content_type}
        return Case(
            "patch_type",
            "PATCH",
            f"{collection}/{self.name('rejected')}",
            headers=headers,
            body=self.pick([b"{}", b"[]", b"{", b"\xff"]),
        )

    def write(self, live: list[tuple[str, str]]) -> Case:
        """A manifest of a real kind, mutated: admission decides."""
        name = self.name("fz")
        collection, manifest = self.pick(list(manifests(name).items()))
        mutations = self.r.randrange(0, 4)
        for _ in range(mutations):
            manifest = self.mutate(manifest)
        if self.chance(0.5):
            method, path = "POST", collection
        else:
            method = "PUT"
            if self.chance(0.5) and live:
                collection, existing = self.pick(live)
                name = existing
                meta = manifest.get("metadata")
                if isinstance(meta, dict):
                    meta["name"] = existing
            path = f"{collection}/{name}"
        encoded, content_type = self.encode(manifest)
        params = []
        if self.chance(0.2):
            params.append(("dryRun", "All"))
        if self.chance(0.2):
            params.append(("fieldValidation", self.pick(["Strict", "Warn", "Ignore", "Bogus"])))
        written_name = (
            (manifest.get("metadata") or {}).get("name")
            if isinstance(manifest.get("metadata"), dict)
            else None
        )
        return Case(
            "write",
            method,
            path,
            params=params,
            headers={"Content-Type": content_type},
            body=encoded,
            writes=(collection, str(written_name if method == "POST" else name)),
        )

    def mutate(self, manifest: dict[str, Any]) -> dict[str, Any]:
        manifest = copy.deepcopy(manifest)
        paths = list(_leaves(manifest))
        target, key = self.pick(paths)
        choice = self.r.randrange(13)
        if choice == 0:
            del target[key]
        elif choice == 1:
            target[key] = self.pick([1, -1, 2**70, 1.5, True, None, "str", [], {}, [1, "a"], {"a": None}])
        elif choice == 2:
            holder = target if isinstance(target, dict) else manifest
            holder[self.pick(["unknownField", "spec", "status", "$patch", "", "metadata"])] = {"x": 1}
        elif choice == 3:
            target[key] = "x" * self.pick([1000, 100_000, 1_000_000])
        elif choice == 4:
            nested: Any = "leaf"
            for _ in range(self.pick([10, 50, 150])):
                nested = {"n": nested} if self.chance(0.5) else [nested]
            target[key] = nested
        elif choice == 5:
            manifest["kind"] = self.pick(["Deployment", "pod", "", 7, None, "Job"])
        elif choice == 6:
            manifest["apiVersion"] = self.pick(["v2", "apps/v1", "", None, 3, "batch/v1", "v1"])
        elif choice == 7:
            manifest["metadata"] = self.pick([None, [], "m", {"name": ""}, {"generateName": "fz-"}])
        elif choice == 8 and isinstance(manifest.get("metadata"), dict):
            manifest["metadata"]["name"] = self.garbage_name()
        elif choice == 9 and isinstance(manifest.get("metadata"), dict):
            manifest["metadata"]["namespace"] = self.pick(["other", "", "Ünï", FUZZ_NS, None, 5])
        elif choice == 10 and isinstance(manifest.get("metadata"), dict):
            manifest["metadata"]["resourceVersion"] = self.pick(["abc", "-1", "1", "999999", 5, "", None])
        elif choice == 11 and isinstance(manifest.get("metadata"), dict):
            manifest["metadata"]["labels"] = self.pick(
                [{"a": 1}, {"": "x"}, {"k" * 300: "v"}, {"ok": "v" * 300}, "labels", {"a/b/c": "d"}]
            )
        elif choice == 12:
            target[key] = "\ud800" if self.chance(0.1) else "ünïcødé ☃ \u0000"
        return manifest

    def encode(self, manifest: Any) -> tuple[bytes, str]:
        how = self.r.randrange(4)
        try:
            if how == 0:
                text = yaml.dump(manifest, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
                return text.encode("utf-8", "surrogatepass"), "application/yaml"
            if how == 1:
                text = json.dumps(manifest)
                return text.encode("utf-8", "surrogatepass")[
                    : self.r.randrange(1, len(text) + 1)
                ], "application/json"
        except (yaml.YAMLError, RecursionError, UnicodeEncodeError):
            pass
        return json.dumps(manifest).encode("utf-8", "surrogatepass"), self.pick(
            ["application/json", "application/json; charset=utf-8"]
        )

    def patch(self, live: list[tuple[str, str]]) -> Case:
        """A patch of every type on an object that exists (or not): admission decides what applies."""
        collection, name = (
            self.pick(live)
            if live and self.chance(0.85)
            else (f"/api/v1/namespaces/{FUZZ_NS}/pods", self.name("fz"))
        )
        content_type = self.pick([JSON_PATCH, MERGE_PATCH, STRATEGIC, APPLY])
        if content_type == JSON_PATCH:
            operation = self.pick(
                [
                    {"op": "add", "path": "/metadata/labels/fz", "value": "yes"},
                    {"op": "replace", "path": "/metadata/labels/nope", "value": "x"},
                    {"op": "remove", "path": "/spec/nothing"},
                    {"op": "test", "path": "/metadata/name", "value": "other"},
                    {"op": "move", "from": "/nowhere", "path": "/metadata/labels/x"},
                    {"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/copied"},
                    {"op": "add", "path": "/spec/containers/99", "value": {}},
                    {"op": "add", "path": "/spec/containers/-", "value": {"name": "d", "image": "x"}},
                    {"op": "replace", "path": "", "value": [1]},
                    {"op": "replace", "path": "", "value": None},
                    {"op": "remove", "path": ""},
                    {"op": "bogus", "path": "/a"},
                    {"op": "add", "path": 5, "value": 1},
                    {"op": "add", "path": "no-slash", "value": 1},
                    {"op": "add", "path": "/metadata/labels/a~1b", "value": "c"},
                    {"op": "add", "path": "/spec/containers/-1", "value": {"name": "e", "image": "x"}},
                    {"op": "remove", "path": "/spec/containers/abc"},
                    {"op": "add", "path": "/metadata/name", "value": "renamed"},
                    {"op": "add", "path": "/metadata/resourceVersion", "value": "1"},
                    {"op": "add", "path": "/metadata/resourceVersion", "value": "abc"},
                    {"op": "add", "path": "/kind", "value": "Other"},
                    {"op": "add", "path": "/metadata/namespace", "value": "elsewhere"},
                    {"op": "add", "path": "/metadata/labels/x", "value": "y" * 200_000},
                    "not-an-operation",
                    {},
                ]
            )
            document: Any = self.pick([[operation], [operation] * 3, operation, "ops", None, []])
        elif content_type in (MERGE_PATCH, STRATEGIC):
            document = self.pick(
                [
                    {"metadata": {"labels": {"fz": self.pick(["a", None, 1, "ü"])}}},
                    {"spec": {"containers": [{"image": "no-name"}]}},
                    {"spec": {"containers": [{"name": "c", "$patch": "delete"}]}},
                    {"spec": {"$patch": self.pick(["replace", "delete", "bogus", 5])}},
                    {"metadata": {"$deleteFromPrimitiveList/finalizers": self.pick(["a", ["a"]])}},
                    {"metadata": {"$setElementOrder/finalizers": self.pick(["a", ["a"]])}},
                    {"spec": {"$retainKeys": self.pick(["a", ["containers"], [5]]), "x": 1}},
                    {"spec": {"containers": [[1]]}},
                    {"spec": {"containers": [{"name": {"a": 1}, "image": "x"}]}},
                    {"spec": {"containers": "none"}},
                    {"metadata": {"name": "renamed"}},
                    {"metadata": {"resourceVersion": self.pick(["1", "abc", "-1", 2])}},
                    {"metadata": None},
                    {"kind": "Other", "apiVersion": "v9"},
                    [1, 2],
                    "string",
                    None,
                    7,
                    {"$patch": "replace", "metadata": {"name": name}},
                    {"$patch": "delete"},
                ]
            )
        else:
            document = self.pick(
                [
                    {"metadata": {"name": name, "labels": {"fz": "applied"}}},
                    {"apiVersion": "v2", "kind": "Pod", "metadata": {"name": name}},
                    {"metadata": {"name": "other-name"}},
                    [1, 2],
                    "scalar",
                    None,
                ]
            )
        if self.chance(0.1):
            raw = self.pick([b"{", b"[", b"\xff\xfe", b"", b"a: b: c", b"null", b'{"a":' * 50_000])
        elif content_type == APPLY and self.chance(0.5):
            raw = yaml.safe_dump(document).encode()
        else:
            raw = json.dumps(document).encode()
        params = []
        if content_type == APPLY and self.chance(0.8):
            params.append(("fieldManager", self.pick(["fuzz", "fuzz", "other", "x" * 200])))
        if self.chance(0.2):
            params.append(("force", self.pick(["true", "false", "maybe"])))
        if self.chance(0.15):
            params.append(("dryRun", self.pick(["All", "None", "bogus"])))
        writes = (collection, name) if content_type == APPLY else None
        return Case(
            "patch",
            "PATCH",
            f"{collection}/{name}",
            params=params,
            headers={"Content-Type": content_type},
            body=raw,
            writes=writes,
        )

    def read(self, live: list[tuple[str, str]]) -> Case:
        if live and self.chance(0.5):
            collection, name = self.pick(live)
        else:
            collection, name = self.pick(list(manifests("x"))), self.garbage_name()
        sub = self.pick(["", "", "", "/status"])
        headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"} if self.chance(0.2) else {}
        method = "GET" if self.chance(0.8) else "DELETE"
        if method == "DELETE":
            sub = ""
            name = self.name("rejected")
        return Case("read", method, f"{collection}/{name}{sub}", headers=headers)


def _leaves(node: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every place in a manifest."""
    found: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((node, key))
            found += _leaves(value)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.append((node, index))
            found += _leaves(value)
    return found


FAMILIES: Final[list[tuple[str, int]]] = [
    # Answered before admission is asked.
    ("route", 4000),
    ("auth", 400),
    ("body", 2638),
    ("patch_type", 700),
    ("query", 1000),
    ("watch", 300),
    ("oversize", 12),
    # Through admission (and some of query, watch and patch_type).
    ("write", 450),
    ("patch", 300),
    ("read", 200),
]
assert sum(count for _, count in FAMILIES) == CASES


# ---------------------------------------------------------------- the run


@dataclass
class Tally:
    by_family: dict[str, dict[int, int]] = field(default_factory=dict)
    created: set[tuple[str, str]] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)

    def count(self, family: str, code: int) -> None:
        codes = self.by_family.setdefault(family, {})
        codes[code] = codes.get(code, 0) + 1


async def send(api: KubeApi, case: Case, tally: Tally) -> None:
    tokens = {"admin": api.admin, "viewer": api.viewer}
    headers = dict(case.headers)
    if case.token is not None:
        headers["Authorization"] = f"Bearer {tokens.get(case.token, case.token)}"
    data: Any = case.body
    if case.chunked and case.body is not None:
        body = case.body

        async def stream() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 256 * 1024):
                yield body[start : start + 256 * 1024]

        data = stream()
    where = f"seed {SEED}: {case.describe()}"
    try:
        async with api.session.request(
            case.method, api.url + case.path, params=case.params, headers=headers, data=data
        ) as response:
            raw = await response.read()
            code, content_type = response.status, response.content_type
    except (aiohttp.ClientError, TimeoutError) as error:
        tally.failures.append(f"{where}: {type(error).__name__}: {error}")
        return
    tally.count(case.family, code)
    try:
        check_answer(case.method, code, content_type, raw, where)
        if case.family == "watch" and code == 200:
            check_watch(raw, where)
    except AssertionError as error:
        tally.failures.append(str(error))
        return
    except ValueError as error:
        tally.failures.append(f"{where}: {code} {error}: {raw[:300]!r}")
        return
    dry = ("dryRun", "All") in case.params
    if case.writes is not None and code in (200, 201) and not dry:
        collection, name = case.writes
        if code == 201:  # what was created, by the name it got (a generateName draws one)
            name = str((json.loads(raw).get("metadata") or {}).get("name") or name)
        tally.created.add((collection, name))


async def live_objects(api: KubeApi, tally: Tally, gen: Generator) -> list[tuple[str, str]]:
    """A few objects of each kind for the fuzz to update, patch and read."""
    live = []
    for _ in range(3):
        name = gen.name("fz-live")
        for collection, manifest in manifests(name).items():
            code, _ = await api.call("POST", collection, body=manifest)
            if code == 201:
                live.append((collection, name))
                tally.created.add((collection, name))
    return live


async def fuzz(api: KubeApi, seed: int) -> Tally:
    gen = Generator(seed)
    tally = Tally()
    tally.created.add(("/api/v1/namespaces", FUZZ_NS))  # there while it holds the fuzz's objects
    live = await live_objects(api, tally, gen)
    makers: dict[str, Callable[[], Case]] = {
        "route": gen.route,
        "auth": gen.auth,
        "body": gen.body,
        "patch_type": gen.patch_type,
        "query": gen.query,
        "watch": gen.watch,
        "oversize": gen.oversize,
        "write": lambda: gen.write(live),
        "patch": lambda: gen.patch(live),
        "read": lambda: gen.read(live),
    }
    cases = [makers[family]() for family, count in FAMILIES for _ in range(count)]
    gen.r.shuffle(cases)
    queue: asyncio.Queue[Case] = asyncio.Queue()
    for case in cases:
        queue.put_nowait(case)

    async def worker() -> None:
        while not queue.empty():
            await send(api, queue.get_nowait(), tally)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return tally


JOBS: Final = f"/apis/batch/v1/namespaces/{FUZZ_NS}/jobs"


async def fuzz_names(api: KubeApi) -> set[tuple[str, str]]:
    """(collection, name) of every object in the fuzz's namespace or cluster-wide with a fuzz name; a Job's
    pods stand for their Job."""
    found = set()
    for collection in manifests("x"):
        code, body = await api.call("GET", collection)
        assert code == 200, body
        for item in body["items"]:
            meta = item["metadata"]
            name = meta["name"]
            if name.lower().startswith(("fz", "rejected", "-fz")) or meta.get("namespace") == FUZZ_NS:
                owners = [o["name"] for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"]
                found |= {(JOBS, owner) for owner in owners} or {(collection, name)}
    return found


async def kept_objects(api: KubeApi) -> list[dict[str, Any]]:
    paths = [
        f"/api/v1/namespaces/{KEPT_NS}/pods/kept-pod",
        f"/apis/batch/v1/namespaces/{KEPT_NS}/jobs/kept-job",
        "/apis/scheduling.k8s.io/v1/priorityclasses/kept-priority",
    ]
    found = []
    for path in paths:
        code, body = await api.call("GET", path)
        assert code == 200, (path, body)
        found.append(body)
    return found


async def test_ten_thousand_malformed_requests_get_the_api_servers_answers(kube_api: KubeApi) -> None:
    kept = await kept_objects(kube_api)
    started = time.monotonic()
    tally = await fuzz(kube_api, SEED)
    elapsed = time.monotonic() - started
    sent = sum(sum(codes.values()) for codes in tally.by_family.values())
    print(f"fuzz seed {SEED}: {sent} requests in {elapsed:.1f} s; codes by family {tally.by_family}")
    assert not tally.failures, f"{len(tally.failures)} bad answers, e.g.:\n" + "\n".join(tally.failures[:15])
    assert sent == CASES
    # Still serving, having lost nothing and kept no refused write.
    code, version = await kube_api.call("GET", "/version")
    assert code == 200
    assert version["gitVersion"]
    assert await kept_objects(kube_api) == kept
    leftovers = await fuzz_names(kube_api) - tally.created
    assert not leftovers, f"refused writes left objects: {sorted(leftovers)[:20]}"


# ---------------------------------------------------------------- the refusals users meet, worded exactly


def refused(code: int, body: Any, reason: str, message: str) -> None:
    check_status(code, body, "refusal")
    assert (code, body.get("reason", ""), body["message"]) == (body["code"], reason, message)


async def test_the_api_servers_refusals_word_for_word(kube_api: KubeApi) -> None:
    api, pods = kube_api, f"/api/v1/namespaces/{FUZZ_NS}/pods"
    code, body = await api.call("GET", "/apis/apps/v1/namespaces/fz/deployments")
    assert code == 404
    refused(code, body, "NotFound", NOT_FOUND)
    code, body = await api.call("GET", "/api/v1/namespaces/fz/pods/x/exec")
    refused(code, body, "NotFound", NOT_FOUND)
    code, body = await api.call("GET", "/api/v1/pods/x")  # named outside its namespace (was looked up)
    refused(code, body, "NotFound", NOT_FOUND)

    code, body = await api.call("POST", pods, body=b'{"kind": "Pod",')
    assert code == 400
    refused(code, body, "BadRequest", body["message"])
    assert body["message"].startswith("the object provided is unrecognized: ")

    code, body = await api.call("PATCH", f"{pods}/x", body=b"{}", content_type="application/json")
    assert code == 415
    refused(
        code,
        body,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC}, {APPLY}",
    )

    big = pod("rejected-big")
    big["metadata"]["annotations"]["big"] = "x" * MAX_BODY
    code, body = await api.call("POST", pods, body=big)
    assert code == 413
    refused(code, body, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}")

    code, created = await api.call("POST", pods, body=pod("twice"))
    assert code == 201, created
    code, body = await api.call("POST", pods, body=pod("twice"))
    assert code == 409
    refused(code, body, "AlreadyExists", 'pods "twice" already exists')
    assert body["details"] == {"name": "twice", "kind": "pods"}

    code, body = await api.call("GET", f"{pods}/nowhere")
    assert code == 404
    refused(code, body, "NotFound", 'pods "nowhere" not found')

    test_fails = [{"op": "test", "path": "/metadata/name", "value": "other"}]
    code, body = await api.call("PATCH", f"{pods}/twice", body=test_fails, content_type=JSON_PATCH)
    assert code == 422
    refused(code, body, "Invalid", "the server rejected our request due to an error in our request")

    stale = created  # as read before the label below was written
    code, _ = await api.call(
        "PATCH", f"{pods}/twice", body={"metadata": {"labels": {"moved": "on"}}}, content_type=MERGE_PATCH
    )
    assert code == 200
    code, body = await api.call("PUT", f"{pods}/twice", body=stale)
    assert code == 409
    refused(
        code,
        body,
        "Conflict",
        'Operation cannot be fulfilled on pods "twice": the object has been modified; please apply your '
        "changes to the latest version and try again",
    )


async def test_a_watch_from_a_compacted_revision_ends_with_410_expired(kube_api: KubeApi) -> None:
    pods = f"/api/v1/namespaces/{FUZZ_NS}/pods"
    assert (await kube_api.call("POST", pods, body=pod("gone")))[0] == 201
    assert (await kube_api.call("DELETE", f"{pods}/gone"))[0] == 200
    engine = create_engine(kube_api.database_url)
    try:
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            current, _ = await uow.revisions.current()
            await uow.revisions.compact(current)
            await uow.commit()
    finally:
        await engine.dispose()
    params = {"watch": "true", "resourceVersion": "1", "timeoutSeconds": "5"}
    code, raw = await kube_api.call("GET", "/api/v1/pods", params=params, raw=True)
    assert code == 200
    events = [json.loads(line) for line in raw.splitlines()]
    assert [event["type"] for event in events] == ["ERROR"]
    refused(410, events[0]["object"], "Expired", f"too old resource version: 1 ({current})")


# ---------------------------------------------------------------- what the fuzz found, kept as cases


async def test_what_the_fuzz_found_is_refused_as_the_api_server_refuses_it(kube_api: KubeApi) -> None:
    api, pods = kube_api, f"/api/v1/namespaces/{FUZZ_NS}/pods"
    # timeoutSeconds is an integer (it was a float: `abc` a 500, `1e999` a watch that never ended).
    for garbage in ("abc", "1e999", "1.5"):
        code, body = await api.call("GET", "/api/v1/pods", params={"watch": "1", "timeoutSeconds": garbage})
        refused(code, body, "BadRequest", f'strconv.ParseInt: parsing "{garbage}": invalid syntax')
    code, body = await api.call("GET", pods, params={"limit": "9" * 40})
    refused(code, body, "BadRequest", f'strconv.ParseInt: parsing "{"9" * 40}": value out of range')
    # Bodies nested past the decoders' depth (were a RecursionError: 500).
    for content_type in ("application/json", "application/yaml"):
        code, body = await api.call(
            "POST", pods, body=DEEP_POD.replace(b"{", b"["), content_type=content_type
        )
        assert (code, body["reason"]) == (400, "BadRequest"), body
    code, body = await api.call("POST", pods, body=DEEP_POD)
    refused(code, body, "BadRequest", "the object provided is unrecognized: exceeded max depth")
    deep = pod("rejected-deep")
    nested: Any = "leaf"
    for _ in range(150):
        nested = {"n": nested}
    deep["spec"]["nested"] = nested
    code, body = await api.call("POST", pods, body=deep)
    refused(code, body, "BadRequest", "document 1: nested deeper than 100 levels")
    # metadata of the wrong type (was an AttributeError or TypeError: 500).
    code, body = await api.call("POST", pods, body={**pod("rejected-meta"), "metadata": True})
    refused(
        code,
        body,
        "BadRequest",
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal bool into Go struct field '
        "Pod.metadata of type v1.ObjectMeta",
    )
    # A patch body that is not UTF-8 (was a UnicodeDecodeError: 500).
    code, body = await api.call("PATCH", f"{pods}/rejected-x", body=b"\xff", content_type=APPLY)
    assert code == 400 or code == 422, body
    # A lone surrogate quoted back in a refusal (was aiohttp's plain-text 500).
    code, body = await api.call(
        "POST", pods, body=b'apiVersion: "\\uD800"\nkind: Pod\n', content_type="application/yaml"
    )
    assert (code, body["reason"]) == (400, "BadRequest"), body
    # An object the bus cannot carry as a change event (was admitted, and wedged the outbox relay).
    huge = pod("rejected-huge")
    huge["metadata"]["annotations"]["big"] = "x" * 1_000_000
    code, body = await api.call("POST", pods, body=huge)
    assert (code, body["reason"]) == (413, "RequestEntityTooLarge"), body
    assert (await api.call("GET", f"{pods}/rejected-huge"))[0] == 404
    # A patch that renames is a 400 (was retried as a conflict, then a 409).
    assert (await api.call("POST", pods, body=pod("named")))[0] == 201
    renamed = {"metadata": {"name": "renamed"}}
    code, body = await api.call("PATCH", f"{pods}/named", body=renamed, content_type=MERGE_PATCH)
    refused(
        code,
        body,
        "BadRequest",
        "the name of the object (renamed) does not match the name on the URL (named)",
    )
    # kube-apiserver's own 500: a strategic merge error passed through, with no reason (was reason "Unknown").
    code, body = await api.call(
        "PATCH", f"{pods}/named", body={"spec": {"containers": [{"image": "x"}]}}, content_type=STRATEGIC
    )
    assert (code, "reason" in body) == (500, False), body
    assert body["message"] == "map: map[image:x] does not contain declared merge key: name"
    # A dry-run delete deletes nothing (it deleted the object, or the whole collection).
    for path in (f"{pods}/named", pods, f"/api/v1/namespaces/{FUZZ_NS}"):
        code, body = await api.call("DELETE", path, params={"dryRun": "All"})
        assert code in (200, 202), body
    assert (await api.call("GET", f"{pods}/named"))[0] == 200
    # A long label selector fits in the request line, as in Go's 1 MiB of headers (was a plain-text 400).
    selector = "app in (" + ",".join(f"v{i}" for i in range(2000)) + ")"
    code, body = await api.call("GET", pods, params={"labelSelector": selector})
    assert (code, body["items"]) == (200, []), body
    # The stack still writes: its change feed (and so the outbox behind it) moves on.
    code, listed = await api.call("GET", pods)
    before = int(listed["metadata"]["resourceVersion"])
    assert (await api.call("POST", pods, body=pod("after")))[0] == 201
    params = {"watch": "1", "resourceVersion": str(before), "timeoutSeconds": "1"}
    code, raw = await api.call("GET", pods, params=params, raw=True)
    assert b'"name":"after"' in raw, raw


async def test_over_tls_with_the_kubeconfigs_ca(nats_url: str, database_url: str, tmp_path: Path) -> None:
    """The one smoke over HTTPS: the fuzz runs on plain HTTP for speed."""
    import ssl

    settings = PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path)
    admission = AdmissionService(settings)
    await admission.start()
    server = ApiServerService(
        ApiServerSettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path, api_port=0)
    )
    try:
        await server.start()
        assert server.url.startswith("https://")
        assert (tmp_path / "kubeconfig").exists()
        context = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
        assert server.tokens is not None
        headers = {"Authorization": f"Bearer {server.tokens.token_of(ADMIN.name)}"}
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/api/v1/pods/x", headers=headers, ssl=context) as response:
                assert response.status == 404
                body = await response.json()
            async with session.post(
                f"{server.url}/api/v1/namespaces/fz/pods",
                headers={**headers, "Content-Type": "application/json"},
                data=b"{",
                ssl=context,
            ) as response:
                assert response.status == 400
        refused(404, body, "NotFound", NOT_FOUND)
    finally:
        await server.stop()
        await admission.stop()
