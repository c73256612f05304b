"""The node agent: a simulated kubelet (like KWOK) for a whole cluster of nodes.

It registers its Nodes and ResourceSlices through admission, like any API client, after the DeviceClasses
of their drivers (created when absent, never changed: a DRA driver installs its class); runs the pods bound to
its nodes (phase Running, with the node recorded in the status, then Succeeded after `podway.io/run-seconds`
divided by the time compression); stops evicted pods (phase Failed, reason DisruptionTarget); and terminates
pods deleted while they run (eviction reason Deleted): it stops them and deletes them. Pod status is the node
agent's to write, and a pod that ends releases its binding in the same transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from libs.api.annotations import run_seconds
from libs.cluster.device_classes import device_classes_of
from libs.core.kubelet.downward import PodPlace
from libs.core.kubelet.phases import ContainerReason, PodEnd
from libs.core.kubelet.rendezvous import HOST_IP, free_pod_ip, gang_members
from libs.core.kubelet.restarts import BackOff, restart_policy_of
from libs.db.engine import create_engine, create_session_factory, dispose_snapshot, snapshot_engine
from libs.db.ports import UnitOfWork
from libs.db.reachability import database_check
from libs.db.records import JsonObject, OutboxMessage, StoredObject
from libs.db.uow import unit_of_work_factory
from libs.events.admission import ObjectDeleted
from libs.events.catalogue import EventType, RpcSubject
from libs.events.envelope import AggregateRef, Envelope, EventPayload
from libs.events.rpc import ApplyReply, ApplyRequest, NodePowerReply, NodePowerRequest
from libs.events.scheduling import (
    NodeLost,
    PodPlacement,
    PodRef,
    PodsBound,
    PodsEvicted,
    PodsFailed,
    PodsRunning,
    PodsSucceeded,
)
from libs.messaging.broker import bus_state, jetstream, make_broker, start_broker
from libs.messaging.consumer import EventConsumer
from libs.messaging.durable_names import durable_name
from libs.messaging.readiness import connection_states
from libs.messaging.relay import OutboxRelay
from libs.messaging.rpc import RpcTimeout, RpcUnavailable, request, serve_rpc
from libs.runtime.clock import Clock, utc_now
from libs.runtime.health import beat_forever, health_file, process_name
from libs.runtime.shutdown import bounded, cancel_tasks
from services.node_agent.host import host_manifests
from services.node_agent.launch import completion_index, deletion_grace, grace_seconds, pod_processes
from services.node_agent.limits import HostLimits
from services.node_agent.pods import SimulatedPod, SimulatedPods
from services.node_agent.processes import PodFinished, PodProcesses, ProcessRuntime
from services.node_agent.settings import NodeAgentSettings

log = logging.getLogger(__name__)

SERVICE = "node_agent"

PRODUCER = "node-agent"
DISRUPTION_TARGET = "DisruptionTarget"
DELETED = "Deleted"
"""The eviction reason of a pod deleted while it runs: the agent stops it and deletes it."""
STARTED_BY = "startedBy"
"""`status.podway.startedBy`: the `pods.running` a pod's ending answers, kept across restarts of its agent."""
NODE_RESTARTED = "NodeRestarted"
"""The reason of a pod that ran on a host taken away and brought back before its node was lost."""
REGISTER_CHUNK = 256
CONSUMER_BATCH = 64
REGISTER_PATIENCE_S = 60.0
REGISTER_TIMEOUT_S = 60.0
PodGroupKey = tuple[str, str, str]


