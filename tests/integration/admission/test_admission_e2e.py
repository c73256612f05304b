"""Admission end to end: a real nats-server, the real service, the Python client, on both databases."""

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient
from libs.client.quick import ReadClient
from libs.db.records import Condition, ObjectDraft, PodBinding
from libs.events.catalogue import RpcSubject
from libs.events.envelope import Envelope
from libs.events.rpc import ApplyReply, ApplyRequest, GetReply, GetRequest
from libs.events.scheduling import (
    ClaimsReleased,
    PodGroupRef,
    PodGroupRestarted,
    PodRef,
    PodsFailed,
    PodsSucceeded,
)
from libs.messaging.errors import RpcError
from libs.messaging.rpc import request
from libs.runtime.settings import PodwaySettings
from services.admission import queries
from services.admission.app import AdmissionService
from tests.integration.scheduler.manifests import NAMESPACE, pod
from tests.support import eventually

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"


def example(name: str) -> list[dict]:
    return load_documents((EXAMPLES / name).read_text())


@pytest.fixture
async def stack(nats_url, database_url, tmp_path):
    settings = PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path)
    service = AdmissionService(settings)
    await service.start()
    async with PodwayClient(nats_url, timeout_s=20) as client:
        yield service, client
    await service.stop()


async def stream_events(client: PodwayClient, expected: int, timeout_s: float = 15.0) -> list[Envelope]:
    """Read the PODWAY_EVENTS stream from the start until `expected` events arrived (bounded wait)."""
    js = client.broker.connection.jetstream()
    sub = await js.subscribe("podway.events.>", ordered_consumer=True)
    seen: list[Envelope] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(seen) < expected and loop.time() < deadline:
            try:
                msg = await sub.next_msg(timeout=max(0.05, deadline - loop.time()))
            except TimeoutError:
                break
            seen.append(Envelope.from_bytes(msg.data))
    finally:
        await sub.unsubscribe()
    return seen


async def test_examples_are_admitted_persisted_and_published_once(stack):
    _, client = stack
    docs = example("01-priorityclasses.yaml") + example("02-dra.yaml") + example("03-gang-workload.yaml")
    reply = await client.apply(docs)
    assert {r.outcome for r in reply.results} == {"created"}
    events = await stream_events(client, expected=len(docs))
    assert len(events) == len(docs)
    assert len({e.event_id for e in events}) == len(docs)
    assert sum(e.type == "pod.admitted" for e in events) == 4

    again = await client.apply(docs)
    assert {r.outcome for r in again.results} == {"unchanged"}

    groups = await client.get("PodGroup", namespace="ml")
    assert [g["metadata"]["name"] for g in groups] == ["llm-train-worker-0"]
    assert groups[0]["spec"]["priority"] == 1000


async def test_pods_created_are_encoded_for_lists_before_a_list_asks(stack, monkeypatch):
    service, client = stack
    await client.apply([pod(f"waits-{i}") for i in range(3)])

    encoded = await eventually(lambda: asyncio.sleep(0, service.stored.encodings()), lambda n: n == 3)
    assert encoded == 3
    copies = []
    copy = queries.copy_for_derived
    monkeypatch.setattr(
        queries, "copy_for_derived", lambda manifest: copies.append(manifest) or copy(manifest)
    )
    listed = await client.get("Pod", namespace=NAMESPACE)

    assert copies == []  # sent as encoded ahead of the list
    assert sorted(p["metadata"]["name"] for p in listed) == ["waits-0", "waits-1", "waits-2"]
    assert all(p["status"]["conditions"][0]["type"] == "PodScheduled" for p in listed)


async def test_a_rejected_manifest_answers_every_error_and_leaves_nothing_behind(stack):
    _, client = stack
    reply = await client.apply(example("invalid/bad-workload.yaml"))
    result = reply.results[0]
    assert result.outcome == "rejected"
    assert '* spec.podGroupTemplates[1].name: Duplicate value: "a"' in result.message
    assert result.status["details"]["causes"]
    assert await client.get("Workload", namespace="ml") == []
    story = await client.events(correlation_id=reply.request_id)
    assert [e["type"] for e in story.events] == ["object.rejected"]


async def test_a_v135_manifest_is_converted_and_answered_with_a_warning(stack):
    _, client = stack
    reply = await client.apply(example("04-v135-workload.yaml"))
    assert reply.warnings
    pods = await client.get("Pod", namespace="ml")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {"legacy-train-workers"}


