"""A write's options over the REST API: a create's generateName, and a delete's propagationPolicy deciding what
becomes of a Job's pods, its preconditions and dry runs; bad options are refused in kube-apiserver's words. Admission and the API server
in-process on a real nats-server and database; no scheduler, so the pods wait unbound."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient
from libs.db.records import PodBinding
from libs.events.catalogue import RpcSubject
from libs.events.rpc import GetReply, GetRequest
from libs.messaging.rpc import request
from services.admission.app import AdmissionService
from services.api_server import writes
from services.api_server.app import ApiServerService
from tests.conftest import SQLITE_ONLY
from tests.integration.kubeapi.conftest import admission_and_api
from tests.support import eventually

pytestmark = [SQLITE_ONLY, pytest.mark.nats]
EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
JOB = "/apis/batch/v1/namespaces/ml/jobs/finetune"
PODS = "/api/v1/namespaces/ml/pods"


@dataclass
class Api:
    url: str
    token: str
    session: aiohttp.ClientSession
    client: PodwayClient
    admission: AdmissionService
    server: ApiServerService

    async def call(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        async with self.session.request(
            method, self.url + path, data=data, headers=headers, params=params
        ) as response:
            return response.status, json.loads(await response.read() or b"null")

    async def pods(self) -> list[dict[str, Any]]:
        code, listed = await self.call("GET", PODS)
        assert code == 200
        return [p for p in listed["items"] if p["metadata"]["name"].startswith("finetune-")]


@pytest.fixture
async def api(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with (
        admission_and_api(nats_url, database_url, tmp_path) as (admission, server, token),
        PodwayClient(nats_url, timeout_s=30) as client,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
    ):
        docs = [
            *load_documents((EXAMPLES / "01-priorityclasses.yaml").read_text()),
            *load_documents((EXAMPLES / "05-indexed-job.yaml").read_text()),
        ]
        await client.apply(docs)
        yield Api(server.url, token, session, client, admission, server)


async def test_orphan_deletes_the_job_and_leaves_its_pods_without_the_reference(api: Api) -> None:
    code, _ = await api.call("GET", JOB)
    assert code == 200
    assert len(await api.pods()) == 8

    code, answer = await api.call("DELETE", JOB, {"kind": "DeleteOptions", "propagationPolicy": "Orphan"})

    assert code == 200, answer
    assert answer["status"] == "Success"
    assert (await api.call("GET", JOB))[0] == 404
    left = await api.pods()
    assert len(left) == 8
    assert all(not p["metadata"].get("ownerReferences") for p in left)
    code, group = await api.call(
        "GET", "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml/podgroups/finetune-worker-0"
    )
    assert code == 200
    assert not group["metadata"].get("ownerReferences")


async def test_background_deletes_the_job_and_its_pods(api: Api) -> None:
    code, answer = await api.call("DELETE", JOB, params={"propagationPolicy": "Background"})

    assert code == 200, answer
    assert (await api.call("GET", JOB))[0] == 404
    assert await api.pods() == []


async def test_the_deprecated_orphan_dependents_flag_still_orphans(api: Api) -> None:
    code, answer = await api.call("DELETE", JOB, {"orphanDependents": True})

    assert code == 200, answer
    assert len(await api.pods()) == 8


async def test_a_dry_run_delete_in_the_body_deletes_nothing(api: Api) -> None:
    code, _ = await api.call("DELETE", JOB, {"dryRun": ["All"], "propagationPolicy": "Background"})

    assert code == 200
    assert (await api.call("GET", JOB))[0] == 200
    assert len(await api.pods()) == 8


async def test_a_failed_precondition_is_a_conflict_and_deletes_nothing(api: Api) -> None:
    code, job = await api.call("GET", JOB)
    assert code == 200

    code, answer = await api.call("DELETE", JOB, {"preconditions": {"uid": "not-its-uid"}})

    assert code == 409
    assert answer["reason"] == "Conflict"
    assert answer["message"] == (
        'Operation cannot be fulfilled on jobs.batch "finetune": Precondition failed: UID in precondition: '
        f"not-its-uid, UID in object meta: {job['metadata']['uid']}"
    )
    assert (await api.call("GET", JOB))[0] == 200
    matching = {"preconditions": {"uid": job["metadata"]["uid"]}, "propagationPolicy": "Background"}
    assert (await api.call("DELETE", JOB, matching))[0] == 200


async def test_bad_options_are_refused_as_kube_apiserver_refuses_them(api: Api) -> None:
    code, answer = await api.call("DELETE", JOB, {"propagationPolicy": "Sideways"})
    assert code == 422
    assert answer["reason"] == "Invalid"
    assert answer["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": '
        'supported values: "Foreground", "Background", "Orphan", "nil"'
    )
    code, answer = await api.call("DELETE", JOB, {"propagationPolicy": "Orphan", "orphanDependents": False})
    assert code == 422
    assert "orphanDependents and deletionPropagation cannot be both set" in answer["message"]
    code, answer = await api.call("DELETE", JOB, params={"gracePeriodSeconds": "soon"})
    assert code == 400
    assert answer["message"] == 'strconv.ParseInt: parsing "soon": invalid syntax'
    code, answer = await api.call("DELETE", JOB, {"dryRun": ["Some"]})
    assert code == 422
    assert 'dryRun[0]: Unsupported value: "Some": supported values: "All"' in answer["message"]
    assert (await api.call("GET", JOB))[0] == 200
    assert len(await api.pods()) == 8


async def test_deletecollection_passes_its_propagation_on(api: Api) -> None:
    code, _ = await api.call("DELETE", "/apis/batch/v1/namespaces/ml/jobs", {"propagationPolicy": "Orphan"})

    assert code == 200
    assert (await api.call("GET", JOB))[0] == 404
    assert len(await api.pods()) == 8


GENERATED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"generateName": "batch-run-", "namespace": "ml"},
    "spec": {"containers": [{"name": "c", "image": "x"}]},
}


async def test_generate_name_gives_each_create_a_name_of_its_own(api: Api) -> None:
    names = []
    for _ in range(3):
        code, created = await api.call("POST", PODS, GENERATED_POD)
        assert code == 201, created
        names.append(created["metadata"]["name"])

    assert len(set(names)) == 3
    for name in names:
        assert re.fullmatch(r"batch-run-[bcdfghjklmnpqrstvwxz2456789]{5}", name), name
        code, read = await api.call("GET", f"{PODS}/{name}")
        assert code == 200
        assert read["metadata"]["generateName"] == "batch-run-"


async def test_a_long_prefix_is_cut_to_leave_room_and_a_bad_one_is_refused(api: Api) -> None:
    long_prefix = "p" * 70
    code, created = await api.call("POST", PODS, {**GENERATED_POD, "metadata": {"generateName": long_prefix}})
    assert code == 201, created
    assert len(created["metadata"]["name"]) == 63

    code, refused = await api.call("POST", PODS, {**GENERATED_POD, "metadata": {"generateName": "Bad_"}})
    assert code == 422
    assert 'metadata.generateName: Invalid value: "Bad_"' in refused["message"]


async def test_a_generated_name_taken_already_is_drawn_again(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn = iter(["taken-aaaaa", "taken-aaaaa", "taken-bbbbb"])
    monkeypatch.setattr(writes, "generated_name", lambda prefix: next(drawn))

    first = await api.call("POST", PODS, {**GENERATED_POD, "metadata": {"generateName": "taken-"}})
    second = await api.call("POST", PODS, {**GENERATED_POD, "metadata": {"generateName": "taken-"}})

    assert (first[0], first[1]["metadata"]["name"]) == (201, "taken-aaaaa")
    assert (second[0], second[1]["metadata"]["name"]) == (201, "taken-bbbbb")


# -- a patch starts from the object as this server last saw it, and never from a stale one ---------------


def bare_pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:v1"}]},
    }


async def patch(api: Api, name: str, body: Any, content_type: str) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {api.token}", "Content-Type": content_type}
    async with api.session.patch(
        f"{api.url}{PODS}/{name}", data=json.dumps(body), headers=headers
    ) as response:
        return response.status, json.loads(await response.read())


async def written_elsewhere(api: Api, name: str, labels: dict[str, str]) -> str:
    """The pod relabelled through admission directly, as another API server replica would: this server has
    not seen it. Its new resourceVersion."""
    reply = await api.client.apply([bare_pod(name, labels)])
    assert reply.results[0].outcome == "updated"
    asked = GetRequest(kind="Pod", namespace="ml", name=name)
    found = GetReply.model_validate_json(await request(api.client.broker, RpcSubject.ADMISSION_GET, asked))
    return str(found.item_revisions[0])


async def test_a_patch_applies_to_what_another_writer_wrote_since_this_server_saw_the_object(
    api: Api,
) -> None:
    code, created = await api.call("POST", PODS, bare_pod("seen", {"a": "1"}))
    assert code == 201
    await written_elsewhere(api, "seen", {"b": "2"})

    code, patched = await patch(
        api, "seen", {"metadata": {"labels": {"c": "3"}}}, "application/merge-patch+json"
    )

    assert code == 200
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_a_json_patch_test_that_holds_on_the_stored_object_is_not_refused_by_an_old_copy(
    api: Api,
) -> None:
    code, _ = await api.call("POST", PODS, bare_pod("tested", {"stage": "one"}))
    assert code == 201
    await written_elsewhere(api, "tested", {"stage": "two"})

    ops = [
        {"op": "test", "path": "/metadata/labels/stage", "value": "two"},
        {"op": "add", "path": "/metadata/labels/checked", "value": "yes"},
    ]
    code, patched = await patch(api, "tested", ops, "application/json-patch+json")

    assert code == 200
    assert patched["metadata"]["labels"] == {"stage": "two", "checked": "yes"}


async def test_a_patch_naming_the_current_version_is_applied_to_it_and_a_stale_one_is_a_conflict(
    api: Api,
) -> None:
    code, created = await api.call("POST", PODS, bare_pod("named", {"a": "1"}))
    assert code == 201
    current = await written_elsewhere(api, "named", {"b": "2"})

    body = {"metadata": {"resourceVersion": current, "labels": {"c": "3"}}}
    code, patched = await patch(api, "named", body, "application/merge-patch+json")
    assert code == 200
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}

    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"d": "4"}}}
    code, refused = await patch(api, "named", stale, "application/merge-patch+json")
    assert code == 409
    assert refused["reason"] == "Conflict"


async def test_a_namespace_delete_that_waits_answers_with_the_namespace_as_stored(api: Api) -> None:
    """kubectl waits for the uid the answer carries to go: the answer must be the stored, Terminating
    namespace, not the one that only existed because objects were in it."""
    (running, *_) = await api.pods()
    await bind(api, running)
    code, implicit = await api.call("GET", "/api/v1/namespaces/ml")
    assert code == 200

    code, answered = await api.call("DELETE", "/api/v1/namespaces/ml")

    assert code == 200
    assert answered["status"]["phase"] == "Terminating"
    code, stored = await api.call("GET", "/api/v1/namespaces/ml")
    assert code == 200
    assert answered["metadata"]["uid"] == stored["metadata"]["uid"] != implicit["metadata"]["uid"]


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


async def table(api: Api, path: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {api.token}", "Accept": TABLE}
    async with api.session.get(api.url + path, headers=headers) as response:
        assert response.status == 200
        found: dict[str, Any] = json.loads(await response.read())
        return found


def without_ages(listed: dict[str, Any]) -> list[Any]:
    """A Table's rows but their last cell, the age (which a second may change)."""
    return [(row["cells"][:-1], row["object"]) for row in listed["rows"]]


