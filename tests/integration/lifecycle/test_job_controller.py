"""batch/v1 Jobs behave as the Job controller would, end to end: waves up to completions, suspension and
resumption, a live status, victims that hold their room until they stopped, and a refused create that says
why and is retried once its cause is gone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from libs.api.manifests import load_documents
from libs.events.envelope import AggregateRef, Envelope, EventPayload
from libs.events.scheduling import (
    PodGroupRef,
    PodRef,
    PodsEvicted,
    PodsFailed,
    PodsSucceeded,
    PreemptionVictimsSelected,
)
from libs.messaging.publisher import NatsPublisher
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE
from tests.support import eventually

SCAVENGER = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: scavenger}
value: 10
"""


def job(
    name: str,
    *,
    parallelism: int,
    completions: int,
    indexed: bool = False,
    gpus: int = 1,
    run_seconds: float = 1000,
    suspend: bool = False,
    priority_class: str = "batch",
) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "parallelism": parallelism,
            "completions": completions,
            "suspend": suspend,
            "template": {
                "metadata": {"annotations": {"podway.io/run-seconds": str(run_seconds)}},
                "spec": {
                    "priorityClassName": priority_class,
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "i", "resources": {"requests": resources}}],
                },
            },
        },
    }


async def pods_of(stack: Stack, name: str) -> list[dict[str, Any]]:
    pods = await stack.client.get("Pod", namespace=NAMESPACE)
    return [p for p in pods if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == name]


def phases(pods: list[dict[str, Any]]) -> list[str]:
    return sorted((p.get("status") or {}).get("phase") or "Pending" for p in pods)


async def status_of(stack: Stack, name: str) -> dict[str, Any]:
    (found,) = await stack.client.get("Job", name, NAMESPACE)
    return dict(found.get("status") or {})


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or []}


async def finish_running_pods(stack: Stack, seconds: float) -> None:
    stack.agent_clock.advance(timedelta(seconds=seconds))
    stack.agent.wake()


async def publish(stack: Stack, group: PodGroupRef, *payloads: EventPayload) -> None:
    """Events as the preemptor writes them, in the victim gang's story."""
    subject = AggregateRef(kind="PodGroup", namespace=group.namespace, name=group.name, uid=group.uid)
    for payload in payloads:
        envelope = Envelope.wrap(
            payload,
            producer="preemptor",
            correlation_id=group.uid,
            occurred_at=datetime.now(UTC),
            subject=subject,
        )
        await NatsPublisher(stack.client.broker).publish(envelope)


def pod_refs(pods: list[dict[str, Any]]) -> list[PodRef]:
    return [
        PodRef(
            namespace=NAMESPACE,
            name=p["metadata"]["name"],
            uid=p["metadata"]["uid"],
            node=p["spec"]["nodeName"],
        )
        for p in pods
    ]


async def preempt(
    stack: Stack, group_name: str, pods: list[dict[str, Any]], *, evict: int | None = None
) -> PodGroupRef:
    """The preemptor chose this gang and evicted its pods (only the first `evict` of them when given);
    returns its PodGroup."""
    (group,) = await stack.client.get("PodGroup", group_name, NAMESPACE)
    ref = PodGroupRef(namespace=NAMESPACE, name=group_name, uid=group["metadata"]["uid"])
    refs = pod_refs(pods)
    selected = PreemptionVictimsSelected(
        preemptor=PodGroupRef(namespace=NAMESPACE, name="urgent", uid="urgent-uid"),
        victims=refs,
        victim_groups=[ref],
        nodes=sorted({r.node or "" for r in refs}),
    )
    evicted = PodsEvicted(
        pods=refs[:evict], reason="PreemptionByScheduler", podgroup=ref, message="preempted"
    )
    await publish(stack, ref, selected, evicted)
    return ref


