"""The scheduler state machine: what the scheduler knows and every rule it follows, without I/O.

Inputs (`inputs.py`: objects stored and removed, pods finished and evicted, claims allocated or refused,
nominations) go in through `handle`, each with the time it happened; `run_pass(now)` runs the due
time-outs and one cycle per ready PodGroup and returns the outputs (`outputs.py`) for the adapter to write
in one transaction. The service runs it in real time, the simulator on a virtual clock; the same inputs at
the same times give the same outputs.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from libs.core.dra.allocator import ClaimAllocation
from libs.core.dra.claims import ClaimSpec
from libs.core.dra.records import allocation_from_record, allocation_record, resource_claim_name
from libs.core.dra.requests import (
    EXTENDED_RESOURCES_CLAIM,
    claim_devices,
    group_claim_specs,
    named_claim_spec,
    named_claims,
    pod_claim_specs,
)

from .book import TERMINAL, GroupRecord, PodBook, PodRecord
from .claims import ClaimsView, exclusive_devices
from .cycle import schedule_podgroup
from .hints import FreedCapacity, capacity_hint
from .inputs import (
    ClaimsAllocated,
    ClaimsAllocationFailed,
    ClaimsHeld,
    Input,
    NodeHealthChanged,
    NodesHeard,
    Nominated,
    NominationCleared,
    ObjectRemoved,
    ObjectStored,
    PodsBound,
    PodsEvicted,
    PodsFinished,
    World,
)
from .inventory import NodeInventory
from .lifecycle import PodPhase, decide_gang_restart
from .model import (
    CycleDecision,
    GangReason,
    NodeAssignment,
    Placement,
    PodGroup,
    PodRequest,
    ResourceTotals,
    TopologyDomainRef,
    Unschedulable,
)
from .node_health import UNREACHABLE_TAINT, HealthChange, NodeCondition, NodeHealth, NodeHealthSettings
from .objects import ApiObject, parse_timestamp, pod_group_name, pod_request
from .outputs import (
    AllocationFailed,
    Binding,
    CycleRan,
    Disrupted,
    GroupRef,
    NodeHealthChange,
    NodeLost,
    Output,
    PodKey,
    Restart,
    TimedOut,
)
from .queue import PodGroupTimedOut, QueueState, SchedulingQueue, backoff_seconds
from .snapshot import ClusterSnapshot, PlacementConflict

NOMINATED_PREFIX = "nominated/"
"""Uid prefix of the stand-in pods that hold a nominated PodGroup's room in the snapshot."""
CLAIM_PREFIX = "claim/"
"""Uid prefix of the stand-ins that hold, in the snapshot, the node's own exclusive devices of an existing
ResourceClaim pods share (`claim/<namespace>/<name>`), while any pod reserves it."""
CLAIM_NOT_FOUND = 'resourceclaim "{name}" not found'
CLAIM_BEING_DELETED = 'resourceclaim "{name}" is being deleted'
CLAIMS_NOT_ALLOCATED = (
    "ResourceClaims {claims} were not allocated within {seconds:g} s; the placement was released"
)
DISRUPTED_REASON = "Disrupted"
DISRUPTED_MESSAGE = (
    "every pod of the gang ended before finishing (its node was lost or deleted); pods created for the gang "
    "again are placed anew, outside its old domain"
)


@dataclass(frozen=True, slots=True)
class MachineSettings:
    """Limits of one pass, and how long things are waited for or remembered."""

    max_cycles_per_pass: int = 512
    max_pods_per_pass: int = 128
    """A pass stops placing once this many pods are placed, so that its write stays short."""
    claims_timeout_s: float = 30.0
    """A placement waiting for its claims is released after this long and the group retried."""
    tombstone_ttl_s: float = 600.0
    """How long a removed uid is remembered, so that a late event about it is ignored."""
    queueing_hints: bool = True
    """Wake only the parked groups a release of capacity could help (off: every parked group)."""
    node_health: NodeHealthSettings = dataclasses.field(default_factory=NodeHealthSettings)
    """When an unheard node is NotReady, and when its pods fail."""


@dataclass(slots=True)
class WakeStats:
    """How selective the queueing hints were: releases of capacity, and parked groups each woke."""

    capacity_releases: int = 0
    wakeups: int = 0


@dataclass(frozen=True, slots=True)
class _NominatedRoom:
    nodes: tuple[str, ...]
    expires_at: float