async def test_a_job_submitted_as_an_event_is_expanded_into_a_gang(stack):
    _, client = stack
    await client.apply(example("01-priorityclasses.yaml"))
    (job,) = example("05-indexed-job.yaml")
    await client.submit_job(job)
    pods = await eventually(lambda: client.get("Pod", namespace="ml"), lambda pods: len(pods) >= 8)
    assert sorted(p["metadata"]["name"] for p in pods)[:2] == ["finetune-worker-0-0", "finetune-worker-0-1"]
    assert len(pods) == 8
    story = await client.events(podgroup="ml/finetune-worker-0")
    types = [e["type"] for e in story.events]
    assert types.count("pod.admitted") == 8
    assert "podgroup.admitted" in types


async def test_deleting_a_podgroup_none_of_whose_pods_is_placed_deletes_it_at_once(stack):
    _, client = stack
    await client.apply(example("01-priorityclasses.yaml") + example("03-gang-workload.yaml"))

    reply = await client.delete("PodGroup", "llm-train-worker-0", namespace="ml")

    assert reply.results[0].outcome == "deleted"
    assert await client.get("PodGroup", "llm-train-worker-0", namespace="ml") == []
    assert len(await client.get("Pod", namespace="ml")) == 4  # pods are not the PodGroup's to delete


async def _finish_pods(service: AdmissionService, names: list[str], phase: str) -> None:
    """What the node agent does: write the pods' phase and emit the lifecycle event in one transaction."""
    async with service.uow() as uow:
        refs = []
        for name in names:
            pod = await uow.objects.get("Pod", "ml", name)
            assert pod is not None
            await uow.objects.update_status("Pod", "ml", name, {"phase": phase})
            refs.append(PodRef(namespace="ml", name=name, uid=pod.uid, node="n1"))
        payload = PodsSucceeded(pods=refs) if phase == "Succeeded" else PodsFailed(pods=refs, reason="Error")
        uow.emit(
            Envelope.wrap(payload, producer="node-agent", correlation_id="c", occurred_at=datetime.now(UTC))
        )
        await uow.commit()


async def test_a_jobs_status_follows_its_pods_to_completion(stack):
    service, client = stack
    await client.apply(example("01-priorityclasses.yaml") + example("05-indexed-job.yaml"))
    names = [f"finetune-worker-0-{i}" for i in range(8)]
    await _finish_pods(service, names[:3], "Succeeded")
    (job,) = await eventually(
        lambda: client.get("Job", "finetune", "ml"),
        lambda jobs: (jobs[0].get("status") or {}).get("succeeded") == 3,
    )
    assert job["status"]["active"] == 5
    assert job["status"]["completedIndexes"] == "0-2"
    await _finish_pods(service, names[3:], "Succeeded")
    (job,) = await eventually(
        lambda: client.get("Job", "finetune", "ml"),
        lambda jobs: bool((jobs[0].get("status") or {}).get("conditions")),
    )
    assert job["status"]["conditions"][0]["type"] == "Complete"


async def restart_event(service: AdmissionService, ref: PodGroupRef, stopped: list[PodRef]) -> None:
    """The gang's pods stopped (`pods.failed`, DisruptionTarget) and the scheduler restarted it."""
    async with service.uow() as uow:
        for pod in stopped:
            stored = await uow.objects.get("Pod", pod.namespace, pod.name)
            assert stored is not None
            status = {"phase": "Failed", "reason": "DisruptionTarget"}
            await uow.objects.update_status("Pod", pod.namespace, pod.name, status)
        for payload in (
            PodsFailed(pods=stopped, reason="DisruptionTarget"),
            PodGroupRestarted(podgroup=ref, reason="gang dropped below minCount"),
        ):
            uow.emit(
                Envelope.wrap(
                    payload, producer="scheduler", correlation_id=ref.uid, occurred_at=datetime.now(UTC)
                )
            )
        await uow.commit()


