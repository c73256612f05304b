"""Between the scheduler state machine and the database: the world a new leader loads, and a pass's
outputs written in one transaction.

Each PodGroup's events in one pass form a causal chain (`cycle.started` -> `cycle.placed` -> `pods.bound`
-> `podgroup.scheduled`), correlated by the PodGroup uid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from libs.core import scheduling as core
from libs.core.scheduling import ConditionReason, ConditionType, Placement
from libs.core.scheduling.inputs import WORLD_KINDS, NominationRecord, World
from libs.core.scheduling.node_health import LOST_MESSAGE, NOT_READY_MESSAGE, NodeCondition
from libs.core.scheduling.objects import STANDALONE_PREFIX, ApiObject, pod_group_name
from libs.core.scheduling.outputs import (
    AllocationFailed,
    Binding,
    CompositeCycleRan,
    CycleRan,
    Disrupted,
    GroupRef,
    LocalQueuesSampled,
    NodeHealthChange,
    NodeLost,
    Output,
    PodKey,
    QuotaReleased,
    Restart,
    TimedOut,
)
from libs.db.core_objects import api_object
from libs.db.node_health import NODE_READY, node_health_records
from libs.db.ports import UnitOfWork
from libs.db.records import Condition, Fence, JsonObject, PodBinding, StoredObject
from libs.events.envelope import AggregateRef, Envelope, EventPayload
from libs.events.scheduling import (
    ClaimAllocation,
    CompositePodGroupScheduled,
    CompositePodGroupUnschedulable,
    PlacementProposed,
    PodGroupCyclePlaced,
    PodGroupCycleStarted,
    PodGroupRef,
    PodGroupRestarted,
    PodGroupScheduled,
    PodGroupTimedOut,
    PodGroupUnschedulable,
    PodPlacement,
    PodRef,
    PodsBound,
    PodsEvicted,
    PodsFailed,
    PreemptionRequested,
    TopologyDomainRef,
)
from libs.events.scheduling import NodeLost as NodeLostEvent
from libs.events.scheduling import NodeNotReady as NodeNotReadyEvent
from libs.events.scheduling import NodeReady as NodeReadyEvent

PRODUCER = "scheduler"
CONDITION_OWNER = "scheduler"
POD_SCHEDULED = "PodScheduled"
GANG_RESTART_REASON = "GangRestart"
WAITING_FOR_CLAIMS_REASON = "WaitingForResourceClaims"
FINISHED_PHASES = ("Succeeded", "Failed")
NODE_LOST_REASON = "NodeLost"
"""A pod's `status.reason` when the node it held room on was lost or deleted."""
TAINT_MANAGER_REASON = "DeletionByTaintManager"
POD_GC_REASON = "DeletionByPodGC"


async def load_world(uow: UnitOfWork, now: datetime) -> World:
    """Every object the scheduler reads, where the pods that still hold capacity are bound, the pods on
    their way out, and the nominations in force.

    A PodGroup's `status.placement` is written in the transaction that binds its pods, so a pod it lists
    (by name and uid) is bound there; the bindings table is read only for groups with other live pods
    (waiting, or placed before a gang restart cleared the placement) and for pods without a group. Pods on
    their way out are those marked for deletion or `DisruptionTarget` (evicted, not yet ended).
    """
    objects: list[ApiObject] = []
    leaving: set[str] = set()
    for kind in WORLD_KINDS:
        for stored in await uow.objects.find(kind):
            objects.append(api_object(stored))
            if kind == "Pod" and stored.deletion_requested_at is not None:
                leaving.add(stored.uid)
    groups = {obj.key: obj for obj in objects if obj.kind == "PodGroup"}
    bindings: dict[str, str] = {}
    unsure_groups: set[str] = set()
    standalone: list[str] = []
    live: set[str] = set()
    for obj in objects:
        if obj.kind != "Pod" or obj.status.get("phase") in FINISHED_PHASES:
            continue
        live.add(obj.uid)
        group_name = pod_group_name(obj)
        group = groups.get(f"{obj.namespace}/{group_name}") if group_name else None
        if group_name is None:
            standalone.append(obj.uid)
        elif group is not None:
            recorded = ((group.status.get("placement") or {}).get("pods") or {}).get(obj.name)
            if recorded and recorded.get("uid") == obj.uid and recorded.get("node"):
                bindings[obj.uid] = str(recorded["node"])
            else:
                unsure_groups.add(group.uid)
    for uid in sorted(unsure_groups):
        for binding in await uow.bindings.list_for_podgroup(uid):
            bindings[binding.pod_uid] = binding.node_name
    for uid in standalone:
        found = await uow.bindings.get(uid)
        if found is not None:
            bindings[uid] = found.node_name
    for condition in await uow.conditions.with_status(ConditionType.DISRUPTION_TARGET, "True"):
        if condition.object_uid in live:
            leaving.add(condition.object_uid)
    nominations = tuple(
        NominationRecord(n.podgroup_uid, n.nodes, n.expires_at.timestamp())
        for n in await uow.nominations.active(now)
    )
    health = await node_health_records(uow, (obj for obj in objects if obj.kind == "Node"), now)
    waiting = {_story_of(obj, groups) for obj in objects if obj.uid in live and obj.uid not in bindings}
    causes = await uow.events.latest_of(waiting)
    return World(objects, bindings, frozenset(leaving & live), nominations, health, causes)


