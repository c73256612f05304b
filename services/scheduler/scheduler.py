"""The scheduler's world in memory and its decision flow, without I/O: cluster events in, outcomes out.

Decisions are the core's (`schedule_podgroup`, `SchedulingQueue`, `decide_gang_restart`); this module keeps
the snapshot and the queue in step with what happened and turns core decisions into outcomes to write.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from time import perf_counter

from libs.core.scheduling import (
    ClusterEvent,
    ClusterSnapshot,
    CycleDecision,
    PlacementConflict,
    PodGroupTimedOut,
    PodPhase,
    PodRequest,
    QueueState,
    ResourceTotals,
    SchedulingQueue,
    TopologyDomainRef,
    backoff_seconds,
    decide_gang_restart,
    schedule_podgroup,
)
from libs.core.scheduling.model import Unschedulable
from services.scheduler.adapter import ApiObject, claim_devices, pod_group_name, pod_request
from services.scheduler.book import TERMINAL, GroupRecord, PodBook, PodRecord
from services.scheduler.inventory import NodeInventory
from services.scheduler.outcomes import (
    AllocationFailed,
    Binding,
    CycleRan,
    GroupRef,
    Outcome,
    PodKey,
    Restart,
    TimedOut,
)

log = logging.getLogger(__name__)

NOMINATED_PREFIX = "nominated/"
"""Uid prefix of the stand-in pods that hold a nominated PodGroup's room in the snapshot."""
MAX_CYCLES_PER_PASS = 512
MAX_PODS_PER_PASS = 128
"""A pass stops placing once this many pods are placed: its transaction stays short, because lease
renewals wait for it."""


@dataclass(frozen=True, slots=True)
class Nomination:
    nodes: tuple[str, ...]
    expires_at: float