class SchedulerStateMachine:
    """Nodes, pods and PodGroups as the scheduler last heard of them, one snapshot and one queue.

    `handle` is idempotent for replayed inputs. `timer`, when given, times each cycle for the `cycle_ms`
    of its output (a measurement only: decisions never depend on it).
    """

    def __init__(
        self, settings: MachineSettings | None = None, *, timer: Callable[[], float] | None = None
    ) -> None:
        self.settings = settings or MachineSettings()
        self._timer = timer
        self.snapshot = ClusterSnapshot()
        self.inventory = NodeInventory(self.snapshot)
        self.claims = ClaimsView(self.inventory.devices)
        self.snapshot.claims = self.claims
        self.book = PodBook()
        self.queue = SchedulingQueue()
        self.stats = WakeStats()
        self._now = 0.0
        self._outputs: list[Output] = []
        self._nominations: dict[str, _NominatedRoom] = {}
        self._reserved: dict[str, list[str]] = {}
        self._capacity_cause: str | None = None
        self._claim_templates: dict[str, ApiObject] = {}
        self._resource_claims: dict[str, ApiObject] = {}
        self._loading = False
        self._versions: dict[str, int] = {}
        self._tombstones: OrderedDict[str, float] = OrderedDict()
        self._freed = FreedCapacity()
        self._wake_all = False
        self._claims_deadlines: list[tuple[float, str, int]] = []
        self.health = NodeHealth(self.settings.node_health)
        self._unreachable: set[str] = set()
        """Nodes not Ready: they carry the unreachable taint, so nothing new is placed there."""
        self._preemption_generation = 0
        self._preemptable_from: int | None = None
        """The lowest priority of the pods bound since the last pass: units a parked group of a higher
        priority may now preempt."""

    # -- loading ------------------------------------------------------------------------------------------

    def load(self, world: World, *, now: float) -> None:
        """Build the world a new leader starts from: objects, bindings, pods leaving, nominations, and
        placements still waiting for their claims (recorded in `status.proposal`)."""
        self._now = now
        self._loading = True
        self.inventory.defer()
        try:
            for record in world.node_health:
                self.health.restore(record.node, record.beats, record.condition, record.since, now=now)
                if record.condition != NodeCondition.READY:
                    self._unreachable.add(record.node)
            for obj in world.objects:
                self._stored(obj, None)
            self.inventory.flush()
            self._hold_named_claims()
            if self._claim_templates or self._resource_claims:
                self._recompute_requests(self._pods_with_claims())
            for uid, node in world.bindings.items():
                self._restore_binding(uid, node)
            for uid in world.leaving:
                self.book.mark_evicting(uid)
            for nomination in world.nominations:
                key = self.book.group_uids.get(nomination.podgroup_uid)
                if key is not None and nomination.expires_at > now:
                    self._nominations[key] = _NominatedRoom(nomination.nodes, nomination.expires_at)
        finally:
            self._loading = False
        for key in sorted(self.book.groups):
            group = self.book.groups[key]
            group.cause = world.causes.get(group.uid, group.cause)
            proposal = group.obj.status.get("proposal")
            if isinstance(proposal, Mapping) and not group.standalone:
                self._restore_proposal(group, proposal)
            self._refresh(key)

    def _restore_binding(self, uid: str, node: str) -> None:
        pod = self.book.pods.get(uid)
        if pod is None or pod.phase in TERMINAL or pod.node is not None:
            return
        group = self.book.groups.get(pod.group_key)
        if group is not None:
            group.scheduled = True  # its pods hold nodes, whatever its status says
        recorded = (group.placement.get(pod.obj.name) if group else None) or {}
        same = recorded.get("node") == node and recorded.get("uid") == uid
        devices = recorded.get("devices") if same else None
        try:
            placement = self.snapshot.bind(pod.request, node, devices)  # type: ignore[arg-type]
        except (PlacementConflict, KeyError):
            self.book.place(uid, node, {}, assumed=False)
            return
        self.book.place(uid, node, placement.devices, assumed=False)
        if same:
            self._hold_recorded(uid, recorded.get("claims"))
            if group is not None and not self.claims.holds(group.key):
                placed = group.obj.status.get("placement")
                self._hold_recorded(group.key, placed.get("claims") if isinstance(placed, Mapping) else None)

    def _hold_recorded(self, owner: str, records: object) -> None:
        """Hold again the shares and reached devices of allocations recorded in a status (or announced),
        and, for a pod, the existing ResourceClaims it names."""
        if not isinstance(records, list) or not records:
            return
        found = [allocation_from_record(record, self.inventory.devices) for record in records]
        allocations = [allocation for allocation in found if allocation is not None]
        self.claims.hold(owner, allocations)
        pod = self.book.pods.get(owner)
        if pod is not None:
            self._reserve_named(pod.obj.namespace, owner, allocations)

    def _bound_by_others(self, uid: str, node: str, devices: Mapping[str, tuple[str, ...]]) -> None:
        pod = self.book.pods.get(uid)
        if pod is None or pod.phase in TERMINAL or pod.node is not None:
            return
        try:
            placement = self.snapshot.bind(pod.request, node, devices or None)
        except (PlacementConflict, KeyError):
            self.book.place(uid, node, {}, assumed=False)
        else:
            self.book.place(uid, node, placement.devices, assumed=False)
        self._preemptable((pod,))
        self._refresh(pod.group_key)

    def drop_outputs(self) -> None:
        """Forget what a pass would write: for an observer that never writes (the preemptor's world)."""
        self._outputs.clear()

    def _restore_proposal(self, group: GroupRecord, proposal: Mapping[str, Any]) -> None:
        """Assume again a placement that was waiting for its claims when the last leader stopped."""
        placements: list[Placement] = []
        for name, recorded in sorted((proposal.get("pods") or {}).items()):
            pod = self.book.pods.get(str(recorded.get("uid")))
            if pod is None or not pod.pending or pod.obj.name != name or pod.group_key != group.key:
                continue
            devices = {cls: tuple(names) for cls, names in (recorded.get("devices") or {}).items()}
            request = pod.request
            placements.append(
                Placement(
                    pod.uid, name, str(recorded.get("node")), request.cpu_milli, request.memory, devices
                )
            )
        if not placements:
            return
        placements.sort(key=lambda placement: placement.node_name)
        by_node: dict[str, list[Placement]] = {}
        for placement in placements:
            by_node.setdefault(placement.node_name, []).append(placement)
        domain = proposal.get("domain") or None
        proposed_at = parse_timestamp(proposal.get("proposedAt")) or self._now
        placed = {placement.pod_uid for placement in placements}
        decision = CycleDecision(
            group.key,
            tuple(placements),
            tuple(NodeAssignment.of(on_node) for on_node in by_node.values()),
            TopologyDomainRef(str(domain["key"]), str(domain.get("value") or "")) if domain else None,
            tuple(sorted(uid for uid in group.pending if uid not in placed)),
            None,
            proposed_at,
        )
        try:
            self.snapshot.apply(decision)
        except PlacementConflict:
            self._outputs.append(self._refused(group, decision, "the proposed placement no longer fits"))
            return
        for placement in placements:
            self.book.place(placement.pod_uid, placement.node_name, placement.devices, assumed=True)
            recorded = (proposal.get("pods") or {}).get(placement.pod_name) or {}
            self._hold_recorded(placement.pod_uid, recorded.get("claims"))
        self._hold_recorded(group.key, proposal.get("claims"))
        count = len(group.pending) + len(group.placed)
        self.queue.hold_for_claims(self.book.core_group(group), pod_count=count, pending_since=proposed_at)
        self._await_claims(group, decision, proposed_at)

    # -- inputs -------------------------------------------------------------------------------------------

    def handle(self, event: Input, *, now: float) -> None:
        """Take in one input that happened at `now`."""
        self._now = now
        if isinstance(event, ObjectStored):
            self._stored(event.obj, event.cause)
        elif isinstance(event, ObjectRemoved):
            self._removed(event)
        elif isinstance(event, PodsFinished):
            self._pods_finished(event.uids, event.phase, event.cause)
        elif isinstance(event, PodsEvicted):
            for uid in event.uids:
                self.book.mark_evicting(uid)
        elif isinstance(event, PodsBound):
            for uid, node, devices in event.placements:
                self._bound_by_others(uid, node, devices)
        elif isinstance(event, ClaimsAllocated):
            self._claims_allocated(event.podgroup_uid, event.cause, event.devices)
        elif isinstance(event, ClaimsAllocationFailed):
            self._claims_failed(event.podgroup_uid, event.reason, event.cause)
        elif isinstance(event, ClaimsHeld):
            self._claims_held(event)
        elif isinstance(event, Nominated):
            self._nominate(event)
        elif isinstance(event, NominationCleared):
            self._clear_nomination(event.podgroup_uid)
        elif isinstance(event, NodesHeard):
            for change in self.health.heard(event.beats, now=now):
                self._health_changed(change, None)
        elif isinstance(event, NodeHealthChanged):
            self._taint(event.node, event.condition != NodeCondition.READY, event.cause)

    def _stored(self, obj: ApiObject, cause: str | None) -> None:
        if self._stale(obj):
            return
        kind = obj.kind
        if kind == "Node":
            if self.inventory.put_node(self._tainted(obj)):
                self._wake_everyone(cause)
        elif kind == "ResourceSlice":
            if self.inventory.put_slice(obj):
                self._wake_everyone(cause)
        elif kind == "DeviceClass":
            if self.inventory.put_device_class(obj):
                self._recompute_requests(self.book.pods.values())
                self._wake_everyone(cause)
        elif kind == "ResourceClaimTemplate":
            self._claim_templates[obj.key] = obj
            self._recompute_requests(self._pods_with_claims())
        elif kind == "Workload":
            keys = self.book.put_workload(obj)
            self.queue.add_workload(obj.namespace, obj.name, now=self._now)
            for key in keys:
                self._refresh(key)
        elif kind == "PodGroup":
            group = self.book.put_group(obj)
            group.cause = cause or group.cause
            self._recompute_requests(self.book.members(group.key))
            self._refresh(group.key)
        elif kind == "Pod":
            self._stored_pod(obj, cause)
        elif kind == "ResourceClaim":
            self._resource_claims[obj.key] = obj
            if self._loading:
                self._hold_allocated_claim(obj)
            else:
                self._named_claim_changed(obj.key, cause)

    def _hold_allocated_claim(self, claim: ApiObject) -> None:
        """A new leader holds the shares and reached devices of the claims allocated to live pods and
        PodGroups (a standalone pod's are recorded nowhere else)."""
        status = claim.status
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results")
        reserved = status.get("reservedFor") or []
        if not results or not reserved:
            return
        if not claim.metadata.get("ownerReferences"):
            return  # a claim pods name: held once the nodes are known (`_hold_named_claims`)
        holder = reserved[0]
        if holder.get("resource") == "podgroups":
            owner = f"{claim.namespace}/{holder.get('name')}"
            if owner not in self.book.groups:
                return
        else:
            owner = str(holder.get("uid"))
            pod = self.book.pods.get(owner)
            if pod is None or pod.phase in TERMINAL:
                return
        allocation = allocation_from_record({"devices": results}, self.inventory.devices, key=claim.key)
        if allocation is not None:
            self.claims.add(owner, allocation)

    def _hold_named_claims(self) -> None:
        """A new leader's pods reserving existing ResourceClaims they name, as the claims' statuses say."""
        for claim in self._resource_claims.values():
            status = claim.status
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results")
            if not results or claim.metadata.get("ownerReferences"):
                continue
            allocation = allocation_from_record({"devices": results}, self.inventory.devices, key=claim.key)
            if allocation is None:
                continue
            allocation = dataclasses.replace(allocation, resource_claim=claim.name)
            for holder in status.get("reservedFor") or []:
                pod = self.book.pods.get(str(holder.get("uid")))
                if pod is not None and pod.phase not in TERMINAL:
                    self._reserve_named(claim.namespace, pod.uid, (allocation,))

    def _stale(self, obj: ApiObject) -> bool:
        """Whether the object was removed, or is older than the version held: events of one object may
        arrive out of order (each process publishes its own commits)."""
        if obj.uid in self._tombstones:
            return True
        held = self._versions.get(obj.uid)
        if held is not None and obj.resource_version < held:
            return True
        if obj.uid:
            self._versions[obj.uid] = obj.resource_version
        return False

    def _stored_pod(self, obj: ApiObject, cause: str | None) -> None:
        pod = self.book.put_pod(obj, self._request(obj))
        owner = self.book.groups.get(pod.group_key)
        if owner is not None:
            owner.cause = cause or owner.cause
        if obj.metadata.get("deletionTimestamp") and pod.node is not None:
            self.book.mark_evicting(pod.uid)
        self._refresh(pod.group_key)

    def _removed(self, event: ObjectRemoved) -> None:
        kind, uid, cause = event.kind, event.uid, event.cause
        self._versions.pop(uid, None)
        self._tombstones[uid] = self._now
        self._tombstones.move_to_end(uid)
        key = f"{event.namespace}/{event.name}"
        if kind == "Pod":
            pod = self.book.pods.get(uid)
            if pod is None:
                return
            holds_room = pod.node is not None and pod.phase not in TERMINAL
            group = self.book.groups.get(pod.group_key)
            if group is not None and group.awaiting_claims is not None and pod.uid in group.placed:
                message = "a pod of the proposed placement was deleted"
                self._outputs.append(self._release_claims_wait(group, message, cause))
            self.book.remove_pod(uid)
            if holds_room:
                self._unbind(uid, cause)
                self._maybe_disrupted(pod.group_key, cause)
            self._release_idle_group_claims(pod.group_key)
            self._refresh(pod.group_key)
        elif kind == "PodGroup":
            group = self.book.groups.get(key)
            if group is None or group.uid != uid:
                return
            self._release(key)
            self._nominations.pop(key, None)
            if group.awaiting_claims is not None:
                self._forget(group, group.awaiting_claims, cause)
            self._release_group_claims(key)
            self.book.remove_group(key)
            self.queue.remove(key)
        elif kind == "Workload":
            self.book.workloads.pop(key, None)
            self.queue.remove_workload(event.namespace, event.name)
        elif kind == "Node":
            self.health.forget(event.name)
            self._unreachable.discard(event.name)
            uids = self.inventory.remove_node(event.name)
            self._lose_node(event.name, uids, since=self._now, deleted=True, cause=cause)
        elif kind == "ResourceSlice":
            if self.inventory.remove_slice(event.name):
                self._wake_everyone(cause)
        elif kind == "DeviceClass":
            if self.inventory.remove_device_class(event.name):
                self._recompute_requests(self.book.pods.values())
                self._wake_everyone(cause)
        elif kind == "ResourceClaimTemplate" and self._claim_templates.pop(key, None) is not None:
            self._recompute_requests(self._pods_with_claims())
        elif kind == "ResourceClaim" and self._resource_claims.pop(key, None) is not None:
            self._named_claim_changed(key, cause)

    def _pods_finished(self, uids: Iterable[str], phase: PodPhase, cause: str | None) -> None:
        broken: set[str] = set()
        touched: set[str] = set()
        for uid in uids:
            pod = self.book.pods.get(uid)
            if pod is None:
                continue
            was_evicting = pod.evicting
            if self.book.finish(uid, phase) is None:
                continue
            self._unbind(uid, cause)
            touched.add(pod.group_key)
            if phase != PodPhase.SUCCEEDED and not was_evicting:
                broken.add(pod.group_key)
        for key in sorted(broken):
            self._maybe_restart(key, cause)
            self._refresh(key)
        for key in sorted(touched):
            self._maybe_disrupted(key, cause)
            self._release_idle_group_claims(key)

    def _nominate(self, event: Nominated) -> None:
        key = self.book.group_uids.get(event.podgroup_uid)
        if key is None:
            return
        self._nominations[key] = _NominatedRoom(tuple(event.nodes), event.expires_at)
        self._wake_everyone(event.cause)

    def _clear_nomination(self, group_uid: str) -> None:
        key = self.book.group_uids.get(group_uid)
        if key is not None and self._nominations.pop(key, None) is not None:
            self._release(key)
            self._wake_everyone(None)

    def _claims_allocated(
        self, group_uid: str, cause: str | None, devices: frozenset[tuple[str, str]] | None
    ) -> None:
        group = self._group_by_uid(group_uid)
        if group is None or group.awaiting_claims is None:
            return
        if devices is not None and not devices >= _proposed_devices(group, group.awaiting_claims):
            return  # the answer to an earlier proposal: this one's is still to come
        decision, group.awaiting_claims = group.awaiting_claims, None
        self._outputs.append(self._bind(group, decision, cause))
        self.queue.done(decision, now=self._now)

    def _claims_held(self, event: ClaimsHeld) -> None:
        """Hold what the allocator committed, per owner (a repeated answer replaces what an owner held); a
        pod that has ended already holds nothing."""
        group = self._group_by_uid(event.podgroup_uid)
        by_owner: dict[str, list[Mapping[str, Any]]] = {}
        for pod_uid, record in event.allocations:
            if pod_uid is None:
                if group is not None:
                    by_owner.setdefault(group.key, []).append(record)
                continue
            pod = self.book.pods.get(pod_uid)
            if pod is not None and pod.phase not in TERMINAL:
                by_owner.setdefault(pod_uid, []).append(record)
        for owner, records in by_owner.items():
            self._hold_recorded(owner, records)

    def _claims_failed(self, group_uid: str, reason: str, cause: str | None) -> None:
        group = self._group_by_uid(group_uid)
        if group is not None and group.awaiting_claims is not None:
            message = f"claims could not be allocated: {reason}"
            self._outputs.append(self._release_claims_wait(group, message, cause))

    def _release_claims_wait(self, group: GroupRecord, message: str, cause: str | None) -> AllocationFailed:
        """Forget a placement waiting for its claims: the gang backs off and retries."""
        decision = group.awaiting_claims
        assert decision is not None
        group.awaiting_claims = None
        self._forget(group, decision, cause)
        return self._refused(group, decision, message, cause)

    def _refused(
        self, group: GroupRecord, decision: CycleDecision, message: str, cause: str | None = None
    ) -> AllocationFailed:
        refused = dataclasses.replace(
            decision,
            placements=(),
            assignments=(),
            domain=None,
            unschedulable=Unschedulable(
                message=message,
                reason_counts={},
                requested=ResourceTotals(),
                required_count=len(decision.placements),
                topology_key=decision.domain.key if decision.domain else None,
            ),
        )
        self.queue.done(refused, now=self._now)
        group.unschedulable_attempts += 1
        return AllocationFailed(
            group=self._ref(group),
            reason=message,
            min_count=group.min_count or 1,
            backoff_s=backoff_seconds(group.unschedulable_attempts),
            cause=cause,
            condition_false=not group.scheduled,
        )

    # -- the pass -----------------------------------------------------------------------------------------

    def run_pass(self, now: float) -> list[Output]:
        """Everything decided since the last pass, then one cycle per ready PodGroup (at most
        `max_cycles_per_pass`), most important first."""
        self._now = now
        # 1. Nodes unheard too long become NotReady, then lost (their pods fail).
        for change in self.health.due(now):
            self._health_changed(change, None)
        outputs, self._outputs = self._outputs, []
        # 2. Removed uids are forgotten once no late event about them can come any more.
        self._forget_tombstones(now)
        # 3. Placements waiting too long for their claims are released.
        outputs += self._expire_claims_waits(now)
        # 4. Gangs pending for longer than they may wait give up.
        for timed_out in self.queue.expire(now):
            gave_up = self._time_out(timed_out)
            if gave_up is not None:
                outputs.append(gave_up)
        # 5. Parked groups that what changed could help are woken (queueing hints). The room held for
        # nominated groups is let go meanwhile, so that a nominated group sees its room come free.
        for key in list(self._reserved):
            self._release(key)
        self._wake_parked(now)
        # 6. Room nominated for a preemptor is held for it alone.
        self._reserve(now)
        # 7. One cycle per ready group on the one snapshot; placements are assumed at once.
        placed = 0
        for _ in range(self.settings.max_cycles_per_pass):
            if placed >= self.settings.max_pods_per_pass:
                break
            popped = self.queue.pop(now)
            if popped is None:
                break
            ran = self._cycle(popped.key, now)
            if ran is not None:
                outputs.append(ran)
                placed += len(ran.decision.placements)
        return outputs

    def next_wakeup(self) -> float | None:
        """When a pass next has something to do on time alone (a back-off, a deadline), if ever."""
        candidates = (self.queue.next_wakeup(), self._next_claims_deadline(), self.health.next_deadline())
        times = [t for t in candidates if t is not None]
        return min(times) if times else None

    def _cycle(self, key: str, now: float) -> CycleRan | None:
        group = self.book.groups.get(key)
        if (
            group is None
            or group.timed_out
            or not group.pending
            or group.obj.metadata.get("deletionTimestamp")
        ):
            self.queue.remove(key)
            return None
        self._release(key)
        core = self.cycle_group(group)
        cause = group.cause if group.attempts == 0 else (self._capacity_cause or group.cause)
        pending = len(group.pending)
        started = self._timer() if self._timer is not None else 0.0
        missing = self._missing_claim(group)
        decision = (
            self._claim_not_found(group, missing, now)
            if missing is not None
            else schedule_podgroup(
                self.snapshot, core, self.book.pending_requests(group), now=now, bound_pods=len(group.placed)
            )
        )
        cycle_ms = (self._timer() - started) * 1000 if self._timer is not None else 0.0
        group.attempts += 1
        ran = CycleRan(
            group=self._ref(group),
            attempt=group.attempts,
            pods=pending,
            min_count=group.min_count or 1,
            decision=decision,
            cycle_ms=cycle_ms,
            cause=cause,
        )
        if decision.placed:
            return self._placed(group, decision, ran, now)
        self.queue.done(decision, now=now)
        group.unschedulable_attempts += 1
        nomination = self._nominations.get(key)
        if nomination is not None:
            self._hold(group, nomination)
        return dataclasses.replace(
            ran,
            backoff_s=backoff_seconds(group.unschedulable_attempts),
            preemption_priority=None if missing else self._preemption_wanted(group, core.priority),
            condition_false=not group.scheduled,
        )

    def cycle_group(self, group: GroupRecord) -> PodGroup:
        """The group as a scheduling cycle sees it: with its own claims, while they are not allocated."""
        core = self.book.core_group(group)
        if group.has_claims and not group.standalone and not self.claims.holds(group.key):
            claims = group_claim_specs(
                group.namespace, group.obj.spec.get("resourceClaims") or [], self._templates()
            )
            if claims:
                core = dataclasses.replace(core, claims=claims)
        return core

    def _placed(self, group: GroupRecord, decision: CycleDecision, ran: CycleRan, now: float) -> CycleRan:
        self.snapshot.apply(decision)
        for placement in decision.placements:
            self.book.place(placement.pod_uid, placement.node_name, placement.devices, assumed=True)
        for owner, allocations in (decision.claims or {}).items():
            self.claims.hold(owner or group.key, allocations)
            self._reserve_named(group.namespace, owner, allocations)
        group.unschedulable_attempts = 0
        group.preemption_asked = -1
        self._nominations.pop(group.key, None)
        if group.has_claims:
            self.queue.await_claims(group.key)
            self._await_claims(group, decision, now)
            return dataclasses.replace(
                ran,
                claims=self._claim_names(group),
                proposal_status=_proposal_status(decision, now, self._claim_records(group, decision)),
                condition_false=not group.scheduled,
            )
        self.queue.done(decision, now=now)
        return dataclasses.replace(ran, bind=self._bind(group, decision, None))

    def _await_claims(self, group: GroupRecord, decision: CycleDecision, since: float) -> None:
        group.awaiting_claims = decision
        group.claims_wait += 1
        deadline = since + self.settings.claims_timeout_s
        heapq.heappush(self._claims_deadlines, (deadline, group.key, group.claims_wait))

    def _expire_claims_waits(self, now: float) -> list[Output]:
        expired: list[Output] = []
        while self._claims_deadlines and self._claims_deadlines[0][0] <= now:
            _, key, wait = heapq.heappop(self._claims_deadlines)
            group = self.book.groups.get(key)
            if group is None or group.awaiting_claims is None or group.claims_wait != wait:
                continue
            message = CLAIMS_NOT_ALLOCATED.format(
                claims=", ".join(self._claim_names(group)), seconds=self.settings.claims_timeout_s
            )
            expired.append(self._release_claims_wait(group, message, None))
        return expired

    def _next_claims_deadline(self) -> float | None:
        while self._claims_deadlines:
            _, key, wait = self._claims_deadlines[0]
            group = self.book.groups.get(key)
            if group is not None and group.awaiting_claims is not None and group.claims_wait == wait:
                return self._claims_deadlines[0][0]
            heapq.heappop(self._claims_deadlines)
        return None

    def _bind(self, group: GroupRecord, decision: CycleDecision, cause: str | None) -> Binding:
        records = self._claim_records(group, decision)
        for placement in decision.placements:
            self.book.confirm(placement.pod_uid)
            group.placement[placement.pod_name] = {
                "uid": placement.pod_uid,
                "node": placement.node_name,
                "devices": {cls: list(names) for cls, names in placement.devices.items()},
            }
            if placement.pod_uid in records:
                group.placement[placement.pod_name]["claims"] = records[placement.pod_uid]
        if "" in records:
            group.claims = records[""]
        self.snapshot.confirm(decision)
        domain = decision.domain if decision.domain is not None and decision.domain.key else None
        if group.domain is None:
            group.domain = domain
        first = not group.scheduled
        group.scheduled = True
        self._preemptable(self.book.pods[p.pod_uid] for p in decision.placements)
        return Binding(
            group=self._ref(group),
            placements=decision.placements,
            domain=group.domain,
            placement_status=_placement_status(group.domain, group.placement, group.claims),
            first=first,
            cause=cause,
        )

    def _forget(self, group: GroupRecord, decision: CycleDecision, cause: str | None) -> None:
        for placement in decision.placements:
            if self.snapshot.is_assumed(placement.pod_uid):
                self._unbind(placement.pod_uid, cause)
            self.book.unplace(placement.pod_uid)
        if "" in (decision.claims or {}):
            self._release_group_claims(group.key)

    def _preemption_wanted(self, group: GroupRecord, priority: int) -> int | None:
        """Ask the preemptor after a failed cycle when lower-priority pods hold capacity, and again after
        each later failed cycle once the answer could differ (pods were bound or ended, a nomination or a
        node changed): kube-scheduler runs PostFilter on every failed cycle; the queue's back-off bounds
        how often. Not while a nomination holds room for the group."""
        if group.preemption_asked == self._preemption_generation or group.key in self._nominations:
            return None
        lowest = self.book.lowest_running_priority()
        if lowest is None or lowest >= priority:
            return None
        group.preemption_asked = self._preemption_generation
        return priority

    def _time_out(self, timed_out: PodGroupTimedOut) -> TimedOut | None:
        group = self.book.groups.get(timed_out.podgroup)
        if group is None or group.uid != timed_out.podgroup_uid:
            return None
        group.timed_out = True
        self._release(group.key)
        self._nominations.pop(group.key, None)
        if group.awaiting_claims is not None:
            self._forget(group, group.awaiting_claims, None)
            group.awaiting_claims = None
        failed = [self.book.pods[uid] for uid in sorted(group.pending)]
        for pod in failed:
            self.book.finish(pod.uid, PodPhase.FAILED)
        return TimedOut(
            group=self._ref(group),
            pending_s=timed_out.pending_seconds,
            message=timed_out.message,
            pods=tuple(_pod_key(pod) for pod in failed),
            cause=group.cause,
            condition_false=not group.scheduled,
        )

    def _maybe_restart(self, key: str, cause: str | None) -> None:
        group = self.book.groups.get(key)
        if group is None or group.standalone or not group.scheduled:
            return
        members = [pod for pod in self.book.members(key) if not pod.evicting]
        restart = decide_gang_restart(self.book.core_group(group), {pod.uid: pod.phase for pod in members})
        if restart is None:
            return
        evicted: list[PodKey] = []
        for uid in restart.evict:
            pod = self.book.pods[uid]
            if pod.node is not None:
                self.book.mark_evicting(uid)
                evicted.append(_pod_key(pod))
        group.domain = None
        group.placement = {}
        self._outputs.append(Restart(self._ref(group), restart.message, tuple(evicted), cause))

    # -- nodes ----------------------------------------------------------------------------------------------

    def _health_changed(self, change: HealthChange, cause: str | None) -> None:
        """A watched node became NotReady (tainted), lost (its pods fail) or Ready again (untainted)."""
        if change.condition == NodeCondition.LOST:
            state = self.snapshot.nodes_by_name.get(change.node)
            uids = tuple(sorted(state.pod_uids)) if state is not None else ()
            self._lose_node(change.node, uids, since=change.since, deleted=False, cause=cause)
            return
        self._taint(change.node, change.condition == NodeCondition.NOT_READY, cause)
        self._outputs.append(NodeHealthChange(change.node, change.condition, change.since))

    def _taint(self, node: str, unreachable: bool, cause: str | None) -> None:
        if (node in self._unreachable) == unreachable:
            return
        if unreachable:
            self._unreachable.add(node)
        else:
            self._unreachable.discard(node)
        stored = self.inventory.node(node)
        if stored is not None:
            self.inventory.put_node(self._tainted(stored))
        if not unreachable:
            self._wake_everyone(cause)

    def _tainted(self, node: ApiObject) -> ApiObject:
        """A Node as placement sees it: an unreachable one carries `node.kubernetes.io/unreachable`
        (NoSchedule), as the node lifecycle controller taints it."""
        taints = [t for t in node.spec.get("taints") or [] if t.get("key") != UNREACHABLE_TAINT]
        if node.name in self._unreachable:
            taints.append({"key": UNREACHABLE_TAINT, "effect": "NoSchedule"})
        if taints == list(node.spec.get("taints") or []):
            return node
        return dataclasses.replace(node, spec={**node.spec, "taints": taints})

    def _lose_node(
        self, node: str, uids: Iterable[str], *, since: float, deleted: bool, cause: str | None
    ) -> None:
        """The pods that held room on a node that is gone fail (as the pod garbage collector and the taint
        manager fail them), their room and claims let go, and their gangs restart per their policy."""
        lost: list[tuple[GroupRef, PodKey]] = []
        broken: set[str] = set()
        for uid in uids:
            pod = self.book.pods.get(uid)
            if pod is None or pod.phase in TERMINAL:
                continue
            group = self.book.groups.get(pod.group_key)
            if group is not None and group.awaiting_claims is not None and uid in group.placed:
                message = f"node {node} of the proposed placement was lost"
                self._outputs.append(self._release_claims_wait(group, message, cause))
            if pod.node is None:
                self._unbind(uid, cause)  # only proposed there: it lets go of its claims and waits again
                continue
            if group is not None:
                lost.append((self._ref(group), _pod_key(pod)))
            was_evicting = pod.evicting
            self.book.finish(uid, PodPhase.FAILED)
            self._unbind(uid, cause)
            if not was_evicting:
                broken.add(pod.group_key)
        self._outputs.append(NodeLost(node, tuple(lost), since, deleted, cause))
        self._wake_everyone(cause)
        for key in sorted(broken):
            self._maybe_restart(key, cause)
            self._maybe_disrupted(key, cause)
            self._refresh(key)
            self._release_idle_group_claims(key)

    def _maybe_disrupted(self, key: str, cause: str | None) -> None:
        """A scheduled gang none of whose pods holds room any more (they ended, or were deleted from their
        nodes), not all of them done, is placed anew wherever it fits: it is not held to the domain it was
        given."""
        group = self.book.groups.get(key)
        if group is None or group.standalone or not group.scheduled or group.awaiting_claims is not None:
            return
        if group.obj.metadata.get("deletionTimestamp"):
            return  # going: it is placed nowhere again
        members = list(self.book.members(key))
        if any(pod.node is not None and pod.phase not in TERMINAL for pod in members):
            return
        if members and all(pod.phase == PodPhase.SUCCEEDED for pod in members):
            return
        group.scheduled = False
        group.domain = None
        group.placement = {}
        self._outputs.append(Disrupted(self._ref(group), DISRUPTED_REASON, DISRUPTED_MESSAGE, cause))

    # -- capacity and wake-ups ----------------------------------------------------------------------------

    def _unbind(self, uid: str, cause: str | None) -> None:
        placement = self.snapshot.unbind(uid)
        self._preemption_generation += 1
        if self.claims.release(uid):
            self._wake_all = True  # shares and reached devices are no capacity the hints know of
        self._unreserve(uid, cause)
        if placement is None:
            return
        self._freed.add(placement)
        if cause is not None:
            self._capacity_cause = cause

    def _wake_everyone(self, cause: str | None) -> None:
        """A change that hints do not cover (nodes, devices, nominations): every parked group retries."""
        if cause is not None:
            self._capacity_cause = cause
        self._wake_all = True
        self._preemption_generation += 1

    def _preemptable(self, pods: Iterable[PodRecord]) -> None:
        """Pods were bound: a parked group of a higher priority may now preempt them, so it tries again
        (and asks the preemptor again if it still does not fit)."""
        priorities = [self.book.priority_of(pod) for pod in pods]
        if not priorities:
            return
        self._preemption_generation += 1
        lowest = min(priorities)
        if self._preemptable_from is None or lowest < self._preemptable_from:
            self._preemptable_from = lowest

    def _wake_parked(self, now: float) -> None:
        if self._loading:
            return
        if self._preemptable_from is not None and not self._wake_all:
            self.stats.wakeups += self.queue.wake_above(now, self._preemptable_from)
        self._preemptable_from = None
        if self._wake_all:
            self.stats.wakeups += self.queue.wake(now)
        elif self._freed:
            self.stats.capacity_releases += len(self._freed.by_node)
            hint = capacity_hint(self.snapshot, self._freed.by_node) if self.settings.queueing_hints else None
            self.stats.wakeups += self.queue.wake(now, hint)
        self._wake_all = False
        self._freed.clear()

    def _forget_tombstones(self, now: float) -> None:
        horizon = now - self.settings.tombstone_ttl_s
        while self._tombstones:
            uid, removed_at = next(iter(self._tombstones.items()))
            if removed_at > horizon:
                break
            del self._tombstones[uid]

    # -- nominations --------------------------------------------------------------------------------------

    def _reserve(self, now: float) -> None:
        for key in list(self._nominations):
            self._release(key)
            nomination = self._nominations[key]
            group = self.book.groups.get(key)
            if nomination.expires_at <= now or group is None or not group.pending:
                del self._nominations[key]
                self.stats.wakeups += self.queue.wake(now)
                continue
            if len(self._hold(group, nomination)) == len(group.pending):
                # Its room is free (the victims have ended): retry it now, whatever its back-off.
                self.queue.activate(key, now)

    def _hold(self, group: GroupRecord, nomination: _NominatedRoom) -> list[str]:
        """Stand-ins of the group's waiting pods take the nominated room, so no other group takes it."""
        held: list[str] = []
        for uid in sorted(group.pending):
            stand_in = dataclasses.replace(self.book.pods[uid].request, uid=NOMINATED_PREFIX + uid)
            for node in nomination.nodes:
                try:
                    self.snapshot.bind(stand_in, node)
                except (PlacementConflict, KeyError):
                    continue
                held.append(stand_in.uid)
                break
        self._reserved[group.key] = held
        return held

    def _release(self, key: str) -> None:
        for uid in self._reserved.pop(key, ()):
            self.snapshot.unbind(uid)

    # -- helpers ------------------------------------------------------------------------------------------

    def _refresh(self, key: str) -> None:
        """Put a group in the queue while it has pods waiting (the queue gates it until it may be tried)."""
        if self._loading:
            return
        group = self.book.groups.get(key)
        if group is None or group.timed_out or group.awaiting_claims is not None:
            return
        # A group being deleted places nothing more (its deletion waits only for pods already placed).
        if not group.pending or group.obj.metadata.get("deletionTimestamp"):
            if self.queue.state(key) not in (None, QueueState.IN_FLIGHT):
                self.queue.remove(key)
            return
        count = len(group.pending) + len(group.placed)
        self.queue.add(self.book.core_group(group), pod_count=count, now=self._now)

    def _request(self, pod: ApiObject) -> PodRequest:
        devices: dict[str, int] = {}
        claims: tuple[ClaimSpec, ...] = ()
        if pod.spec.get("resourceClaims"):
            name = pod_group_name(pod)
            group = self.book.groups.get(f"{pod.namespace}/{name}") if name else None
            group_claims = (group.obj.spec.get("resourceClaims") or []) if group else []
            templates = self._templates()
            devices = claim_devices(
                pod.namespace,
                pod.spec.get("resourceClaims") or [],
                group_claims,
                templates,
                self.inventory.node_classes,
            )
            claims = pod_claim_specs(
                pod.namespace,
                pod.spec.get("resourceClaims") or [],
                group_claims,
                templates,
                lambda name, claim_name: self._named_claim_spec(pod.namespace, name, claim_name),
            )
        return pod_request(pod, self.inventory.catalog.extended_resources, devices, claims)

    def _templates(self) -> dict[str, Mapping[str, Any]]:
        return {key: template.spec for key, template in self._claim_templates.items()}

    # -- existing ResourceClaims pods name ------------------------------------------------------------------

    def _named_claim_spec(self, namespace: str, name: str, claim_name: str) -> ClaimSpec:
        """A claim a pod names: pinned to its devices while some pod reserves it, else its spec."""
        key = f"{namespace}/{claim_name}"
        held = self.claims.named_allocation(key)
        allocated = tuple(result.device.id for result in held.results) if held is not None else ()
        stored = self._resource_claims.get(key)
        return named_claim_spec(name, claim_name, stored.spec if stored is not None else None, allocated)

    def _pods_naming(self, key: str) -> list[PodRecord]:
        namespace, _, name = key.partition("/")
        return [
            pod
            for pod in self._pods_with_claims()
            if pod.obj.namespace == namespace
            and any(
                claim.get("resourceClaimName") == name for claim in pod.obj.spec.get("resourceClaims") or []
            )
        ]

    def _named_claim_changed(self, key: str, cause: str | None) -> None:
        """A claim pods name was applied, deleted, allocated or released: the pods waiting for it see it
        anew, and are woken."""
        waiting = [pod for pod in self._pods_naming(key) if pod.pending]
        if waiting:
            self._recompute_requests(waiting)
            self._wake_everyone(cause)

    def _missing_claim(self, group: GroupRecord) -> str | None:
        """Why a ResourceClaim a waiting pod of the group names cannot be used (it does not exist, or it is
        being deleted), in kube-scheduler's words, if one cannot."""
        if not group.has_claims:
            return None
        group_claims = [] if group.standalone else group.obj.spec.get("resourceClaims") or []
        for uid in sorted(group.pending):
            pod = self.book.pods[uid]
            for name in named_claims(pod.obj.spec.get("resourceClaims") or [], group_claims):
                claim = self._resource_claims.get(f"{pod.obj.namespace}/{name}")
                if claim is None:
                    return CLAIM_NOT_FOUND.format(name=name)
                if claim.metadata.get("deletionTimestamp"):
                    return CLAIM_BEING_DELETED.format(name=name)
        return None

    def _claim_not_found(self, group: GroupRecord, reason: str, now: float) -> CycleDecision:
        """The cycle of a group a pod of which names a ResourceClaim it cannot use: it waits, and no node is
        tried."""
        message = f"{GangReason.NODES_UNAVAILABLE.format(total=len(self.snapshot))}: {reason}."
        pending = tuple(sorted(group.pending))
        why = Unschedulable(message, {}, ResourceTotals(), group.min_count or 1, None)
        return CycleDecision(group.key, (), (), None, pending, why, now)

    def _reserve_named(self, namespace: str, owner: str, allocations: Iterable[ClaimAllocation]) -> None:
        """A pod placed with claims it names reserves them; one it allocated holds the node's own exclusive
        devices of it in the snapshot (a stand-in) until no pod reserves it."""
        for allocation in allocations:
            if not allocation.resource_claim or not owner:
                continue
            key = f"{namespace}/{allocation.resource_claim}"
            if not self.claims.reserve(key, owner, allocation):
                continue
            self._hold_claim_devices(key, allocation)
            self._named_claim_changed(key, None)

    def _unreserve(self, uid: str, cause: str | None) -> None:
        """A pod left its node: the claims it named that no pod reserves any more give their devices back."""
        for key in self.claims.unreserve(uid):
            self.snapshot.unbind(CLAIM_PREFIX + key)
            self._named_claim_changed(key, cause)

    def _hold_claim_devices(self, key: str, allocation: ClaimAllocation) -> None:
        nodes = {result.device.node for result in allocation.results if result.consumed is None}
        for node in sorted(name for name in nodes if name is not None):
            state = self.snapshot.nodes_by_name.get(node)
            devices = exclusive_devices((allocation,), state, named=True) if state is not None else {}
            if devices:
                stand_in = PodRequest(uid=CLAIM_PREFIX + key, name=key)
                self.snapshot.bind(stand_in, node, devices)

    def _claim_records(self, group: GroupRecord, decision: CycleDecision) -> dict[str, list[dict[str, Any]]]:
        """The decision's allocations as recorded in statuses and events, by pod uid (`""`: the group's)."""
        records: dict[str, list[dict[str, Any]]] = {}
        names = {placement.pod_uid: placement.pod_name for placement in decision.placements}
        for owner, allocations in (decision.claims or {}).items():
            owner_name = names.get(owner, "") if owner else group.obj.name
            records[owner] = [
                allocation_record(allocation, _claim_name(owner_name, allocation))
                for allocation in allocations
                if allocation.claim != EXTENDED_RESOURCES_CLAIM
            ]
        return records

    def _release_group_claims(self, key: str) -> None:
        if self.claims.release(key):
            self._wake_all = True

    def _release_idle_group_claims(self, key: str) -> None:
        """A PodGroup's claims are released once none of its pods holds room any more."""
        if not self.claims.holds(key):
            return
        group = self.book.groups.get(key)
        if group is not None and group.awaiting_claims is not None:
            return
        if all(pod.node is None or pod.phase in TERMINAL for pod in self.book.members(key)):
            self._release_group_claims(key)
            if group is not None:
                group.claims = []

    def _pods_with_claims(self) -> list[PodRecord]:
        return [pod for pod in self.book.pods.values() if pod.obj.spec.get("resourceClaims")]

    def _recompute_requests(self, pods: Iterable[PodRecord]) -> None:
        """Requests of waiting pods again, after what they are computed from changed."""
        for pod in pods:
            if pod.pending:
                pod.request = self._request(pod.obj)

    def _group_by_uid(self, uid: str) -> GroupRecord | None:
        key = self.book.group_uids.get(uid)
        return self.book.groups.get(key) if key is not None else None

    def _claim_names(self, group: GroupRecord) -> tuple[str, ...]:
        names = {str(claim.get("name")) for claim in group.obj.spec.get("resourceClaims") or []}
        for pod in self.book.members(group.key):
            names.update(str(claim.get("name")) for claim in pod.obj.spec.get("resourceClaims") or [])
        return tuple(sorted(names))

    @staticmethod
    def _ref(group: GroupRecord) -> GroupRef:
        return GroupRef(group.namespace, group.name, group.uid, group.standalone)