async def test_a_restarted_job_gang_is_recreated_with_fresh_pods_once_they_stopped(stack):
    service, client = stack
    await client.apply(example("01-priorityclasses.yaml") + example("05-indexed-job.yaml"))
    old = await client.get("Pod", namespace="ml")
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in old}
    (group,) = await client.get("PodGroup", "finetune-worker-0", "ml")
    ref = PodGroupRef(namespace="ml", name="finetune-worker-0", uid=group["metadata"]["uid"])
    refs = [PodRef(namespace="ml", name=p["metadata"]["name"], uid=p["metadata"]["uid"]) for p in old]

    await restart_event(service, ref, refs)

    def renewed(pods: list[dict]) -> bool:
        return len(pods) == 8 and all(p["metadata"]["uid"] != before[p["metadata"]["name"]] for p in pods)

    after = await eventually(lambda: client.get("Pod", namespace="ml"), renewed)
    assert renewed(after)
    assert all((p.get("status") or {}).get("phase") == "Pending" for p in after)  # none has run yet
    (new_group,) = await client.get("PodGroup", "finetune-worker-0", "ml")
    assert new_group["metadata"]["uid"] != ref.uid
    assert new_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 8}}


async def test_a_list_is_read_in_pages_that_neither_repeat_nor_skip(stack, nats_url):
    _, client = stack
    names = [f"page-{i:02d}" for i in range(7)]
    other = pod("other")
    other["metadata"]["namespace"] = "elsewhere"
    await client.apply([pod(name) for name in names] + [other])

    paged = await client.get("Pod", namespace=NAMESPACE, chunk_size=3)
    whole = await client.get("Pod", namespace=NAMESPACE, chunk_size=0)
    every = await client.get("Pod", all_namespaces=True, chunk_size=2)

    assert [p["metadata"]["name"] for p in paged] == names
    assert paged == whole
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in every] == [
        ("elsewhere", "other"),
        *((NAMESPACE, name) for name in names),
    ]
    page = GetReply.model_validate_json(
        await request(
            client.broker, RpcSubject.ADMISSION_GET, GetRequest(kind="Pod", namespace=NAMESPACE, limit=3)
        )
    )
    assert [p["metadata"]["name"] for p in page.items] == names[:3]
    assert page.continue_token is not None
    # The CLI's blocking client, off the event loop the service runs on.
    assert await asyncio.to_thread(read_in_pages_of_two, nats_url) == whole


def read_in_pages_of_two(nats_url: str) -> list[dict]:
    with ReadClient(nats_url) as reader:
        return reader.get("Pod", namespace=NAMESPACE, chunk_size=2)


async def test_a_continue_token_the_server_did_not_make_is_refused(stack):
    _, client = stack

    with pytest.raises(RpcError, match="continue key is not valid"):
        await request(
            client.broker,
            RpcSubject.ADMISSION_GET,
            GetRequest(kind="Pod", namespace=NAMESPACE, limit=2, continue_token="not a token"),
        )


async def test_an_apply_that_asks_to_read_back_answers_with_each_object_as_get_reads_it(stack):
    _, client = stack

    async def apply(manifest: dict, read_back: bool) -> ApplyReply:
        asked = ApplyRequest(request_id="read-back", manifests=[manifest], read_back=read_back)
        return ApplyReply.model_validate_json(await request(client.broker, RpcSubject.ADMISSION_APPLY, asked))

    created = (await apply(pod("shown"), read_back=True)).results[0]
    labelled = pod("shown")
    labelled["metadata"]["labels"] = {"seen": "yes"}
    updated = (await apply(labelled, read_back=True)).results[0]
    silent = (await apply(pod("quiet"), read_back=False)).results[0]

    got = GetReply.model_validate_json(
        await request(
            client.broker, RpcSubject.ADMISSION_GET, GetRequest(kind="Pod", namespace=NAMESPACE, name="shown")
        )
    )
    assert created.outcome == "created"
    assert created.object is not None
    assert created.object["metadata"]["uid"] == got.items[0]["metadata"]["uid"]
    assert created.object["status"]["phase"] == "Pending"  # as the API server answers a pod's create
    assert updated.outcome == "updated"
    assert updated.object == got.items[0]
    assert updated.revision == got.item_revisions[0]
    assert created.revision is not None
    assert updated.revision > created.revision
    assert silent.object is None
    assert silent.revision is None