def _story_of(pod: ApiObject, groups: Mapping[str, ApiObject]) -> str:
    """The uid a pod's scheduling story is told under: its PodGroup's, or its own."""
    name = pod_group_name(pod)
    group = groups.get(f"{pod.namespace}/{name}") if name else None
    return group.uid if group is not None else pod.uid


async def write_outputs(uow: UnitOfWork, outputs: Iterable[Output], *, fence: Fence, now: datetime) -> int:
    """Write every output of a pass in the caller's unit of work (the caller commits); returns how many
    pods were bound.

    Statuses and conditions are gathered over the pass and written in a few statements whatever the number
    of gangs. Bindings go in last: they lock the lease row (the fence) until commit, and lease renewals wait
    on that lock, so it is held only for the bindings and the events.
    """
    outcomes = list(outputs)
    writer = _Writer(uow, fence, now)
    await writer.prefetch(outcomes)
    bound = 0
    for outcome in outcomes:
        if isinstance(outcome, CycleRan):
            bound += await writer.cycle(outcome)
        elif isinstance(outcome, CompositeCycleRan):
            await writer.composite(outcome)
        elif isinstance(outcome, Binding):
            await writer.bind(outcome, _Story(writer, outcome.group, outcome.cause))
            bound += len(outcome.placements)
        elif isinstance(outcome, AllocationFailed):
            await writer.allocation_failed(outcome)
        elif isinstance(outcome, TimedOut):
            await writer.timed_out(outcome)
        elif isinstance(outcome, Restart):
            await writer.restart(outcome)
        elif isinstance(outcome, Disrupted):
            await writer.disrupted(outcome)
        elif isinstance(outcome, NodeHealthChange):
            await writer.node_health(outcome)
        elif isinstance(outcome, NodeLost):
            await writer.node_lost(outcome)
        elif isinstance(outcome, QuotaReleased):
            await writer.quota_released(outcome)
        elif isinstance(outcome, LocalQueuesSampled):
            await writer.local_queues_sampled(outcome)
    await writer.flush()
    await uow.bindings.bind_many(writer.bindings, fence=fence)
    return bound


class _Story:
    """The events of one PodGroup in one transaction, each caused by the one before."""

    def __init__(self, writer: _Writer, group: GroupRef, cause: str | None, kind: str = "PodGroup") -> None:
        self._writer = writer
        self._group = group
        self.cause = cause
        if kind != "PodGroup":
            self._subject = AggregateRef(kind=kind, namespace=group.namespace, name=group.name, uid=group.uid)
        elif group.standalone:
            name = group.name.removeprefix(STANDALONE_PREFIX)
            self._subject = AggregateRef(kind="Pod", namespace=group.namespace, name=name, uid=group.uid)
        else:
            self._subject = AggregateRef(
                kind="PodGroup", namespace=group.namespace, name=group.name, uid=group.uid
            )

    def emit(self, payload: EventPayload) -> None:
        envelope = Envelope.wrap(
            payload,
            producer=PRODUCER,
            correlation_id=self._group.uid,
            occurred_at=self._writer.now,
            causation_id=self.cause,
            subject=self._subject,
        )
        self._writer.uow.emit(envelope)
        self.cause = str(envelope.event_id)