async def test_a_nonindexed_job_runs_wave_after_wave_with_a_live_status_until_its_completions(stack: Stack):
    await stack.client.apply([job("sweep", parallelism=2, completions=3, run_seconds=10)])
    first = await eventually(lambda: pods_of(stack, "sweep"), lambda p: phases(p) == ["Running"] * 2)
    assert phases(first) == ["Running"] * 2
    status = await eventually(lambda: status_of(stack, "sweep"), lambda s: s.get("ready") == 2)
    assert (status["active"], status["ready"], status["succeeded"], status["failed"]) == (2, 2, 0, 0)
    assert status["startTime"]

    await finish_running_pods(stack, 11)

    second = await eventually(
        lambda: pods_of(stack, "sweep"), lambda p: phases(p) == ["Running", "Succeeded", "Succeeded"]
    )
    assert phases(second) == ["Running", "Succeeded", "Succeeded"]  # one completion left: one pod
    status = await eventually(lambda: status_of(stack, "sweep"), lambda s: s.get("ready") == 1)
    assert (status["active"], status["succeeded"]) == (1, 2)
    await finish_running_pods(stack, 11)
    done = await eventually(lambda: status_of(stack, "sweep"), lambda s: "Complete" in conditions(s))
    assert (done["active"], done["succeeded"]) == (0, 3)


async def test_a_suspended_job_stops_its_pods_and_starts_them_again_when_resumed(stack: Stack):
    await stack.client.apply([job("pausable", parallelism=2, completions=2)])
    await eventually(lambda: pods_of(stack, "pausable"), lambda p: phases(p) == ["Running"] * 2)

    await stack.client.apply([job("pausable", parallelism=2, completions=2, suspend=True)])

    assert await eventually(lambda: pods_of(stack, "pausable"), lambda p: p == [], timeout_s=30) == []
    status = await eventually(lambda: status_of(stack, "pausable"), lambda s: s.get("active") == 0)
    suspended = conditions(status)["Suspended"]
    assert (suspended["status"], suspended["reason"]) == ("True", "JobSuspended")
    assert status["active"] == 0

    await stack.client.apply([job("pausable", parallelism=2, completions=2, suspend=False)])

    again = await eventually(lambda: pods_of(stack, "pausable"), lambda p: phases(p) == ["Running"] * 2)
    assert phases(again) == ["Running"] * 2
    resumed = conditions(await status_of(stack, "pausable"))["Suspended"]
    assert (resumed["status"], resumed["reason"]) == ("False", "JobResumed")


async def test_preempted_job_pods_hold_their_room_until_they_stopped_and_only_then_are_replaced(stack: Stack):
    await stack.client.apply([job("victim", parallelism=2, completions=2, indexed=True, gpus=8)])
    group_name = "victim-worker-0"
    running = await eventually(lambda: pods_of(stack, "victim"), lambda p: phases(p) == ["Running"] * 2)
    old = {p["metadata"]["uid"] for p in running}

    # 1. Chosen as victims, but only the first is stopped yet: the other still holds its node.
    ref = await preempt(stack, group_name, running, evict=1)

    await eventually(lambda: status_of(stack, "victim"), lambda s: s.get("active") == 1, timeout_s=30)
    pods = {p["metadata"]["uid"]: p for p in await pods_of(stack, "victim")}
    assert set(pods) == old, "no victim is deleted or replaced while one of them still runs"
    assert sorted(phases(list(pods.values()))) == ["Failed", "Running"]

    # 2. The second stops too: only now is the gang replaced.
    await publish(
        stack, ref, PodsEvicted(pods=pod_refs(running)[1:], reason="PreemptionByScheduler", podgroup=ref)
    )
    renewed = await eventually(
        lambda: pods_of(stack, "victim"),
        lambda pods: len(pods) == 2 and not old & {p["metadata"]["uid"] for p in pods},
        timeout_s=30,
    )
    assert len(renewed) == 2
    story = (await stack.client.events(correlation_id=ref.uid)).events
    stopped_at = {
        pod["uid"]: position
        for position, event in enumerate(story)
        if event["type"] == "pods.failed"
        for pod in event["payload"]["pods"]
    }
    deleted_at = {
        event["payload"]["uid"]: position
        for position, event in enumerate(story)
        if event["type"] == "object.deleted" and event["payload"]["kind"] == "Pod"
    }
    assert set(stopped_at) == old, "each victim is reported stopped by its node agent"
    assert all(stopped_at[uid] < deleted_at[uid] for uid in old), "a victim is deleted only once it stopped"
    (group,) = await stack.client.get("PodGroup", group_name, NAMESPACE)
    assert group["metadata"]["uid"] != ref.uid, "the gang is queued again as a new PodGroup"
    assert "DisruptionTarget" not in conditions(group.get("status") or {})
    await eventually(lambda: pods_of(stack, "victim"), lambda p: phases(p) == ["Running"] * 2)