class GangScheduler:
    """Nodes, pods and PodGroups as the scheduler last heard of them, one snapshot and one queue.

    Event methods (`apply_object`, `delete_object`, `pods_finished`, ...) keep them current and are
    idempotent, so replayed events do no harm. `run_pass(now)` runs one cycle per ready PodGroup and
    returns everything to write; outcomes decided between passes (claim results, gang restarts) come out
    with the next pass. A pass runs at most `max_cycles_per_pass` cycles and stops once
    `max_pods_per_pass` pods are placed. `clock` gives seconds for the queue when an event arrives.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        max_cycles_per_pass: int = MAX_CYCLES_PER_PASS,
        max_pods_per_pass: int = MAX_PODS_PER_PASS,
    ) -> None:
        self.clock = clock
        self.max_cycles_per_pass = max_cycles_per_pass
        self.max_pods_per_pass = max_pods_per_pass
        self.snapshot = ClusterSnapshot()
        self.inventory = NodeInventory(self.snapshot)
        self.book = PodBook()
        self.queue = SchedulingQueue()
        self._outcomes: list[Outcome] = []
        self._nominations: dict[str, Nomination] = {}
        self._reserved: dict[str, list[str]] = {}
        self._capacity_cause: str | None = None
        self._claim_templates: dict[str, ApiObject] = {}
        self._loading = False

    # -- loading from the database --------------------------------------------------------------------

    def load(self, objects: Iterable[ApiObject], bindings: Mapping[str, str]) -> None:
        """Build the world from stored objects (in dependency order) and pod uid -> node bindings. A PodGroup
        was scheduled when its status has a placement (written with its PodGroupScheduled=True)."""
        self._loading = True
        self.inventory.defer()
        try:
            for obj in objects:
                self.apply_object(obj)
            self.inventory.flush()
            if self._claim_templates:
                self._recompute_requests(self._pods_with_claims())
            for uid, node in bindings.items():
                self._restore_binding(uid, node)
        finally:
            self._loading = False
        for key in list(self.book.groups):
            self._refresh(key)

    def _restore_binding(self, uid: str, node: str) -> None:
        pod = self.book.pods.get(uid)
        if pod is None or pod.phase in TERMINAL or pod.node is not None:
            return
        group = self.book.groups.get(pod.group_key)
        recorded = (group.placement.get(pod.obj.name) if group else None) or {}
        same = recorded.get("node") == node and recorded.get("uid") == uid
        devices = recorded.get("devices") if same else None
        try:
            placement = self.snapshot.bind(pod.request, node, devices)  # type: ignore[arg-type]
        except (PlacementConflict, KeyError) as exc:
            log.warning("bound pod %s does not fit its node %s in the snapshot: %s", pod.obj.key, node, exc)
            self.book.place(uid, node, {}, assumed=False)
            return
        self.book.place(uid, node, placement.devices, assumed=False)

    # -- events -----------------------------------------------------------------------------------------

    def apply_object(self, obj: ApiObject, *, cause: str | None = None) -> None:
        """An object was stored (created or updated)."""
        now = self.clock()
        if obj.kind == "Node":
            known = obj.name in self.snapshot
            if self.inventory.put_node(obj):
                self._cluster_changed(ClusterEvent.NODE_UPDATED if known else ClusterEvent.NODE_ADDED, cause)
        elif obj.kind == "ResourceSlice":
            if self.inventory.put_slice(obj):
                self._cluster_changed(ClusterEvent.NODE_UPDATED, cause)
        elif obj.kind == "DeviceClass":
            if self.inventory.put_device_class(obj):
                self._device_classes_changed(cause)
        elif obj.kind == "ResourceClaimTemplate":
            self._claim_templates[obj.key] = obj
            self._recompute_requests(self._pods_with_claims())
        elif obj.kind == "Workload":
            keys = self.book.put_workload(obj)
            self.queue.add_workload(obj.namespace, obj.name, now=now)
            for key in keys:
                self._refresh(key)
        elif obj.kind == "PodGroup":
            group = self.book.put_group(obj)
            group.cause = cause or group.cause
            self._recompute_requests(self.book.members(group.key))
            self._refresh(group.key)
        elif obj.kind == "Pod":
            pod = self.book.put_pod(obj, self._request(obj))
            owner = self.book.groups.get(pod.group_key)
            if owner is not None:
                owner.cause = cause or owner.cause
            self._refresh(pod.group_key)

    def delete_object(
        self, kind: str, namespace: str, name: str, uid: str, *, cause: str | None = None
    ) -> None:
        """An object was removed."""
        key = f"{namespace}/{name}"
        if kind == "Pod":
            pod = self.book.pods.get(uid)
            if pod is None:
                return
            holds_capacity = pod.node is not None and pod.phase not in TERMINAL
            self.book.remove_pod(uid)
            if holds_capacity:
                self.snapshot.unbind(uid)
                self._cluster_changed(ClusterEvent.CAPACITY_FREED, cause)
            self._refresh(pod.group_key)
        elif kind == "PodGroup":
            group = self.book.groups.get(key)
            if group is None or group.uid != uid:
                return
            self._release(key)
            self._nominations.pop(key, None)
            if group.awaiting_claims is not None:
                self._forget(group, group.awaiting_claims)
            self.book.remove_group(key)
            self.queue.remove(key)
        elif kind == "Workload":
            self.book.workloads.pop(key, None)
            self.queue.remove_workload(namespace, name)
        elif kind == "Node":
            lost = self.inventory.remove_node(name)
            self._lose_pods(lost, cause)
        elif kind == "ResourceSlice":
            self.inventory.remove_slice(name)
            self._cluster_changed(ClusterEvent.NODE_UPDATED, cause)
        elif kind == "DeviceClass" and self.inventory.remove_device_class(name):
            self._device_classes_changed(cause)
        elif kind == "ResourceClaimTemplate" and self._claim_templates.pop(key, None) is not None:
            self._recompute_requests(self._pods_with_claims())

    def pods_finished(self, uids: Iterable[str], phase: PodPhase, *, cause: str | None = None) -> None:
        """Pods succeeded or failed: their capacity is free; a gang that broke may restart."""
        broken: set[str] = set()
        freed = False
        for uid in uids:
            pod = self.book.pods.get(uid)
            if pod is None:
                continue
            was_evicting = pod.evicting
            if self.book.finish(uid, phase) is None:
                continue
            freed = self.snapshot.unbind(uid) is not None or freed
            if phase != PodPhase.SUCCEEDED and not was_evicting:
                broken.add(pod.group_key)
        if freed:
            event = ClusterEvent.POD_FINISHED if phase == PodPhase.SUCCEEDED else ClusterEvent.POD_EVICTED
            self._cluster_changed(event, cause)
        for key in sorted(broken):
            self._maybe_restart(key, cause)
            self._refresh(key)

    def pods_evicted(self, uids: Iterable[str]) -> None:
        """Pods are being evicted (by the preemptor, or a gang restart): they hold their room until they
        fail, and their failure does not count as the gang breaking."""
        for uid in uids:
            self.book.mark_evicting(uid)

    def nominate(
        self, group_uid: str, nodes: Iterable[str], expires_at: float, *, cause: str | None = None
    ) -> None:
        """The preemptor made room for a PodGroup on these nodes: hold it for that group until it expires."""
        key = self.book.group_uids.get(group_uid)
        if key is None:
            return
        self._nominations[key] = Nomination(tuple(nodes), expires_at)
        self._cluster_changed(ClusterEvent.CAPACITY_FREED, cause)

    def clear_nomination(self, group_uid: str) -> None:
        key = self.book.group_uids.get(group_uid)
        if key is not None and self._nominations.pop(key, None) is not None:
            self._release(key)
            self._cluster_changed(ClusterEvent.CAPACITY_FREED, None)

    def claims_allocated(self, group_uid: str, *, cause: str | None = None) -> None:
        """The DRA allocator committed the devices of a proposed placement: bind it."""
        group = self._group_by_uid(group_uid)
        if group is None or group.awaiting_claims is None:
            return
        decision, group.awaiting_claims = group.awaiting_claims, None
        self._outcomes.append(self._bind(group, decision, cause))
        self.queue.done(decision, now=self.clock())

    def claims_failed(self, group_uid: str, reason: str, *, cause: str | None = None) -> None:
        """The DRA allocator refused a proposed placement: forget it; the gang backs off and retries."""
        group = self._group_by_uid(group_uid)
        if group is None or group.awaiting_claims is None:
            return
        decision, group.awaiting_claims = group.awaiting_claims, None
        self._forget(group, decision)
        message = f"claims could not be allocated: {reason}"
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
        self.queue.done(refused, now=self.clock())
        self._cluster_changed(ClusterEvent.CAPACITY_FREED, cause)
        group.unschedulable_attempts += 1
        self._outcomes.append(
            AllocationFailed(
                group=self._ref(group),
                reason=message,
                min_count=group.min_count or 1,
                backoff_s=backoff_seconds(group.unschedulable_attempts),
                cause=cause,
                condition_false=not group.scheduled,
            )
        )

    # -- the pass ---------------------------------------------------------------------------------------

    def run_pass(self, now: float) -> list[Outcome]:
        """Everything decided since the last pass, then one cycle per ready PodGroup (at most
        `max_cycles_per_pass`), most important first."""
        outcomes, self._outcomes = self._outcomes, []
        # 1. Gangs unschedulable for longer than they may wait give up.
        for timed_out in self.queue.expire(now):
            gave_up = self._time_out(timed_out)
            if gave_up is not None:
                outcomes.append(gave_up)
        # 2. Room nominated for a preemptor is held for it alone.
        self._reserve(now)
        # 3. One cycle per ready group on the one snapshot; placements are assumed at once.
        placed = 0
        for _ in range(self.max_cycles_per_pass):
            if placed >= self.max_pods_per_pass:
                break
            popped = self.queue.pop(now)
            if popped is None:
                break
            ran = self._cycle(popped.key, now)
            if ran is not None:
                outcomes.append(ran)
                placed += len(ran.decision.placements)
        return outcomes

    def _cycle(self, key: str, now: float) -> CycleRan | None:
        group = self.book.groups.get(key)
        if group is None or group.timed_out or not group.pending:
            self.queue.remove(key)
            return None
        self._release(key)
        core = self.book.core_group(group)
        cause = group.cause if group.attempts == 0 else (self._capacity_cause or group.cause)
        pending = len(group.pending)
        started = perf_counter()
        decision = schedule_podgroup(
            self.snapshot, core, self.book.pending_requests(group), now=now, bound_pods=len(group.placed)
        )
        cycle_ms = (perf_counter() - started) * 1000
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
            self.snapshot.apply(decision)
            for placement in decision.placements:
                self.book.place(placement.pod_uid, placement.node_name, placement.devices, assumed=True)
            group.unschedulable_attempts = 0
            group.preemption_requested = False
            self._nominations.pop(key, None)
            if group.has_claims:
                group.awaiting_claims = decision
                return dataclasses.replace(ran, claims=self._claim_names(group))
            self.queue.done(decision, now=now)
            return dataclasses.replace(ran, bind=self._bind(group, decision, None))
        self.queue.done(decision, now=now)
        group.unschedulable_attempts += 1
        return dataclasses.replace(
            ran,
            backoff_s=backoff_seconds(group.unschedulable_attempts),
            preemption_priority=self._preemption_wanted(group, core.priority),
            condition_false=not group.scheduled,
        )

    def _bind(self, group: GroupRecord, decision: CycleDecision, cause: str | None) -> Binding:
        for placement in decision.placements:
            self.book.confirm(placement.pod_uid)
            group.placement[placement.pod_name] = {
                "uid": placement.pod_uid,
                "node": placement.node_name,
                "devices": {cls: list(names) for cls, names in placement.devices.items()},
            }
        self.snapshot.confirm(decision)
        domain = decision.domain if decision.domain is not None and decision.domain.key else None
        if group.domain is None:
            group.domain = domain
        first = not group.scheduled
        group.scheduled = True
        return Binding(
            group=self._ref(group),
            placements=decision.placements,
            domain=group.domain,
            placement_status=_placement_status(group.domain, group.placement),
            first=first,
            cause=cause,
        )

    def _forget(self, group: GroupRecord, decision: CycleDecision) -> None:
        self.snapshot.forget(decision)
        for placement in decision.placements:
            self.book.unplace(placement.pod_uid)

    def _preemption_wanted(self, group: GroupRecord, priority: int) -> int | None:
        """Ask the preemptor once per unschedulable spell, when lower-priority pods hold capacity."""
        if group.preemption_requested or group.key in self._nominations:
            return None
        lowest = self.book.lowest_running_priority()
        if lowest is None or lowest >= priority:
            return None
        group.preemption_requested = True
        return priority

    def _time_out(self, timed_out: PodGroupTimedOut) -> TimedOut | None:
        group = self.book.groups.get(timed_out.podgroup)
        if group is None or group.uid != timed_out.podgroup_uid:
            return None
        group.timed_out = True
        self._release(group.key)
        self._nominations.pop(group.key, None)
        failed = [self.book.pods[uid] for uid in sorted(group.pending)]
        for pod in failed:
            self.book.finish(pod.uid, PodPhase.FAILED)
        return TimedOut(
            group=self._ref(group),
            pending_s=timed_out.unschedulable_seconds,
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
        self._outcomes.append(Restart(self._ref(group), restart.message, tuple(evicted), cause))

    def _lose_pods(self, uids: Iterable[str], cause: str | None) -> None:
        broken = set()
        for uid in uids:
            pod = self.book.finish(uid, PodPhase.UNKNOWN)
            if pod is not None:
                broken.add(pod.group_key)
        for key in sorted(broken):
            self._maybe_restart(key, cause)
            self._refresh(key)

    # -- nominations ------------------------------------------------------------------------------------

    def _reserve(self, now: float) -> None:
        for key in list(self._nominations):
            self._release(key)
            nomination = self._nominations[key]
            group = self.book.groups.get(key)
            if nomination.expires_at <= now or group is None or not group.pending:
                del self._nominations[key]
                self._cluster_changed(ClusterEvent.CAPACITY_FREED, None)
                continue
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
            self._reserved[key] = held

    def _release(self, key: str) -> None:
        for uid in self._reserved.pop(key, ()):
            self.snapshot.unbind(uid)

    # -- helpers ----------------------------------------------------------------------------------------

    def _refresh(self, key: str) -> None:
        """Put a group in the queue while it has pods waiting (the queue gates it until it may be tried)."""
        if self._loading:
            return
        group = self.book.groups.get(key)
        if group is None or group.timed_out or group.awaiting_claims is not None:
            return
        if not group.pending:
            if self.queue.state(key) not in (None, QueueState.IN_FLIGHT):
                self.queue.remove(key)
            return
        count = len(group.pending) + len(group.placed)
        self.queue.add(self.book.core_group(group), pod_count=count, now=self.clock())

    def _cluster_changed(self, event: ClusterEvent, cause: str | None) -> None:
        if cause is not None:
            self._capacity_cause = cause
        if not self._loading:
            self.queue.on_event(event, now=self.clock())

    def _device_classes_changed(self, cause: str | None) -> None:
        self._recompute_requests(self.book.pods.values())
        self._cluster_changed(ClusterEvent.NODE_UPDATED, cause)

    def _request(self, pod: ApiObject) -> PodRequest:
        devices: dict[str, int] = {}
        if pod.spec.get("resourceClaims"):
            name = pod_group_name(pod)
            group = self.book.groups.get(f"{pod.namespace}/{name}") if name else None
            devices = claim_devices(
                pod, group.obj if group else None, self._claim_templates, self.inventory.node_classes
            )
        return pod_request(pod, self.inventory.catalog.extended_resources, devices)

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


def _pod_key(pod: PodRecord) -> PodKey:
    return PodKey(pod.obj.namespace, pod.obj.name, pod.uid, pod.node)


def _placement_status(
    domain: TopologyDomainRef | None, pods: Mapping[str, Mapping[str, object]]
) -> dict[str, object]:
    """`status.placement` of a PodGroup: its domain, its nodes, and each pod's node and devices."""
    return {
        "domain": {"key": domain.key, "value": domain.value} if domain is not None else None,
        "nodes": sorted({str(pod["node"]) for pod in pods.values()}),
        "pods": {name: dict(pod) for name, pod in sorted(pods.items())},
    }