class _Writer:
    def __init__(self, uow: UnitOfWork, fence: Fence, now: datetime) -> None:
        self.uow = uow
        self.fence = fence
        self.now = now
        self.bindings: list[PodBinding] = []
        self.podgroups: dict[str, StoredObject] = {}
        self._statuses: dict[str, JsonObject] = {}
        self._conditions: dict[tuple[str, str], Condition] = {}

    async def prefetch(self, outcomes: Sequence[Output]) -> None:
        """Read every PodGroup the outcomes write to, in one query."""
        keys = {
            ("PodGroup", outcome.group.namespace, outcome.group.name)
            for outcome in outcomes
            if not isinstance(outcome, NodeHealthChange | NodeLost | CompositeCycleRan | LocalQueuesSampled)
            and not outcome.group.standalone
        }
        self.podgroups = {stored.uid: stored for stored in await self.uow.objects.get_many(sorted(keys))}

    async def cycle(self, ran: CycleRan) -> int:
        story = _Story(self, ran.group, ran.cause)
        ref = _podgroup_ref(ran.group)
        decision = ran.decision
        if not ran.group.standalone:
            story.emit(
                PodGroupCycleStarted(
                    podgroup=ref, attempt=ran.attempt, pods=ran.pods, min_count=ran.min_count
                )
            )
        if not decision.placed:
            await self.unschedulable(ran, story)
            return 0
        domain = _domain(decision.domain)
        placements = _placements(decision.placements)
        if not ran.group.standalone:
            story.emit(
                PodGroupCyclePlaced(
                    podgroup=ref, domain=domain, placements=placements, cycle_ms=round(ran.cycle_ms, 3)
                )
            )
        if ran.claims:
            story.emit(
                PlacementProposed(
                    podgroup=ref,
                    domain=domain,
                    placements=placements,
                    claims=list(ran.claims),
                    allocations=_proposed_allocations(ran.proposal_status or {}),
                    proposed_at=str((ran.proposal_status or {}).get("proposedAt") or ""),
                )
            )
            await self._set_status(ran.group, proposal=dict(ran.proposal_status or {}))
            if ran.condition_false:
                message = f"waiting for ResourceClaims {', '.join(ran.claims)} to be allocated"
                if ran.group.standalone:
                    await self._pod_condition(ran.group.uid, False, WAITING_FOR_CLAIMS_REASON, message)
                else:
                    await self._group_condition(ran.group, False, WAITING_FOR_CLAIMS_REASON, message)
            return 0
        assert ran.bind is not None
        await self.bind(ran.bind, story)
        return len(ran.bind.placements)

    async def composite(self, ran: CompositeCycleRan) -> None:
        """A composite's cycle in its own story, and its `CompositePodGroupInitiallyScheduled`: True once its
        children were placed together, never False again after that."""
        story = _Story(self, ran.composite, ran.cause, kind="CompositePodGroup")
        ref = _podgroup_ref(ran.composite)
        uid, kind = ran.composite.uid, ConditionType.COMPOSITE_INITIALLY_SCHEDULED
        if ran.placed:
            story.emit(
                CompositePodGroupScheduled(composite=ref, domain=_domain(ran.domain), groups=list(ran.groups))
            )
            reason, message = ConditionReason.SCHEDULED, ""
        else:
            story.emit(
                CompositePodGroupUnschedulable(composite=ref, message=ran.message, groups=list(ran.groups))
            )
            held = await self.uow.conditions.get(uid, kind)
            if held is not None and held.status == "True":
                return
            reason, message = ConditionReason.UNSCHEDULABLE, ran.message
        stored = await self.uow.objects.get_by_uid(uid)
        if stored is None:
            return
        if ran.placed and ran.domain is not None:
            placement = {"domain": {"key": ran.domain.key, "value": ran.domain.value}}
            await self.uow.objects.update_status(
                "CompositePodGroup",
                stored.namespace,
                stored.name,
                {**stored.status, "placement": placement},
            )
        self._conditions[(uid, kind)] = Condition(
            object_uid=uid,
            type=kind,
            status="True" if ran.placed else "False",
            owner=CONDITION_OWNER,
            reason=reason,
            message=message,
            observed_generation=stored.generation,
        )

    async def unschedulable(self, ran: CycleRan, story: _Story) -> None:
        message = ran.decision.message
        ref = _podgroup_ref(ran.group)
        if ran.group.standalone:
            await self._pod_condition(ran.group.uid, False, ConditionReason.UNSCHEDULABLE, message)
            if ran.preemption_priority is not None:
                story.emit(
                    PreemptionRequested(podgroup=ref, priority=ran.preemption_priority, message=message)
                )
            return
        story.emit(
            PodGroupUnschedulable(
                podgroup=ref,
                message=message,
                reasons=dict(ran.decision.reason_counts),
                placed=0,
                min_count=ran.min_count,
                backoff_s=ran.backoff_s,
            )
        )
        if ran.quota_message is not None:
            await self._waits_for_quota(ran)
        elif ran.condition_false:
            await self._group_condition(ran.group, False, ConditionReason.UNSCHEDULABLE, message)
        for uid in ran.joining:
            await self._pod_condition(uid, False, ConditionReason.UNSCHEDULABLE, message)
        if ran.preemption_priority is not None:
            story.emit(PreemptionRequested(podgroup=ref, priority=ran.preemption_priority, message=message))

    async def _waits_for_quota(self, ran: CycleRan) -> None:
        """`QuotaReserved` False in Kueue's words, and `PodGroupScheduled` False saying it is gated by it."""
        stored = self.podgroups.get(ran.group.uid)
        if stored is None:
            return
        reserved = ConditionType.QUOTA_RESERVED
        message = ran.quota_message or ""
        await self._set_condition(
            ran.group.uid, False, ran.quota_reason, message, stored.generation, reserved
        )
        if ran.condition_false:
            gated = ConditionReason.SCHEDULING_GATED
            await self._set_condition(ran.group.uid, False, gated, ran.decision.message, stored.generation)

    async def bind(self, binding: Binding, story: _Story) -> None:
        group = binding.group
        story.emit(
            PodsBound(
                podgroup=None if group.standalone else _podgroup_ref(group),
                pods=_placements(binding.placements),
                epoch=self.fence.epoch,
            )
        )
        owner = None if group.standalone else group.uid
        self.bindings.extend(
            PodBinding(placement.pod_uid, placement.node_name, owner, self.now)
            for placement in binding.placements
        )
        if group.standalone:
            await self._pod_condition(group.uid, True, ConditionReason.SCHEDULED, "")
            return
        generation = await self._set_status(group, placement=dict(binding.placement_status))
        if binding.cluster_queue is not None and generation is not None:
            message = f"Quota reserved in ClusterQueue {binding.cluster_queue}"
            reserved = ConditionReason.QUOTA_RESERVED
            await self._set_condition(
                group.uid, True, reserved, message, generation, ConditionType.QUOTA_RESERVED
            )
        if binding.first and generation is not None:
            await self._set_condition(group.uid, True, ConditionReason.SCHEDULED, "", generation)
            # True again at a later placement changes nothing: the row keeps its first transition time.
            await self._set_condition(
                group.uid,
                True,
                ConditionReason.SCHEDULED,
                "",
                generation,
                ConditionType.POD_GROUP_INITIALLY_SCHEDULED,
            )
        if not binding.first:  # pods that joined the gang may have waited saying why
            for placement in binding.placements:
                await self._pod_condition(placement.pod_uid, True, ConditionReason.SCHEDULED, "")
        story.emit(
            PodGroupScheduled(
                podgroup=_podgroup_ref(group), domain=_domain(binding.domain), bound=len(binding.placements)
            )
        )

    async def allocation_failed(self, failed: AllocationFailed) -> None:
        story = _Story(self, failed.group, failed.cause)
        await self._set_status(failed.group)
        story.emit(
            PodGroupUnschedulable(
                podgroup=_podgroup_ref(failed.group),
                message=failed.reason,
                placed=0,
                min_count=failed.min_count,
                backoff_s=failed.backoff_s,
            )
        )
        if failed.condition_false:
            await self._group_condition(failed.group, False, ConditionReason.UNSCHEDULABLE, failed.reason)

    async def timed_out(self, timed_out: TimedOut) -> None:
        story = _Story(self, timed_out.group, timed_out.cause)
        await self._set_status(timed_out.group)
        story.emit(
            PodGroupTimedOut(
                podgroup=_podgroup_ref(timed_out.group),
                pending_s=timed_out.pending_s,
                message=timed_out.message,
            )
        )
        if timed_out.condition_false:
            await self._group_condition(
                timed_out.group, False, ConditionReason.UNSCHEDULABLE, timed_out.message
            )
        for pod in timed_out.pods:
            stored = await self.uow.objects.get("Pod", pod.namespace, pod.name)
            if stored is not None and stored.uid == pod.uid:
                status = {
                    **stored.status,
                    "phase": "Failed",
                    "reason": "Unschedulable",
                    "message": timed_out.message,
                }
                await self.uow.objects.update_status(
                    "Pod", pod.namespace, pod.name, status, expected_resource_version=stored.resource_version
                )
        if timed_out.pods:
            story.emit(PodsFailed(pods=_pod_refs(timed_out.pods), reason="Unschedulable"))

    async def restart(self, restart: Restart) -> None:
        story = _Story(self, restart.group, restart.cause)
        ref = _podgroup_ref(restart.group)
        evicted = _pod_refs(restart.evict)
        if evicted:
            story.emit(PodsEvicted(pods=evicted, reason=GANG_RESTART_REASON, podgroup=ref))
        story.emit(PodGroupRestarted(podgroup=ref, reason=restart.message, evicted=evicted))
        await self._set_status(restart.group, placement={"domain": None, "nodes": [], "pods": {}})
        for pod in restart.evict:
            self._conditions[(pod.uid, ConditionType.DISRUPTION_TARGET)] = Condition(
                object_uid=pod.uid,
                type=ConditionType.DISRUPTION_TARGET,
                status="True",
                owner=CONDITION_OWNER,
                reason=GANG_RESTART_REASON,
                message=restart.message,
            )

    async def disrupted(self, disrupted: Disrupted) -> None:
        """A gang placed anew: its placement forgotten, `PodGroupScheduled` False until it is bound again."""
        await self._set_status(disrupted.group, placement={"domain": None, "nodes": [], "pods": {}})
        await self._group_condition(disrupted.group, False, disrupted.reason, disrupted.message)

    async def quota_released(self, released: QuotaReleased) -> None:
        """`QuotaReserved` False once the gang holds no quota, if it said True: `Finished` when its pods
        ended, else `Pending` (Kueue's reason for a workload whose reservation was taken back)."""
        uid, kind = released.group.uid, ConditionType.QUOTA_RESERVED
        held = self._conditions.get((uid, kind)) or await self.uow.conditions.get(uid, kind)
        if held is None or held.status != "True":
            return
        if released.finished:
            reason = ConditionReason.QUOTA_FINISHED
            message = f"Quota released in ClusterQueue {released.cluster_queue}: the gang's pods ended"
        else:
            reason = ConditionReason.QUOTA_PENDING
            message = (
                f"Quota released in ClusterQueue {released.cluster_queue}: the gang's pods left their nodes; "
                "it waits for quota again"
            )
        await self._group_condition(released.group, False, reason, message, kind)

    async def local_queues_sampled(self, sampled: LocalQueuesSampled) -> None:
        """Each sampled LocalQueue's `status.fairSharing.admissionFairSharingStatus`, from which a new leader
        restores its usage."""
        keys = sorted(("LocalQueue", namespace, name) for namespace, name, _ in sampled.statuses)
        stored = {(obj.namespace, obj.name): obj for obj in await self.uow.objects.get_many(keys)}
        changes = []
        for namespace, name, written in sampled.statuses:
            queue = stored.get((namespace, name))
            if queue is None:
                continue
            fair_sharing = {**(queue.status.get("fairSharing") or {}), "admissionFairSharingStatus": written}
            changes.append((queue, {**queue.status, "fairSharing": fair_sharing}))
        await self.uow.objects.update_statuses(changes)

    async def node_health(self, change: NodeHealthChange) -> None:
        """A node NotReady (Ready Unknown) or Ready again: its condition and `node.not_ready` / `node.ready`."""
        node = await self.uow.objects.get("Node", "", change.node)
        if node is None:
            return
        if change.condition == NodeCondition.READY:
            self._node_condition(node, "True", change.condition, "kubelet is posting ready status")
            self._emit_for_node(node, NodeReadyEvent(node=node.name, since=change.since))
        else:
            self._node_condition(node, "Unknown", change.condition, NOT_READY_MESSAGE)
            event = NodeNotReadyEvent(node=node.name, since=change.since, message=NOT_READY_MESSAGE)
            self._emit_for_node(node, event)

    async def node_lost(self, lost: NodeLost) -> None:
        """The pods that held room on a lost or deleted node fail (`NodeLost`, `DisruptionTarget`) and let go
        of their bindings; `node.lost`, then a `pods.failed` per PodGroup (or pod), in the pods' stories."""
        node = await self.uow.objects.get("Node", "", lost.node)
        if lost.deleted:
            message = f"node {lost.node} was deleted"
            disruption, detail = POD_GC_REASON, "PodGC: node no longer exists"
        else:
            message = f"node {lost.node} was lost: unheard past the eviction timeout"
            disruption, detail = TAINT_MANAGER_REASON, "Taint manager: deleting due to NoExecute taint"
        failed = await self._fail_pods([pod for _, pod in lost.pods], message)
        for pod in failed:
            self._conditions[(pod.uid, ConditionType.DISRUPTION_TARGET)] = Condition(
                object_uid=pod.uid,
                type=ConditionType.DISRUPTION_TARGET,
                status="True",
                owner=CONDITION_OWNER,
                reason=disruption,
                message=detail,
            )
        await self.uow.bindings.release_many(pod.uid for pod in failed)
        event = NodeLostEvent(node=lost.node, pods=_pod_refs(failed), deleted=lost.deleted, message=message)
        if node is not None:
            self._node_condition(node, "Unknown", NodeCondition.LOST, LOST_MESSAGE)
            cause = self._emit_for_node(node, event, lost.cause)
        else:
            subject = AggregateRef(kind="Node", namespace="", name=lost.node, uid="")
            envelope = Envelope.wrap(
                event, producer=PRODUCER, correlation_id=lost.node, occurred_at=self.now,
                causation_id=lost.cause, subject=subject,
            )  # fmt: skip
            self.uow.emit(envelope)
            cause = str(envelope.event_id)
        uids = {pod.uid for pod in failed}
        stories: dict[GroupRef, list[PodKey]] = {}
        for group, pod in lost.pods:
            if pod.uid in uids:
                stories.setdefault(group, []).append(pod)
        for group, pods in stories.items():
            _Story(self, group, cause).emit(PodsFailed(pods=_pod_refs(pods), reason=NODE_LOST_REASON))

    async def _fail_pods(self, pods: Sequence[PodKey], message: str) -> list[PodKey]:
        """Pods still holding room there, Failed with reason NodeLost (compare-and-set on what was read)."""
        stored = {
            p.uid: p for p in await self.uow.objects.get_many([("Pod", k.namespace, k.name) for k in pods])
        }
        changes: list[tuple[StoredObject, JsonObject]] = []
        failed: list[PodKey] = []
        for pod in pods:
            current = stored.get(pod.uid)
            if current is None or current.status.get("phase") in FINISHED_PHASES:
                continue
            status = {**current.status, "phase": "Failed", "reason": NODE_LOST_REASON, "message": message}
            changes.append((current, status))
            failed.append(pod)
        await self.uow.objects.update_statuses(changes)
        return failed

    def _node_condition(self, node: StoredObject, status: str, reason: str, message: str) -> None:
        self._conditions[(node.uid, NODE_READY)] = Condition(
            object_uid=node.uid,
            type=NODE_READY,
            status=status,
            owner=CONDITION_OWNER,
            reason=reason,
            message=message,
        )

    def _emit_for_node(self, node: StoredObject, payload: EventPayload, cause: str | None = None) -> str:
        subject = AggregateRef(kind="Node", namespace="", name=node.name, uid=node.uid)
        envelope = Envelope.wrap(
            payload, producer=PRODUCER, correlation_id=node.uid, occurred_at=self.now, causation_id=cause,
            subject=subject,
        )  # fmt: skip
        self.uow.emit(envelope)
        return str(envelope.event_id)

    async def flush(self) -> None:
        """Write the statuses and conditions gathered over the pass."""
        await self.uow.objects.update_statuses(
            [(self.podgroups[uid], status) for uid, status in self._statuses.items()]
        )
        await self.uow.conditions.set_many(list(self._conditions.values()))

    async def _set_status(
        self,
        group: GroupRef,
        *,
        placement: dict[str, object] | None = None,
        proposal: dict[str, object] | None = None,
    ) -> int | None:
        """Set `status.placement` (when given) and `status.proposal` (removed when not given), written at
        flush; returns the PodGroup's generation, None when it is gone."""
        stored = self.podgroups.get(group.uid)
        if stored is None:
            return None
        status = dict(self._statuses.get(group.uid, stored.status))
        if placement is not None:
            status["placement"] = placement
        if proposal is not None:
            status["proposal"] = proposal
        else:
            status.pop("proposal", None)
        if status != stored.status or group.uid in self._statuses:
            self._statuses[group.uid] = status
        return stored.generation

    async def _group_condition(
        self,
        group: GroupRef,
        status: bool,
        reason: str,
        message: str,
        type_: ConditionType = ConditionType.POD_GROUP_SCHEDULED,
    ) -> None:
        stored = self.podgroups.get(group.uid)
        if stored is not None:
            await self._set_condition(group.uid, status, reason, message, stored.generation, type_)

    async def _set_condition(
        self,
        uid: str,
        status: bool,
        reason: str,
        message: str,
        generation: int,
        type_: ConditionType = ConditionType.POD_GROUP_SCHEDULED,
    ) -> None:
        self._conditions[(uid, type_)] = Condition(
            object_uid=uid,
            type=type_,
            status="True" if status else "False",
            owner=CONDITION_OWNER,
            reason=reason,
            message=message,
            observed_generation=generation,
        )

    async def _pod_condition(self, pod_uid: str, status: bool, reason: str, message: str) -> None:
        if await self.uow.objects.get_by_uid(pod_uid) is None:
            return
        self._conditions[(pod_uid, POD_SCHEDULED)] = Condition(
            object_uid=pod_uid,
            type=POD_SCHEDULED,
            status="True" if status else "False",
            owner=CONDITION_OWNER,
            reason=reason,
            message=message,
        )


