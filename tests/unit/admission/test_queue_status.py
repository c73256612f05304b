"""What `get` says of Kueue's queues: their status computed from the stored gangs and bindings, whatever the
stored status says, in one snapshot however many queues are read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from libs.api.manifests import load_documents
from libs.db.records import ObjectDraft, PodBinding
from libs.db.testing import in_memory_unit_of_work_factory
from libs.db.uow import SqlAlchemyUnitOfWork
from libs.events.rpc import GetRequest
from services.admission.queries import get_objects
from tests.conftest import FakeClock

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "examples" / "11-two-teams.yaml"
GPU = "nvidia.com/gpu"


def draft(doc: dict[str, Any], status: dict[str, Any] | None = None) -> ObjectDraft:
    meta = doc["metadata"]
    namespace = meta.get("namespace", "")
    return ObjectDraft(
        doc["kind"], doc["apiVersion"], namespace, meta["name"], doc.get("spec") or {}, meta, status or {}
    )


def node(name: str) -> ObjectDraft:
    labels = {"topology.kubernetes.io/zone": "zone-0"}
    return ObjectDraft("Node", "v1", "", name, {}, {"name": name, "labels": labels}, {})


def gang(namespace: str, name: str, phases: list[str]) -> list[ObjectDraft]:
    """A PodGroup and one pod of 8 GPUs per phase."""
    meta = {"name": name, "namespace": namespace}
    spec = {"schedulingPolicy": {"gang": {"minCount": len(phases)}}}
    pods = []
    for i, phase in enumerate(phases):
        container = {"name": "c", "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: "8"}}}
        pod_spec = {"schedulingGroup": {"podGroupName": name}, "containers": [container]}
        pod_meta = {"name": f"{name}-{i}", "namespace": namespace}
        pods.append(
            ObjectDraft(
                "Pod", "v1", namespace, f"{name}-{i}", pod_spec, pod_meta, {"phase": phase}, f"{name}-{i}"
            )
        )
    return [ObjectDraft("PodGroup", "scheduling.k8s.io/v1alpha2", namespace, name, spec, meta, {}), *pods]


async def stored_teams(uow_factory: Callable[[], SqlAlchemyUnitOfWork], clock: FakeClock) -> None:
    """The two teams; in llm a gang of two running pods, one waiting, one whose pods ended; in vision
    nothing. The stored status of team-llm says something stale."""
    stale = {"pendingWorkloads": 9, "admittedWorkloads": 9}
    async with uow_factory() as uow:
        for doc in load_documents(EXAMPLE.read_text()):
            await uow.objects.upsert(draft(doc, stale if doc["metadata"]["name"] == "team-llm" else None))
        for item in [
            node("n1"),
            node("n2"),
            *gang("llm", "train", ["Running", "Running"]),
            *gang("llm", "waits", ["Pending"]),
            *gang("llm", "done", ["Succeeded"]),
        ]:
            await uow.objects.upsert(item)
        lease = await uow.leases.acquire_or_renew("scheduler", "s", clock(), timedelta(seconds=10))
        assert lease is not None
        for pod, on in (("train-0", "n1"), ("train-1", "n2")):
            await uow.bindings.bind(PodBinding(pod, on, None, clock()), fence=lease.fence)
        await uow.commit()


async def read(uow_factory: Callable[[], SqlAlchemyUnitOfWork], kind: str, **request: Any) -> list[dict]:
    async with uow_factory() as uow:
        return (await get_objects(uow, GetRequest(kind=kind, **request))).items


def gpus(status: dict[str, Any]) -> dict[str, str]:
    ((flavor,),) = [[f for f in status["flavorsUsage"] if f["name"] == "h200"]]
    (gpu,) = [r for r in flavor["resources"] if r["name"] == GPU]
    return gpu


async def test_a_cluster_queue_shows_what_its_gangs_hold_and_wait_for(fake_clock: FakeClock) -> None:
    async with in_memory_unit_of_work_factory(clock=fake_clock) as uow_factory:
        await stored_teams(uow_factory, fake_clock)
        (llm,) = await read(uow_factory, "ClusterQueue", name="team-llm")
        listed = {q["metadata"]["name"]: q["status"] for q in await read(uow_factory, "ClusterQueue")}
        (cohort,) = await read(uow_factory, "Cohort", name="research")

    status = llm["status"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"], status["admittedWorkloads"]) == (
        1,
        1,
        1,
    )
    assert gpus(status) == {"name": GPU, "total": "16", "borrowed": "0"}
    memory = [r for r in status["flavorsReservation"][0]["resources"] if r["name"] == "memory"]
    assert memory == [{"name": "memory", "total": "128Gi", "borrowed": "0"}]
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Active", "True", "Ready")
    assert condition["lastTransitionTime"] == llm["metadata"]["creationTimestamp"]
    assert status["fairSharing"] == {"weightedShare": 0}
    assert listed["team-llm"] == status
    assert listed["team-vision"]["pendingWorkloads"] == 0
    assert gpus(listed["team-vision"])["total"] == "0"
    assert cohort["status"] == {"fairSharing": {"weightedShare": 0}}


async def test_a_local_queue_shows_its_namespaces_gangs(fake_clock: FakeClock) -> None:
    async with in_memory_unit_of_work_factory(clock=fake_clock) as uow_factory:
        await stored_teams(uow_factory, fake_clock)
        queues = {
            q["metadata"]["namespace"]: q["status"]
            for q in await read(uow_factory, "LocalQueue", all_namespaces=True)
        }

    assert (queues["llm"]["pendingWorkloads"], queues["llm"]["admittedWorkloads"]) == (1, 1)
    assert queues["llm"]["flavorsUsage"][0]["resources"][2] == {"name": GPU, "total": "16"}
    assert (queues["vision"]["pendingWorkloads"], queues["vision"]["admittedWorkloads"]) == (0, 0)
    assert [c["reason"] for c in queues["vision"]["conditions"]] == ["Ready"]


async def test_reading_many_queues_builds_one_snapshot(fake_clock: FakeClock) -> None:
    async with in_memory_unit_of_work_factory(clock=fake_clock) as uow_factory:
        await stored_teams(uow_factory, fake_clock)
        async with uow_factory() as uow:
            finds: list[tuple[str, str | None]] = []
            find = uow.objects.find

            async def counted(kind: str, namespace: str | None = None, **kw: Any) -> Any:
                finds.append((kind, namespace))
                return await find(kind, namespace, **kw)

            uow.objects.find = counted  # type: ignore[method-assign]
            versions = uow.objects.find_versions

            async def counted_versions(kind: str, namespace: str | None = None, **kw: Any) -> Any:
                finds.append((kind, namespace))
                return await versions(kind, namespace, **kw)

            uow.objects.find_versions = counted_versions  # type: ignore[method-assign]
            await get_objects(uow, GetRequest(kind="ClusterQueue", name="team-llm"))
            one = len(finds)
            finds.clear()
            await get_objects(uow, GetRequest(kind="ClusterQueue"))

    assert len(finds) == one + 1  # the list itself, then the same reads as for one queue