async def test_an_update_read_back_shows_the_node_its_pod_holds_and_the_conditions_written_for_it(stack):
    """What the writing transaction read before writing (the pod's binding) or did not write (its
    conditions) is in the answer, as a get shows it afterwards."""
    service, client = stack

    async def apply(manifest: dict) -> ApplyReply:
        asked = ApplyRequest(request_id=f"held-{len(manifest)}", manifests=[manifest], read_back=True)
        return ApplyReply.model_validate_json(await request(client.broker, RpcSubject.ADMISSION_APPLY, asked))

    created = (await apply(pod("held"))).results[0]
    assert created.object is not None
    assert "nodeName" not in created.object["spec"]
    now = datetime.now(UTC)
    async with service.uow() as uow:
        lease = await uow.leases.acquire_or_renew("scheduler", "test", now, timedelta(seconds=15))
        assert lease is not None
        uid = created.object["metadata"]["uid"]
        await uow.bindings.bind_many(
            [PodBinding(pod_uid=uid, node_name="node-7", podgroup_uid="", bound_at=now)], fence=lease.fence
        )
        await uow.conditions.set_many(
            [Condition(object_uid=uid, type="DisruptionTarget", status="False", owner="test", reason="Kept")]
        )
        await uow.commit()
    labelled = pod("held")
    labelled["metadata"]["labels"] = {"seen": "yes"}
    updated = (await apply(labelled)).results[0]

    got = GetReply.model_validate_json(
        await request(
            client.broker, RpcSubject.ADMISSION_GET, GetRequest(kind="Pod", namespace=NAMESPACE, name="held")
        )
    )
    assert updated.outcome == "updated"
    assert updated.object is not None
    assert updated.object["spec"]["nodeName"] == "node-7"
    conditions = {c["type"]: c["reason"] for c in updated.object["status"]["conditions"]}
    assert conditions["DisruptionTarget"] == "Kept"
    assert updated.object == got.items[0]
    assert updated.revision == got.item_revisions[0]


async def test_applies_written_together_each_read_back_their_own_object_and_a_stale_update_is_refused(stack):
    """Many applies in flight at once are written in groups and read back together: each answer carries its
    own object at its own revision, and an update naming a revision the object no longer has gets 409 while
    the others of its group are written."""
    _, client = stack

    async def apply(manifest: dict, expected: int | None = None) -> ApplyReply:
        asked = ApplyRequest(
            request_id=f"together-{manifest['metadata']['name']}",
            manifests=[manifest],
            read_back=True,
            expected_revision=expected,
        )
        return ApplyReply.model_validate_json(await request(client.broker, RpcSubject.ADMISSION_APPLY, asked))

    first = (await apply(pod("together-target"))).results[0]
    assert first.revision is not None
    moved = pod("together-target")
    moved["metadata"]["labels"] = {"moved": "yes"}
    assert (await apply(moved, expected=first.revision)).results[0].outcome == "updated"

    names = [f"together-{i}" for i in range(24)]
    stale = pod("together-target")
    stale["metadata"]["labels"] = {"stale": "yes"}
    replies = await asyncio.gather(
        *(apply(pod(name)) for name in names), apply(stale, expected=first.revision)
    )

    created = [reply.results[0] for reply in replies[:-1]]
    assert [result.outcome for result in created] == ["created"] * len(names)
    assert [(result.object or {}).get("metadata", {}).get("name") for result in created] == names
    for result in created:
        got = GetReply.model_validate_json(
            await request(
                client.broker,
                RpcSubject.ADMISSION_GET,
                GetRequest(kind="Pod", namespace=NAMESPACE, name=result.name),
            )
        )
        assert result.object == got.items[0]
        assert result.revision == got.item_revisions[0]
    refused = replies[-1].results[0]
    assert refused.outcome == "rejected"
    assert refused.status is not None
    assert refused.status["code"] == 409
    assert refused.object is None


@pytest.fixture
async def two_replicas(nats_url, database_url, tmp_path):
    services = [
        AdmissionService(PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path / n))
        for n in ("a", "b")
    ]
    for service in services:
        await service.start()
    async with PodwayClient(nats_url, timeout_s=20) as client:
        yield services, client
    for service in services:
        await service.stop()