def _podgroup_ref(group: GroupRef) -> PodGroupRef:
    return PodGroupRef(namespace=group.namespace, name=group.name, uid=group.uid)


def _domain(domain: core.TopologyDomainRef | None) -> TopologyDomainRef | None:
    """The event's domain; the whole cluster (no topology constraint) is no domain."""
    if domain is None or not domain.key:
        return None
    return TopologyDomainRef(key=domain.key, value=domain.value)


def _placements(placements: Sequence[Placement]) -> list[PodPlacement]:
    return [
        PodPlacement(
            pod=placement.pod_name,
            pod_uid=placement.pod_uid,
            node=placement.node_name,
            devices={cls: list(names) for cls, names in placement.devices.items()},
        )
        for placement in placements
    ]


def _proposed_allocations(proposal: Mapping[str, Any]) -> list[ClaimAllocation]:
    """The claims of a proposal (`status.proposal`): each pod's, then the PodGroup's."""
    allocations = [
        ClaimAllocation(
            claim=str(record["resourceClaimName"]),
            name=str(record.get("name") or ""),
            pod=pod_name,
            pod_uid=str(pod.get("uid") or ""),
            devices=list(record.get("devices") or []),
            shared=bool(record.get("shared")),
        )
        for pod_name, pod in sorted((proposal.get("pods") or {}).items())
        for record in pod.get("claims") or []
    ]
    allocations += [
        ClaimAllocation(
            claim=str(record["resourceClaimName"]),
            name=str(record.get("name") or ""),
            devices=list(record.get("devices") or []),
        )
        for record in proposal.get("claims") or []
    ]
    return allocations


def _pod_refs(pods: Iterable[PodKey]) -> list[PodRef]:
    return [PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid, node=pod.node) for pod in pods]