async def test_a_gang_that_cannot_be_recreated_says_failed_create_and_is_recreated_once_the_cause_is_gone(
    stack: Stack,
):
    await stack.client.apply(load_documents(SCAVENGER))
    spec = job("cheap", parallelism=2, completions=2, indexed=True, priority_class="scavenger")
    await stack.client.apply([spec])
    running = await eventually(lambda: pods_of(stack, "cheap"), lambda p: phases(p) == ["Running"] * 2)
    await stack.client.delete("PriorityClass", "scavenger")

    await preempt(stack, "cheap-worker-0", running)

    status = await eventually(
        lambda: status_of(stack, "cheap"), lambda s: "ReplicaFailure" in conditions(s), timeout_s=30
    )
    failure = conditions(status)["ReplicaFailure"]
    assert (failure["status"], failure["reason"]) == ("True", "FailedCreate")
    assert "scavenger" in failure["message"]

    await stack.client.apply(load_documents(SCAVENGER))

    again = await eventually(lambda: pods_of(stack, "cheap"), lambda p: phases(p) == ["Running"] * 2)
    assert not {p["metadata"]["uid"] for p in again} & {p["metadata"]["uid"] for p in running}
    assert "ReplicaFailure" not in conditions(await status_of(stack, "cheap"))


async def end_pods(
    stack: Stack, group: PodGroupRef, pods: list[dict[str, Any]], payload: EventPayload
) -> None:
    """Pods ended on their nodes as their node agent reports it: status, binding released, one event."""
    phase = "Succeeded" if isinstance(payload, PodsSucceeded) else "Failed"
    async with stack.admission.uow() as uow:
        for pod in pods:
            status = {**pod["status"], "phase": phase, **({"reason": "Error"} if phase == "Failed" else {})}
            await uow.objects.update_status("Pod", NAMESPACE, pod["metadata"]["name"], status)
        await uow.bindings.release_many(p["metadata"]["uid"] for p in pods)
        subject = AggregateRef(kind="PodGroup", namespace=NAMESPACE, name=group.name, uid=group.uid)
        uow.emit(
            Envelope.wrap(
                payload,
                producer="node-agent",
                correlation_id=group.uid,
                occurred_at=datetime.now(UTC),
                subject=subject,
            )
        )
        await uow.commit()


async def test_a_restarted_gang_runs_again_only_the_indexes_that_did_not_succeed(stack: Stack):
    await stack.client.apply([job("indexed", parallelism=4, completions=4, indexed=True, gpus=8)])
    running = await eventually(lambda: pods_of(stack, "indexed"), lambda p: phases(p) == ["Running"] * 4)
    by_name = {p["metadata"]["name"]: p for p in running}
    (group,) = await stack.client.get("PodGroup", "indexed-worker-0", NAMESPACE)
    ref = PodGroupRef(namespace=NAMESPACE, name="indexed-worker-0", uid=group["metadata"]["uid"])
    done = [by_name["indexed-worker-0-0"], by_name["indexed-worker-0-1"]]
    crashed = [by_name["indexed-worker-0-2"]]

    await end_pods(stack, ref, done, PodsSucceeded(pods=pod_refs(done)))
    await end_pods(stack, ref, crashed, PodsFailed(pods=pod_refs(crashed), reason="Error"))

    # The scheduler restarts the gang (evicting index 3); once it stopped, indexes 2 and 3 run again.
    again = await eventually(
        lambda: pods_of(stack, "indexed"),
        lambda pods: phases(pods) == ["Running", "Running", "Succeeded", "Succeeded"],
        timeout_s=30,
    )
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in again}
    assert [uids[n] for n in ("indexed-worker-0-0", "indexed-worker-0-1")] == [
        p["metadata"]["uid"] for p in done
    ]
    assert uids["indexed-worker-0-2"] != crashed[0]["metadata"]["uid"]
    assert uids["indexed-worker-0-3"] != by_name["indexed-worker-0-3"]["metadata"]["uid"]
    (new_group,) = await stack.client.get("PodGroup", "indexed-worker-0", NAMESPACE)
    assert new_group["metadata"]["uid"] != ref.uid
    assert new_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    status = await eventually(lambda: status_of(stack, "indexed"), lambda s: s.get("ready") == 2)
    assert (status["completedIndexes"], status["succeeded"], status["failed"]) == ("0-1", 2, 1)
    assert "podgroup.restarted" in [
        e["type"] for e in (await stack.client.events(correlation_id=ref.uid)).events
    ]