async def test_lists_in_every_version_read_the_objects_as_stored_and_what_changed_since(api: Api) -> None:
    workloads = "/apis/scheduling.k8s.io/{}/namespaces/ml/workloads"
    _, v1alpha1 = await api.call("GET", workloads.format("v1alpha1"))
    _, v1alpha2 = await api.call("GET", workloads.format("v1alpha2"))
    _, v1alpha1_again = await api.call("GET", workloads.format("v1alpha1"))
    first = await table(api, PODS)
    _, pods = await api.call("GET", PODS)

    # The same objects, listed in one version then another, each in its own (one shown never changes another).
    (workload,) = v1alpha1["items"]
    (stored,) = v1alpha2["items"]
    assert "podGroups" in workload["spec"]
    assert "podGroups" not in stored["spec"]
    assert stored["spec"]["podGroupTemplates"]
    assert v1alpha1_again["items"] == v1alpha1["items"]
    assert without_ages(await table(api, PODS)) == without_ages(first)
    name = pods["items"][0]["metadata"]["name"]
    code, patched = await patch(
        api, name, {"metadata": {"labels": {"seen": "again"}}}, "application/merge-patch+json"
    )
    assert code == 200

    after = await table(api, PODS)
    _, pods_after = await api.call("GET", PODS)

    row = next(r for r in after["rows"] if r["cells"][0] == name)
    assert row["object"]["metadata"]["labels"]["seen"] == "again"
    assert row["object"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    listed = next(p for p in pods_after["items"] if p["metadata"]["name"] == name)
    assert listed == patched
    unchanged = [p for p in pods_after["items"] if p["metadata"]["name"] != name]
    assert unchanged == [p for p in pods["items"] if p["metadata"]["name"] != name]


async def test_the_page_after_a_page_answered_is_decoded_before_its_client_asks_for_it(api: Api) -> None:
    listed = api.server.verbs.listed
    code, first = await api.call("GET", PODS, params={"limit": "1"})
    assert code == 200
    assert first["metadata"]["continue"]

    # The next two pages are read ahead and decoded meanwhile: three objects kept, one of them answered.
    assert await eventually(lambda: asyncio.sleep(0, len(listed)), lambda kept: kept >= 3) >= 3


async def test_a_list_shows_what_another_replica_wrote_since_this_server_listed_it(api: Api) -> None:
    code, _ = await api.call("POST", PODS, bare_pod("elsewhere", {"a": "1"}))
    assert code == 201
    _, before = await api.call("GET", PODS)
    revision = await written_elsewhere(api, "elsewhere", {"b": "2"})

    _, after = await api.call("GET", PODS)
    listed = await table(api, PODS)

    (pod,) = [p for p in after["items"] if p["metadata"]["name"] == "elsewhere"]
    assert pod["metadata"]["labels"] == {"b": "2"}
    assert pod["metadata"]["resourceVersion"] == revision
    (row,) = [r for r in listed["rows"] if r["cells"][0] == "elsewhere"]
    assert row["object"]["metadata"]["labels"] == {"b": "2"}
    earlier = next(p for p in before["items"] if p["metadata"]["name"] == "elsewhere")
    assert earlier["metadata"]["labels"] == {"a": "1"}


async def bind(api: Api, pod: dict[str, Any]) -> None:
    """Bind a pod as the scheduler would (its node agent would run it)."""
    now = datetime.now(UTC)
    async with api.admission.uow() as uow:
        lease = await uow.leases.acquire_or_renew("scheduler", "test", now, timedelta(seconds=15))
        assert lease is not None
        bound = PodBinding(pod_uid=pod["metadata"]["uid"], node_name="n1", podgroup_uid="", bound_at=now)
        await uow.bindings.bind_many([bound], fence=lease.fence)
        await uow.commit()


@pytest.mark.parametrize(
    ("how", "grace"),
    [("query", {"gracePeriodSeconds": "3"}), ("body", {"gracePeriodSeconds": 3}), ("eviction", None)],
)
async def test_a_running_pods_delete_or_eviction_gives_it_the_grace_period_asked(
    api: Api, how: str, grace: dict[str, Any] | None
) -> None:
    code, running = await api.call("POST", PODS, bare_pod("graceful", {}))
    assert code == 201
    await bind(api, running)
    path = f"{PODS}/graceful"
    if how == "query":
        code, answered = await api.call("DELETE", path, params=grace)
    elif how == "body":
        code, answered = await api.call("DELETE", path, {"kind": "DeleteOptions", **(grace or {})})
    else:
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "graceful", "namespace": "ml"},
            "deleteOptions": {"gracePeriodSeconds": 3},
        }
        code, answered = await api.call("POST", f"{path}/eviction", eviction)
    assert code in (200, 201, 202), answered

    code, marked = await api.call("GET", path)
    assert code == 200
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 3
    assert "deletionTimestamp" in marked["metadata"]


async def test_a_running_pod_deleted_without_a_grace_period_shows_its_own(api: Api) -> None:
    code, running = await api.call(
        "POST",
        PODS,
        {**bare_pod("own", {}), "spec": {**bare_pod("own", {})["spec"], "terminationGracePeriodSeconds": 12}},
    )
    assert code == 201
    await bind(api, running)

    assert (await api.call("DELETE", f"{PODS}/own"))[0] in (200, 202)

    code, marked = await api.call("GET", f"{PODS}/own")
    assert code == 200
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 12