class PodStart(NamedTuple):
    """Bound pods of one group (or one standalone pod) to start, and the event that bound them."""

    placed: list[tuple[StoredObject, str]]
    podgroup: PodGroupKey | None
    cause: str | None


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeAgentService:
    """`start()` / `stop()`. `clock` drives pod run times, so tests move time instead of waiting for it;
    `manifests` overrides the cluster the settings describe."""

    def __init__(
        self,
        settings: NodeAgentSettings,
        *,
        clock: Clock = utc_now,
        tick_s: float = 0.05,
        manifests: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        if not settings.nats_url:
            raise ValueError("the node agent needs PODWAY_NATS_URL")
        self.settings = settings
        self.clock = clock
        self.tick_s = tick_s
        self.runtime: ProcessRuntime | None = None
        self.finished: list[PodFinished] = []
        self._background: set[asyncio.Task[None]] = set()
        self.pod_ips: dict[str, str] = {}
        self._started: dict[str, JsonObject] = {}
        """The status each pod this agent started adds (address, containers, logs), until its end is
        recorded: a pod started ahead of its Running write is never started twice."""
        self._devices: dict[str, dict[str, list[str]]] = {}
        if settings.runtime == "process":
            limits = HostLimits.detect(f"podway-{settings.instance}")
            self.runtime = ProcessRuntime(
                settings.resolved_pods_dir(),
                limits=limits,
                back_off=BackOff(settings.restart_backoff_seconds, settings.restart_backoff_max_seconds),
                on_finished=self._on_pod_finished,
            )
            if manifests is None:
                manifests = host_manifests(
                    node_name=settings.node_name,
                    labels_file=settings.labels_file,
                    devices_file=settings.devices_file,
                    reserved_cpu_m=settings.reserved_cpu_m,
                    reserved_memory_mi=settings.reserved_memory_mi,
                    limits_condition=limits.condition(),
                    taints=settings.node_taints,
                )
        self.manifests = list(manifests) if manifests is not None else settings.cluster_manifests()
        self.nodes = {doc["metadata"]["name"] for doc in self.manifests if doc.get("kind") == "Node"}
        self.engine = create_engine(settings.resolved_database_url())
        self.sessions = create_session_factory(self.engine)
        self.uow = unit_of_work_factory(self.sessions, clock=clock, after_commit=self._kick_relay)
        self.snapshot_engine = snapshot_engine(settings.resolved_database_url(), self.engine)
        self.snapshot = unit_of_work_factory(create_session_factory(self.snapshot_engine), clock=clock)
        """Reads that wait for no writer (a deferred transaction on SQLite): what to start, before the
        transaction that records it queues for the database lock."""
        self.broker = make_broker(settings.nats_url, f"node-agent-{settings.instance}")
        self.down: set[str] = set()
        """Nodes whose host was taken away (`podway cluster node-down`): no beats, no pods."""
        self.consumer = EventConsumer(
            name=durable_name("node-agent", settings.instance),
            subjects=[
                EventType.PODS_BOUND.subject,
                EventType.PODS_EVICTED.subject,
                EventType.NODE_LOST.subject,
            ],
            batch_handler=self.on_events,
            uow_factory=self.uow,
            batch_size=CONSUMER_BATCH,
            fetch_timeout_s=0.5,
            on_reset=self.reconcile,
            prepare=self.start_ahead if self.runtime is not None else None,
        )
        self.consumer.subscribe(self.broker)
        serve_rpc(self.broker, RpcSubject.NODE_AGENT_POWER, self.on_power, queue="")
        self.relay: OutboxRelay | None = None
        self.pods = SimulatedPods()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def _kick_relay(self, committed: Sequence[OutboxMessage]) -> None:
        if self.relay is not None:
            self.relay.kick(committed)

    async def start(self) -> None:
        # Beat first, as a kubelet renews its lease whatever else it does: registering a large cluster
        # through a busy admission must not make a restarted agent's nodes look lost.
        self._tasks = [asyncio.create_task(self._beat_forever(), name="node-heartbeats")]
        await self.register()
        await self.restore()
        await start_broker(self.broker, [self.consumer])
        self.relay = OutboxRelay(self.uow, jetstream(self.broker), clock=self.clock, snapshot=self.snapshot)
        self._tasks += [
            asyncio.create_task(self.relay.run(), name="outbox-relay"),
            asyncio.create_task(self._run_timers(), name="pod-timers"),
        ]
        if self.settings.data_dir:
            # Its own beacon per instance: a second agent in the same data dir must not beat for the first.
            beacon = health_file(Path(self.settings.run_dir), process_name(SERVICE, self.settings.instance))
            self._tasks.append(
                asyncio.create_task(
                    beat_forever(
                        beacon,
                        alive=self.connected,
                        connections=connection_states(self.broker, database_check(self.engine)),
                    ),
                    name="health",
                )
            )
        log.info("node agent ready", extra={"nodes": len(self.nodes), "running": len(self.pods)})

    async def stop(self) -> None:
        """Stop in bounded time: a step that hangs on a dead peer is logged and left behind."""
        await cancel_tasks(self._tasks, service=SERVICE)
        if self.runtime is not None and not self.settings.keep_pods_on_stop:
            await bounded(self.runtime.terminate_all(), "stopping the pods' processes", service=SERVICE)
        await cancel_tasks(list(self._background), service=SERVICE)
        await bounded(self.consumer.stop(), "stopping the consumer", service=SERVICE)
        await bounded(self.broker.stop(), "stopping the broker", service=SERVICE)
        await bounded(self.engine.dispose(), "closing the database pool", service=SERVICE)
        await bounded(
            dispose_snapshot(self.snapshot_engine, self.engine), "closing the snapshot pool", service=SERVICE
        )

    def connected(self) -> bool:
        """Whether the service's NATS connection is up or coming back (not closed for good)."""
        return bus_state(self.broker) != "closed"

    def wake(self) -> None:
        """Check the pod timers now (e.g. after a test moved the clock)."""
        self._wake.set()

    # -- registration -----------------------------------------------------------------------------------

    async def register(self) -> None:
        """Apply the cluster's Nodes and ResourceSlices through admission (waiting for it to answer), after
        the DeviceClasses of their drivers, which are created when absent and never changed."""
        assert self.settings.nats_url is not None
        broker = make_broker(self.settings.nats_url, "node-agent")
        await broker.connect()

        def ask(body: ApplyRequest) -> Awaitable[bytes]:
            return request(broker, RpcSubject.ADMISSION_APPLY, body, timeout_s=REGISTER_TIMEOUT_S)

        try:
            classes = await self._apply_when_admission_answers(
                ask, device_classes_of(self.manifests), create_only=True
            )
            self._log_rejections(classes)
            for start in range(0, len(self.manifests), REGISTER_CHUNK):
                chunk = self.manifests[start : start + REGISTER_CHUNK]
                self._log_rejections(await self._apply_when_admission_answers(ask, chunk))
        finally:
            await broker.stop()

    def _log_rejections(self, reply: ApplyReply) -> None:
        for result in reply.results:
            if result.outcome == "rejected":
                log.error("registration rejected: %s", result.message)

    async def _apply_when_admission_answers(
        self,
        ask: Callable[[ApplyRequest], Awaitable[bytes]],
        chunk: list[dict[str, Any]],
        *,
        create_only: bool = False,
    ) -> ApplyReply:
        """Admission's apply RPC, asked again while admission is not answering yet (the stack is starting)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REGISTER_PATIENCE_S
        body = ApplyRequest(request_id=str(uuid.uuid4()), manifests=chunk, create_only=create_only)
        while True:
            try:
                return ApplyReply.model_validate_json(await ask(body))
            except (RpcUnavailable, RpcTimeout):
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def restore(self) -> None:
        """After a restart, keep running the pods that were running on this agent's nodes."""
        if self.runtime is not None:
            await self._restore_processes()
            return
        async with self.uow() as uow:
            pods = {pod.uid: pod for pod in await uow.objects.find("Pod")}
            for node in sorted(self.nodes):
                for binding in await uow.bindings.list_for_node(node):
                    stored = pods.get(binding.pod_uid)
                    if stored is None or stored.status.get("phase") != "Running":
                        continue
                    group = _group_name(stored)
                    podgroup = (
                        (stored.namespace, group, binding.podgroup_uid)
                        if group and binding.podgroup_uid
                        else None
                    )
                    started = _timestamp(stored.status.get("startTime")) or self.clock().timestamp()
                    self.pods.run([self._running(stored, node, podgroup, started)])

    # -- events -----------------------------------------------------------------------------------------

    async def on_events(self, events: Sequence[tuple[Envelope, EventPayload]], uow: UnitOfWork) -> None:
        """Bound pods start and evicted pods stop, in stream order; the pods of consecutive `pods.bound`
        events start together (one read of their bindings, one of the pods, one write)."""
        bound: list[tuple[Envelope, PodsBound]] = []
        for envelope, payload in events:
            if isinstance(payload, PodsBound):
                bound.append((envelope, payload))
            elif isinstance(payload, PodsEvicted):
                await self._start(bound, uow)
                bound = []
                await self._evict(envelope, payload, uow)
            elif isinstance(payload, NodeLost):
                self._forget_lost(payload)
        await self._start(bound, uow)

    async def start_ahead(self, events: Sequence[tuple[Envelope, EventPayload]]) -> None:
        """Start the processes of freshly bound pods from a snapshot, before the consumer's transaction
        queues for the database lock (on SQLite, one writer at a time): `on_events` then records them Running
        without starting them again."""
        bound = [(envelope, payload) for envelope, payload in events if isinstance(payload, PodsBound)]
        if not bound:
            return
        async with self.snapshot() as snapshot:
            starts = await self._starts(bound, snapshot)
        for placed, podgroup, _ in starts:
            fresh = [(pod, node) for pod, node in placed if _startable(pod)]
            if fresh:
                await self._launch(fresh, podgroup)

    async def _start(self, events: Sequence[tuple[Envelope, PodsBound]], uow: UnitOfWork) -> None:
        starts = await self._starts(events, uow)
        recorded = await self._run_pods(uow, starts)
        if self.runtime is not None:
            self._stop_unrecorded(events, starts, recorded)

    def _stop_unrecorded(
        self, events: Sequence[tuple[Envelope, PodsBound]], starts: Sequence[PodStart], recorded: set[str]
    ) -> None:
        """Processes started ahead for pods that turned out not to start (deleted, or bound no more, by the
        time their Running was to be written) are stopped: nothing would ever record them."""
        pending = {pod.uid for placed, _, _ in starts for pod, _ in placed if _pending(pod)}
        found = {pod.uid for placed, _, _ in starts for pod, _ in placed}
        for _, bound in events:
            for placement in self._mine(bound):
                uid = placement.pod_uid
                if uid in self._started and uid not in recorded and (uid in pending or uid not in found):
                    self._in_background(self._kill(uid))

    async def _starts(self, events: Sequence[tuple[Envelope, PodsBound]], uow: UnitOfWork) -> list[PodStart]:
        """The pods of `events` bound to this agent's nodes, as `uow` reads them, grouped as bound."""
        mine = [(envelope, bound, self._mine(bound)) for envelope, bound in events]
        for _, _, placements in mine:
            self._devices.update(
                (p.pod_uid, p.devices) for p in placements if p.devices and p.pod_uid not in self._started
            )
        grouped = [
            placement for _, bound, placed in mine if bound.podgroup is not None for placement in placed
        ]
        bindings = {b.pod_uid: b for b in await uow.bindings.get_many(p.pod_uid for p in grouped)}
        keys = [
            ("Pod", bound.podgroup.namespace, p.pod)
            for _, bound, placed in mine
            if bound.podgroup
            for p in placed
        ]
        stored = {pod.uid: pod for pod in await uow.objects.get_many(keys)}
        starts: list[PodStart] = []
        for envelope, bound, placements in mine:
            group = bound.podgroup
            if group is None:
                nodes, pods = await self._standalone(placements, uow)
            else:
                held = (bindings.get(p.pod_uid) for p in placements)
                nodes = {b.pod_uid: b.node_name for b in held if b and b.podgroup_uid == group.uid}
                pods = stored
            placed: list[tuple[StoredObject, str]] = []
            for placement in placements:
                pod = pods.get(placement.pod_uid)
                if nodes.get(placement.pod_uid) != placement.node:
                    log.warning("pod %s has no binding to %s; not running it", placement.pod, placement.node)
                    continue
                if pod is not None:
                    placed.append((pod, placement.node))
            podgroup = (group.namespace, group.name, group.uid) if group is not None else None
            starts.append(PodStart(placed, podgroup, str(envelope.event_id)))
        return starts

    def _mine(self, bound: PodsBound) -> list[PodPlacement]:
        """Placements on this agent's nodes whose host is up (a dark host starts nothing)."""
        return [p for p in bound.pods if p.node in self.nodes and p.node not in self.down]

    def _forget_lost(self, lost: NodeLost) -> None:
        """The scheduler failed the pods of a node it lost: stop running them here (they ended)."""
        if lost.node in self.nodes:
            for ref in lost.pods:
                self.pods.stop(ref.uid)
                if self.runtime is not None:
                    self._in_background(self._kill(ref.uid))

    @staticmethod
    async def _standalone(
        placements: Sequence[PodPlacement], uow: UnitOfWork
    ) -> tuple[dict[str, str], dict[str, StoredObject]]:
        """The bindings and pods of pods bound without a group, read one by one (each is its own story)."""
        nodes: dict[str, str] = {}
        pods: dict[str, StoredObject] = {}
        for placement in placements:
            binding = await uow.bindings.get(placement.pod_uid)
            pod = await uow.objects.get_by_uid(placement.pod_uid)
            if binding is not None and pod is not None:
                nodes[placement.pod_uid], pods[placement.pod_uid] = binding.node_name, pod
        return nodes, pods

    async def _run_pods(self, uow: UnitOfWork, starts: Sequence[PodStart]) -> set[str]:
        """Start bound pods that are still Pending: phase Running, one `pods.running` per start, one write for
        all of them. Returns the pods recorded Running."""
        now = self.clock()
        start_time = iso(now)
        running: list[SimulatedPod] = []
        started: dict[str, tuple[StoredObject, JsonObject]] = {}
        for placed, podgroup, cause in starts:
            these: list[SimulatedPod] = []
            fresh = [(pod, node) for pod, node in placed if _startable(pod)]
            processes = await self._launch(fresh, podgroup) if self.runtime is not None else {}
            for pod, node in fresh:
                if pod.uid in started:
                    continue  # bound twice in one batch: started once
                status = {
                    **pod.status,
                    "phase": "Running",
                    "startTime": start_time,
                    "podway": {"nodeName": node},
                    **processes.get(pod.uid, {}),
                }
                started[pod.uid] = (pod, status)
                these.append(self._running(pod, node, podgroup, now.timestamp()))
            if these:
                refs = [PodRef(namespace=p.namespace, name=p.name, uid=p.uid, node=p.node) for p in these]
                envelope = self._envelope(PodsRunning(pods=refs), podgroup, these[0], now, cause)
                uow.emit(envelope)
                told = str(envelope.event_id)
                for p in these:
                    started[p.uid][1]["podway"][STARTED_BY] = told
                running += [dataclasses.replace(p, started_by=told) for p in these]
        await uow.objects.update_statuses(list(started.values()))
        if running:
            self.pods.run(running)
            self._wake.set()
        return set(started)

    async def _evict(self, envelope: Envelope, evicted: PodsEvicted, uow: UnitOfWork) -> None:
        mine = [ref for ref in evicted.pods if ref.node in self.nodes or ref.uid in self.pods]
        if not mine:
            return
        group = evicted.podgroup
        podgroup = (group.namespace, group.name, group.uid) if group is not None else None
        if evicted.reason == DELETED:
            await self._terminate(uow, mine, podgroup, str(envelope.event_id), evicted.grace_seconds)
            return
        # A host taken away reports nothing: its evicted pods hold their room until it is back (they died
        # with it) or its node is lost (the scheduler fails them).
        reachable = [ref for ref in mine if ref.node not in self.down]
        if reachable:
            await self._stop(uow, reachable, podgroup, evicted.reason, str(envelope.event_id))

    async def _stop(
        self,
        uow: UnitOfWork,
        mine: list[PodRef],
        podgroup: PodGroupKey | None,
        reason: str,
        cause: str | None,
    ) -> None:
        """Evicted pods stop; with processes, their room is released only once every process is gone."""
        if self.runtime is None:
            await self._record_stopped(uow, mine, podgroup, reason, cause)
            return
        self._after_processes_end(
            mine, lambda later: self._record_stopped(later, mine, podgroup, reason, cause)
        )

    async def _terminate(
        self,
        uow: UnitOfWork,
        mine: list[PodRef],
        podgroup: PodGroupKey | None,
        cause: str | None,
        grace_s: float | None = None,
    ) -> None:
        """Pods deleted while they run: with processes, deleted only once every process is gone (within
        `grace_s`, the delete's grace period, else each pod's own)."""
        if self.runtime is None:
            await self._record_terminated(uow, mine, podgroup, cause)
            return
        self._after_processes_end(
            mine, lambda later: self._record_terminated(later, mine, podgroup, cause), grace_s
        )

    async def _record_stopped(
        self,
        uow: UnitOfWork,
        mine: list[PodRef],
        podgroup: PodGroupKey | None,
        reason: str,
        cause: str | None,
    ) -> None:
        """Evicted pods: phase Failed with DisruptionTarget, their node released, one `pods.failed`."""
        now = self.clock()
        for ref in mine:
            self.pods.stop(ref.uid)
        # One read and one write for all of them: a preemption evicts whole gangs at once.
        nodes = {ref.uid: ref.node or "" for ref in mine}
        found = await uow.objects.get_many(("Pod", ref.namespace, ref.name) for ref in mine)
        stopped: list[tuple[StoredObject, str]] = []
        changes: list[tuple[StoredObject, JsonObject]] = []
        for pod in sorted(found, key=lambda pod: pod.name):
            if pod.uid not in nodes or pod.status.get("phase") in ("Succeeded", "Failed"):
                continue
            condition = {"type": DISRUPTION_TARGET, "status": "True", "reason": reason}
            status = {
                **pod.status,
                "phase": "Failed",
                "reason": DISRUPTION_TARGET,
                "message": f"evicted: {reason}",
                "conditions": [*pod.status.get("conditions", []), condition],
            }
            changes.append((pod, status))
            stopped.append((pod, nodes[pod.uid]))
        await uow.objects.update_statuses(changes)
        await uow.bindings.release_many(pod.uid for pod, _ in stopped)
        if stopped:
            refs = [PodRef(namespace=p.namespace, name=p.name, uid=p.uid, node=node) for p, node in stopped]
            first = SimulatedPod(
                refs[0].uid, refs[0].namespace, refs[0].name, refs[0].node or "", podgroup, None
            )
            uow.emit(
                self._envelope(PodsFailed(pods=refs, reason=DISRUPTION_TARGET), podgroup, first, now, cause)
            )

    def _terminated(self, mine: list[PodRef]) -> Callable[[UnitOfWork], Awaitable[None]]:
        """What records these pods terminated, for `_after_processes_end`."""
        return lambda uow: self._record_terminated(uow, mine, None, None)

    async def _record_terminated(
        self, uow: UnitOfWork, mine: list[PodRef], podgroup: PodGroupKey | None, cause: str | None
    ) -> None:
        """Pods deleted while they run here: stop them, and delete each (its binding goes with it) with an
        `object.deleted` saying where it was terminated."""
        now = self.clock()
        for ref in mine:
            self.pods.stop(ref.uid)
            pod = await uow.objects.get_by_uid(ref.uid)
            if pod is None:
                continue
            if self.runtime is not None:
                self.runtime.forget(pod.uid)
            await uow.objects.delete(
                "Pod", pod.namespace, pod.name, expected_resource_version=pod.resource_version
            )
            deleted = ObjectDeleted(
                kind="Pod",
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                reason=f"terminated on node {ref.node or _node_of(pod)}",
            )
            subject = AggregateRef(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid)
            uow.emit(
                Envelope.wrap(
                    deleted,
                    producer=PRODUCER,
                    correlation_id=podgroup[2] if podgroup is not None else pod.uid,
                    occurred_at=now,
                    causation_id=cause,
                    subject=subject,
                )
            )

    # -- heartbeats and hosts -------------------------------------------------------------------------------

    async def _beat_forever(self) -> None:
        """Beat for every node whose host is up, every `node_heartbeat_seconds` (the scheduler watches)."""
        while True:
            try:
                await self.beat()
            except Exception:
                log.warning("node heartbeat failed; beating again later", exc_info=True)
            await asyncio.sleep(self.settings.node_heartbeat_seconds)

    async def beat(self) -> None:
        async with self.uow() as uow:
            await uow.node_heartbeats.beat(self.nodes - self.down, self._agent_name, self.clock())
            await uow.commit()

    @property
    def _agent_name(self) -> str:
        return f"node-agent-{self.settings.instance}"

    async def on_power(self, body: bytes) -> NodePowerReply | None:
        """Take a node's host away or bring it back; a node of another agent is that agent's to answer."""
        request = NodePowerRequest.model_validate_json(body)
        if request.node not in self.nodes:
            return None
        if not request.on:
            self.down.add(request.node)
            stopped = [pod for pod in self.pods.pods() if pod.node == request.node]
            for pod in stopped:
                self.pods.stop(pod.uid)  # died with the host: nobody reports them
            log.warning("node %s taken away: %d pod(s) died with it", request.node, len(stopped))
            return NodePowerReply(
                node=request.node, agent=self._agent_name, on=False, pods_stopped=len(stopped)
            )
        self.down.discard(request.node)
        failed = await self._restarted(request.node)
        await self.beat()
        await self.reconcile()
        log.info("node %s is back: %d pod(s) failed with its restart", request.node, failed)
        return NodePowerReply(node=request.node, agent=self._agent_name, on=True, pods_failed=failed)

    async def _restarted(self, node: str) -> int:
        """A host back from the dark: the pods the database still has Running there died with it (unless
        the scheduler lost the node meanwhile: then they failed already). Failed, `NodeRestarted`, their
        bindings released, a `pods.failed` per PodGroup."""
        now = self.clock()
        async with self.uow() as uow:
            by_group: dict[PodGroupKey | None, list[SimulatedPod]] = {}
            changes: list[tuple[StoredObject, JsonObject]] = []
            for binding in await uow.bindings.list_for_node(node):
                pod = await uow.objects.get_by_uid(binding.pod_uid)
                if pod is None or pod.status.get("phase") != "Running" or pod.uid in self.pods:
                    continue
                message = f"node {node} restarted while the pod ran"
                changes.append(
                    (pod, {**pod.status, "phase": "Failed", "reason": NODE_RESTARTED, "message": message})
                )
                podgroup = self._podgroup_of(pod, binding.podgroup_uid)
                by_group.setdefault(podgroup, []).append(
                    SimulatedPod(pod.uid, pod.namespace, pod.name, node, podgroup, None)
                )
            await uow.objects.update_statuses(changes)
            await uow.bindings.release_many(pod.uid for pod, _ in changes)
            for podgroup, pods in by_group.items():
                refs = [PodRef(namespace=p.namespace, name=p.name, uid=p.uid, node=node) for p in pods]
                uow.emit(
                    self._envelope(PodsFailed(pods=refs, reason=NODE_RESTARTED), podgroup, pods[0], now, None)
                )
            await uow.commit()
        return len(changes)

    # -- reconciling ----------------------------------------------------------------------------------------

    async def reconcile(self) -> None:
        """Re-derive from the database what lost events would have told this agent: pods bound to its nodes
        that are not running yet start, pods marked for deletion are terminated, pods marked
        `DisruptionTarget` stop."""
        async with self.uow() as uow:
            bindings = await uow.bindings.list_for_nodes(self.nodes)
            pods = {pod.uid: pod for pod in await uow.objects.find("Pod")}
            evicted = {c.object_uid for c in await uow.conditions.with_status(DISRUPTION_TARGET, "True")}
            to_run: dict[PodGroupKey | None, list[tuple[StoredObject, str]]] = {}
            # Pods being deleted, by the grace period their deletion gave them (None: their own).
            to_terminate: dict[float | None, list[PodRef]] = {}
            to_stop: list[PodRef] = []
            for binding in bindings:
                pod = pods.get(binding.pod_uid)
                if pod is None or pod.status.get("phase") in ("Succeeded", "Failed"):
                    continue
                ref = PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid, node=binding.node_name)
                if pod.deletion_requested_at is not None:
                    to_terminate.setdefault(deletion_grace(pod), []).append(ref)
                elif pod.uid in evicted:
                    to_stop.append(ref)
                elif pod.status.get("phase", "Pending") == "Pending":
                    to_run.setdefault(self._podgroup_of(pod, binding.podgroup_uid), []).append(
                        (pod, binding.node_name)
                    )
            await self._run_pods(
                uow, [PodStart(placed, podgroup, None) for podgroup, placed in to_run.items()]
            )
            for grace_s, refs in to_terminate.items():
                await self._terminate(uow, refs, None, None, grace_s)
            await self._stop(uow, to_stop, None, "reconciled", None)
            await uow.commit()
        log.info(
            "node agent reconciled",
            extra={
                "started": sum(map(len, to_run.values())),
                "terminated": len(to_terminate),
                "stopped": len(to_stop),
            },
        )

    @staticmethod
    def _podgroup_of(pod: StoredObject, podgroup_uid: str | None) -> PodGroupKey | None:
        group = _group_name(pod)
        return (pod.namespace, group, podgroup_uid) if group and podgroup_uid else None

    # -- finishing --------------------------------------------------------------------------------------

    async def _run_timers(self) -> None:
        if self.runtime is not None:
            await self._record_finished_forever()
            return
        while True:
            now = self.clock().timestamp()
            due = self.pods.due(now)
            if due:
                try:
                    await self._succeed(due)
                except Exception:
                    log.exception("recording %d finished pods failed; retrying", len(due))
                    self.pods.run(due)
                    await asyncio.sleep(1.0)
                continue
            self._wake.clear()
            timeout = self.tick_s
            next_finish = self.pods.next_finish()
            if next_finish is not None:
                timeout = max(0.0, min(timeout, next_finish - now))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _succeed(self, finished: Iterable[SimulatedPod]) -> None:
        """Record pods that ran their time: phase Succeeded, one `pods.succeeded` per PodGroup; one read and
        one write for all of them."""
        pods = list(finished)
        now = self.clock()
        finished_at = iso(now)
        async with self.uow() as uow:
            stored = {
                p.uid: p for p in await uow.objects.get_many([("Pod", p.namespace, p.name) for p in pods])
            }
            done: dict[PodGroupKey | None, list[SimulatedPod]] = {}
            succeeded: list[tuple[StoredObject, JsonObject]] = []
            for pod in pods:
                current = stored.get(pod.uid)
                if current is None or current.status.get("phase") != "Running":
                    continue
                succeeded.append(
                    (current, {**current.status, "phase": "Succeeded", "finishedAt": finished_at})
                )
                done.setdefault(pod.podgroup, []).append(pod)
            await uow.objects.update_statuses(succeeded)
            await uow.bindings.release_many(pod.uid for group in done.values() for pod in group)
            for podgroup, group in done.items():
                refs = [PodRef(namespace=p.namespace, name=p.name, uid=p.uid, node=p.node) for p in group]
                uow.emit(
                    self._envelope(PodsSucceeded(pods=refs), podgroup, group[0], now, group[0].started_by)
                )
            await uow.commit()

    # -- processes (the process runtime) ---------------------------------------------------------------

    async def _launch(
        self, placed: Sequence[tuple[StoredObject, str]], podgroup: PodGroupKey | None
    ) -> dict[str, JsonObject]:
        """Start bound pods as processes, a gang's members knowing each other: the status each adds (its
        address, its containers' states, where its logs are)."""
        assert self.runtime is not None
        fresh = [(pod, node) for pod, node in placed if pod.uid not in self._started]
        for pod, _ in fresh:
            self.pod_ips[pod.uid] = free_pod_ip(self.pod_ips.values())
        members = (
            gang_members((pod.name, completion_index(pod), self.pod_ips[pod.uid]) for pod, _ in fresh)
            if podgroup is not None
            else None
        )
        allocatable = self._allocatable()
        pods: list[PodProcesses] = []
        for pod, node in fresh:
            place = PodPlace(node, self.pod_ips[pod.uid], HOST_IP, allocatable)
            directory = self.runtime.pod_directory(pod.namespace, pod.name, pod.uid)
            devices = self._devices.pop(pod.uid, {})
            pods.append(pod_processes(pod, directory, place, devices=devices, members=members))
        # What each adds to its status is taken as it starts: a short process may end before it is recorded.
        self._started.update((p.uid, self._process_status(p)) for p in pods)
        await asyncio.gather(*(self.runtime.start(p) for p in pods))
        return {pod.uid: self._started[pod.uid] for pod, _ in placed if pod.uid in self._started}

    def _process_status(self, pod: PodProcesses) -> JsonObject:
        ip = self.pod_ips[pod.uid]
        return {
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "hostIP": HOST_IP,
            "hostIPs": [{"ip": HOST_IP}],
            "containerStatuses": pod.container_statuses(pod.main),
            "initContainerStatuses": pod.container_statuses(pod.init),
            "podwayRuntime": {
                "runtime": "process",
                "logDir": str(pod.directory / "logs"),
                "note": "images are recorded, not pulled: containers run as processes on the host",
            },
        }

    def _allocatable(self) -> dict[str, str]:
        node = next((doc for doc in self.manifests if doc.get("kind") == "Node"), {})
        return dict((node.get("status") or {}).get("allocatable") or {})

    def _after_processes_end(
        self,
        refs: list[PodRef],
        record: Callable[[UnitOfWork], Awaitable[None]],
        grace_s: float | None = None,
    ) -> None:
        """SIGTERM, the grace period (`grace_s`, else each pod's own), SIGKILL; then, in a transaction of its
        own, `record` what ended (the pods' room is released only then)."""

        async def end_then_record() -> None:
            assert self.runtime is not None
            await asyncio.gather(*(self.runtime.terminate(ref.uid, grace_s) for ref in refs))
            for ref in refs:
                self._forget(ref.uid)
            for attempt in range(5):
                try:
                    async with self.uow() as uow:
                        await record(uow)
                        await uow.commit()
                    return
                except Exception:
                    log.exception("recording %d stopped pod(s) failed (attempt %d)", len(refs), attempt + 1)
                    await asyncio.sleep(1.0)

        self._in_background(end_then_record())

    async def _kill(self, uid: str) -> None:
        """Stop a pod's processes whose ending the scheduler has already recorded (its node was lost)."""
        assert self.runtime is not None
        await self.runtime.terminate(uid)
        self._forget(uid)

    def _forget(self, uid: str) -> None:
        """A pod of this agent whose end is recorded (or was, by the scheduler)."""
        self.pod_ips.pop(uid, None)
        self._started.pop(uid, None)

    def _in_background(self, work: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_pod_finished(self, finished: PodFinished) -> None:
        self.finished.append(finished)
        self._wake.set()

    async def _record_finished_forever(self) -> None:
        assert self.runtime is not None
        while True:
            self._wake.clear()
            batch, self.finished = self.finished, []
            if batch:
                try:
                    batch = await self._record_finished(batch)
                except Exception:
                    log.exception("recording %d finished pods failed; retrying", len(batch))
                    await asyncio.sleep(1.0)
                self.finished = batch + self.finished
            self.runtime.rotate_logs()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0 if not self.finished else 0.05)

    async def _record_finished(self, batch: list[PodFinished]) -> list[PodFinished]:
        """Pods whose processes ended on their own: Succeeded or Failed with kubelet's container statuses,
        their bindings released, one `pods.succeeded` / `pods.failed` per PodGroup and outcome. Returns the
        ones whose Running is not committed yet (recorded later)."""
        now = self.clock()
        async with self.uow() as uow:
            keys = [("Pod", f.namespace, f.name) for f in batch]
            pods = {p.uid: p for p in await uow.objects.get_many(keys)}
            bindings = {b.pod_uid: b for b in await uow.bindings.get_many(pods)}
            changes: list[tuple[StoredObject, JsonObject]] = []
            outcomes: dict[tuple[PodGroupKey | None, str], list[PodRef]] = {}
            later: list[PodFinished] = []
            for finished in batch:
                pod = pods.get(finished.uid)
                if pod is not None and pod.status.get("phase", "Pending") == "Pending":
                    later.append(finished)
                    continue
                self._forget(finished.uid)
                if pod is None or pod.status.get("phase") != "Running":
                    continue
                changes.append((pod, self._ended_status(pod, finished, iso(now))))
                binding = bindings.get(pod.uid)
                podgroup = self._podgroup_of(pod, binding.podgroup_uid if binding else None)
                ref = PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid, node=_node_of(pod))
                outcomes.setdefault((podgroup, finished.end.reason or finished.end.phase), []).append(ref)
            await uow.objects.update_statuses(changes)
            await uow.bindings.release_many(pod.uid for pod, _ in changes)
            for (podgroup, reason), refs in outcomes.items():
                first = SimulatedPod(
                    refs[0].uid, refs[0].namespace, refs[0].name, refs[0].node or "", podgroup, None
                )
                started_by = (pods[refs[0].uid].status.get("podway") or {}).get(STARTED_BY)
                payload: EventPayload = (
                    PodsSucceeded(pods=refs)
                    if reason == "Succeeded"
                    else PodsFailed(pods=refs, reason=reason)
                )
                uow.emit(self._envelope(payload, podgroup, first, now, started_by))
            await uow.commit()
        return later

    @staticmethod
    def _ended_status(pod: StoredObject, finished: PodFinished, finished_at: str) -> JsonObject:
        status: JsonObject = {
            **pod.status,
            "phase": finished.end.phase,
            "finishedAt": finished_at,
            "containerStatuses": finished.container_statuses,
            "initContainerStatuses": finished.init_container_statuses,
        }
        if finished.end.phase == "Failed":
            status["reason"], status["message"] = finished.end.reason, finished.end.message
        return status

    async def _restore_processes(self) -> None:
        """After an agent restart: the processes of pods still Running here are watched again; a Running pod
        whose processes are gone is reported lost (Failed, ContainerStatusUnknown); processes of pods that are
        no longer Running here are killed. A pod whose deletion the agent was carrying out when it went is
        terminated again, within the grace period its deletion gave it (the delete's event was taken)."""
        assert self.runtime is not None
        deleting: dict[float | None, list[PodRef]] = {}
        async with self.uow() as uow:
            bindings = await uow.bindings.list_for_nodes(self.nodes)
            nodes = {b.pod_uid: b.node_name for b in bindings}
            pods = {p.uid: p for p in await uow.objects.find("Pod") if p.uid in nodes}
            wanted: dict[str, PodProcesses] = {}
            for pod in pods.values():
                if pod.status.get("phase") != "Running":
                    continue
                if pod.deletion_requested_at is not None:
                    ref = PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid, node=nodes[pod.uid])
                    deleting.setdefault(deletion_grace(pod), []).append(ref)
                directory = self.runtime.pod_directory(pod.namespace, pod.name, pod.uid)
                wanted[pod.uid] = PodProcesses(
                    pod.uid,
                    pod.namespace,
                    pod.name,
                    directory,
                    restart_policy_of(pod.spec),
                    [],
                    [],
                    grace_seconds(pod),
                )
                self.pod_ips[pod.uid] = str(pod.status.get("podIP") or "")
        lost = self.runtime.adopt(wanted)
        for uid in lost:
            self._on_pod_finished(
                PodFinished(
                    uid,
                    wanted[uid].namespace,
                    wanted[uid].name,
                    PodEnd(
                        "Failed",
                        ContainerReason.CONTAINER_STATUS_UNKNOWN,
                        "the pod's processes were not found when its agent restarted",
                    ),
                    [],
                    [],
                )
            )
        for grace_s, refs in deleting.items():
            if ending := [ref for ref in refs if ref.uid not in lost]:
                self._after_processes_end(ending, self._terminated(ending), grace_s)
        log.info("processes found again", extra={"adopted": len(wanted) - len(lost), "lost": len(lost)})

    # -- helpers ----------------------------------------------------------------------------------------

    def _running(
        self, pod: StoredObject, node: str, podgroup: PodGroupKey | None, started_at: float
    ) -> SimulatedPod:
        seconds = run_seconds(pod.metadata.get("annotations") or {})
        compression = self.settings.time_compression or 1.0
        finishes_at = started_at + seconds / compression if seconds is not None else None
        started_by = (pod.status.get("podway") or {}).get(STARTED_BY)
        return SimulatedPod(pod.uid, pod.namespace, pod.name, node, podgroup, finishes_at, started_by)

    def _envelope(
        self,
        payload: EventPayload,
        podgroup: PodGroupKey | None,
        pod: SimulatedPod,
        now: datetime,
        cause: str | None,
    ) -> Envelope:
        if podgroup is not None:
            namespace, name, uid = podgroup
            subject = AggregateRef(kind="PodGroup", namespace=namespace, name=name, uid=uid)
        else:
            subject = AggregateRef(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid)
        return Envelope.wrap(
            payload,
            producer=PRODUCER,
            correlation_id=subject.uid or pod.uid,
            occurred_at=now,
            causation_id=cause,
            subject=subject,
        )


def _pending(pod: StoredObject) -> bool:
    return bool(pod.status.get("phase", "Pending") == "Pending")


def _startable(pod: StoredObject) -> bool:
    """Bound, not started yet, not being deleted."""
    return _pending(pod) and pod.deletion_requested_at is None


def _node_of(pod: StoredObject) -> str:
    return str((pod.status.get("podway") or {}).get("nodeName") or "")


def _group_name(pod: StoredObject) -> str | None:
    return (pod.spec.get("schedulingGroup") or {}).get("podGroupName") or None


def _timestamp(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