async def test_two_replicas_answer_writes_with_the_object_as_committed_and_read_the_last_one(two_replicas):
    """Each replica builds a write's answer in its own transaction and keeps its own list copies: with two
    serving the same queue, each answer is the object as its transaction committed it (its own write, or a
    later one of the same group), answers at one resourceVersion agree, and every read, whichever replica
    answers, shows the last write."""
    _, client = two_replicas

    async def label(value: str) -> ApplyReply:
        manifest = pod("shared")
        manifest["metadata"]["labels"] = {"value": value}
        asked = ApplyRequest(request_id=f"shared-{value}", manifests=[manifest], read_back=True)
        return ApplyReply.model_validate_json(await request(client.broker, RpcSubject.ADMISSION_APPLY, asked))

    assert (await label("first")).results[0].outcome == "created"
    sent = [f"v{v}" for v in range(8)]
    results = [reply.results[0] for reply in await asyncio.gather(*(label(v) for v in sent))]

    assert [r.outcome for r in results] == ["updated"] * 8
    shown = {}
    for result in results:
        assert result.object is not None
        assert result.object["metadata"]["labels"]["value"] in sent
        version = int(result.object["metadata"]["resourceVersion"])
        assert shown.setdefault(version, result.object) == result.object
    last = shown[max(shown)]
    asked = GetRequest(kind="Pod", namespace=NAMESPACE, limit=500)
    for _ in range(6):  # answered by either replica
        listed = GetReply.model_validate_json(await request(client.broker, RpcSubject.ADMISSION_GET, asked))
        (read,) = [item for item in listed.items if item["metadata"]["name"] == "shared"]
        assert read == last


async def test_a_namespace_whose_pod_runs_stays_terminating_until_it_is_empty_then_goes(stack):
    """Stored on its deletion when it only existed because objects were in it, so that it goes where its
    watchers see it go (a tombstone), once its running pod has."""
    service, client = stack
    created = (await client.apply([pod("runner"), pod("waiter")])).results
    now = datetime.now(UTC)
    async with service.uow() as uow:
        lease = await uow.leases.acquire_or_renew("scheduler", "test", now, timedelta(seconds=15))
        assert lease is not None
        binding = PodBinding(pod_uid=created[0].uid or "", node_name="node-1", podgroup_uid="", bound_at=now)
        await uow.bindings.bind_many([binding], fence=lease.fence)
        await uow.commit()

    reply = await client.delete("Namespace", NAMESPACE)

    assert [(r.kind, r.name, r.outcome) for r in reply.results[:1]] == [("Namespace", NAMESPACE, "pending")]
    (shown,) = await client.get("Namespace", NAMESPACE)
    assert shown["status"]["phase"] == "Terminating"
    assert [p["metadata"]["name"] for p in await client.get("Pod", namespace=NAMESPACE)] == ["runner"]
    (late,) = (await client.apply([pod("late")])).results
    assert (late.outcome, (late.status or {}).get("code")) == ("rejected", 403)
    assert "because it is being terminated" in late.message

    async with service.uow() as uow:  # the pod's node agent stopped it and deleted it
        await uow.objects.delete("Pod", NAMESPACE, "runner")
        await uow.commit()
    await service.reconcile()  # what the pod's `object.deleted` event sets off

    assert await client.get("Namespace", NAMESPACE) == []
    async with service.uow() as uow:
        changes = await uow.revisions.changes_after(0, kinds=["Namespace"])
    assert [(c.deleted, c.object.name) for c in changes.changes] == [(True, NAMESPACE)]


async def test_a_namespace_whose_last_object_is_a_reserved_claim_goes_once_the_claim_is_released(stack):
    """The DRA allocator deletes a claim it releases, with `claims.released`: admission sees the namespace
    empty then, not at its next reconcile."""
    service, client = stack
    claim = ObjectDraft(
        kind="ResourceClaim",
        api_version="resource.k8s.io/v1",
        namespace=NAMESPACE,
        name="shared-gpu",
        spec={"devices": {"requests": []}},
        metadata={"name": "shared-gpu", "namespace": NAMESPACE},
        status={"reservedFor": [{"resource": "pods", "name": "gone", "uid": "u-1"}]},
    )
    async with service.uow() as uow:
        await uow.objects.upsert(claim)
        await uow.commit()
    reply = await client.delete("Namespace", NAMESPACE)
    assert [(r.kind, r.outcome) for r in reply.results] == [
        ("Namespace", "pending"),
        ("ResourceClaim", "pending"),
    ]

    async with service.uow() as uow:  # as the DRA allocator releases it
        await uow.objects.delete("ResourceClaim", NAMESPACE, "shared-gpu")
        released = ClaimsReleased(claims=["shared-gpu"])
        uow.emit(
            Envelope.wrap(
                released, producer="dra_allocator", correlation_id="c", occurred_at=datetime.now(UTC)
            )
        )
        await uow.commit()

    assert await eventually(lambda: client.get("Namespace", NAMESPACE), lambda found: found == []) == []