def _proposed_devices(group: GroupRecord, decision: CycleDecision) -> frozenset[tuple[str, str]]:
    """`(claim name, device id)` of every device the decision proposed for claims made from templates."""
    names = {placement.pod_uid: placement.pod_name for placement in decision.placements}
    return frozenset(
        (_claim_name(names.get(owner, "") if owner else group.obj.name, allocation), result.device.id)
        for owner, allocations in (decision.claims or {}).items()
        for allocation in allocations
        if allocation.claim != EXTENDED_RESOURCES_CLAIM
        for result in allocation.results
    )


def _claim_name(owner_name: str, allocation: ClaimAllocation) -> str:
    """The ResourceClaim of an allocation: the one the pod names, or the one made from a template."""
    return allocation.resource_claim or resource_claim_name(owner_name, allocation.claim)


def _pod_key(pod: PodRecord) -> PodKey:
    return PodKey(pod.obj.namespace, pod.obj.name, pod.uid, pod.node)


def _placement_status(
    domain: TopologyDomainRef | None,
    pods: Mapping[str, Mapping[str, object]],
    claims: list[dict[str, Any]] | None = None,
) -> dict[str, object]:
    """`status.placement` of a PodGroup: its domain, its nodes, each pod's node, devices and claims, and
    the devices of the PodGroup's own claims."""
    status: dict[str, object] = {
        "domain": {"key": domain.key, "value": domain.value} if domain is not None else None,
        "nodes": sorted({str(pod["node"]) for pod in pods.values()}),
        "pods": {name: dict(pod) for name, pod in sorted(pods.items())},
    }
    if claims:
        status["claims"] = claims
    return status


def _proposal_status(
    decision: CycleDecision, now: float, claims: Mapping[str, list[dict[str, Any]]]
) -> dict[str, object]:
    """`status.proposal` of a PodGroup: a placement waiting for its claims, and since when, with the exact
    devices proposed for each pod's claims and for the PodGroup's."""
    domain = decision.domain if decision.domain is not None and decision.domain.key else None
    pods: dict[str, dict[str, object]] = {}
    for placement in decision.placements:
        pods[placement.pod_name] = {
            "uid": placement.pod_uid,
            "node": placement.node_name,
            "devices": {cls: list(names) for cls, names in placement.devices.items()},
        }
        if claims.get(placement.pod_uid):
            pods[placement.pod_name]["claims"] = claims[placement.pod_uid]
    status: dict[str, object] = {
        "proposedAt": _rfc3339(now),
        "domain": {"key": domain.key, "value": domain.value} if domain is not None else None,
        "pods": dict(sorted(pods.items())),
    }
    if claims.get(""):
        status["claims"] = claims[""]
    return status


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
