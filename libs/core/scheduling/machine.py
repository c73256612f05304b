"""The scheduler state machine: what the scheduler knows and every rule it follows, without I/O.

Inputs (`inputs.py`: objects stored and removed, pods finished and evicted, claims allocated or refused,
nominations) go in through `handle`, each with the time it happened; `run_pass(now)` runs the due
time-outs and one cycle per ready PodGroup and returns the outputs (`outputs.py`) for the adapter to write
in one transaction. The service runs it in real time, the simulator on a virtual clock; the same inputs at
the same times give the same outputs.

This module holds the inputs' dispatch, the pass, its cycles and bindings; the rules of each concern are
in the layers the machine is built on (listed in `machine_state.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from libs.core.dra.allocator import ClaimAllocation
from libs.core.dra.records import allocation_record, resource_claim_name
from libs.core.dra.requests import EXTENDED_RESOURCES_CLAIM, group_claim_specs

from .book import GroupRecord
from .composite import ChildGroup, CompositeDecision, CompositeGroup, nothing_placed, schedule_composite
from .cycle import schedule_podgroup
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
)
from .machine_state import MachineSettings, WakeStats
from .model import CycleDecision, GangReason, PodGroup, TopologyDomainRef
from .node_health import NodeCondition
from .objects import ApiObject, composite_min_group_count, composite_topology_key
from .outputs import Binding, CompositeCycleRan, CycleRan, GroupRef, Output
from .queue import QueueState, backoff_seconds
from .quota_reservations import QuotaReservations
from .quotas import with_node_selector
from .world_restore import WorldRestore

__all__ = ["MachineSettings", "SchedulerStateMachine", "WakeStats"]

_TRIED_TOGETHER = (QueueState.ACTIVE, QueueState.BACKING_OFF, QueueState.PARKED)
"""Queue states of a composite's children that its cycle takes along (not gated, not in another's hands)."""


class SchedulerStateMachine(WorldRestore, QuotaReservations):
    """Nodes, pods and PodGroups as the scheduler last heard of them, one snapshot and one queue.

    `handle` is idempotent for replayed inputs. `timer`, when given, times each cycle for the `cycle_ms`
    of its output (a measurement only: decisions never depend on it).
    """

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
            self._quota_freed = True
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

    def drop_outputs(self) -> None:
        """Forget what a pass would write: for an observer that never writes (the preemptor's world)."""
        self._outputs.clear()

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
        # 5b. Quota held too long by gangs not placed is let go; gangs waiting for quota retry once some may
        # have come free.
        self._let_go_of_quota(now)
        outputs += self._sample_local_queues(now)
        if self._quota_freed:
            self._quota_freed = False
            self.queue.end_quota_waits(now)
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
            for ran in self._cycle(popped.key, now):
                outputs.append(ran)
                if isinstance(ran, CycleRan):
                    placed += len(ran.decision.placements)
        return outputs

    def next_wakeup(self) -> float | None:
        """When a pass next has something to do on time alone (a back-off, a deadline), if ever."""
        candidates = (
            self.queue.next_wakeup(),
            self._next_claims_deadline(),
            self.health.next_deadline(),
            self._next_quota_deadline(),
        )
        times = [t for t in candidates if t is not None]
        return min(times) if times else None

    def _cycle(self, key: str, now: float) -> list[CycleRan | CompositeCycleRan]:
        group = self.book.groups.get(key)
        if group is None or not self._may_place(group):
            self.queue.remove(key)
            return []
        composite = self.book.composite_of(group)
        if composite is not None:
            return self._composite_cycle(composite, group, now)
        self._release(key)
        core = self.cycle_group(group)
        started = self._timer() if self._timer is not None else 0.0
        missing = self._missing_claim(group)
        if missing is not None:
            decision = self._claim_not_found(group, missing, now)
            return [self._decided(group, core, decision, started, now, may_preempt=False)]
        # Quota is reserved before placement: a gang its ClusterQueue has no room for does not enter the cycle.
        verdict = self._quota_verdict(group, now)
        if verdict is not None and not verdict.decision.fits:
            return [self._waits_for_quota(group, core, verdict, now)]
        requests = self.book.pending_requests(group)
        if verdict is not None:
            requests = with_node_selector(requests, verdict.node_selector)
        decision = schedule_podgroup(self.snapshot, core, requests, now=now, bound_pods=len(group.placed))
        return [self._decided(group, core, decision, started, now, may_preempt=True)]

    @staticmethod
    def _may_place(group: GroupRecord) -> bool:
        return not group.timed_out and bool(group.pending) and not group.obj.metadata.get("deletionTimestamp")

    def _composite_cycle(
        self, composite_key: str, popped: GroupRecord, now: float
    ) -> list[CycleRan | CompositeCycleRan]:
        """One cycle for the waiting children of a CompositePodGroup (the popped child's siblings in the
        queue's hands are left to their own turn): at least the children the composite still needs are
        placed together, inside its domain, or none is."""
        siblings = [
            child
            for child in self.book.children(composite_key)
            if child is popped or (self._may_place(child) and self.queue.state(child.key) in _TRIED_TOGETHER)
        ]
        for child in siblings:
            self._release(child.key)
        started = self._timer() if self._timer is not None else 0.0
        obj = self.book.composites.get(composite_key)
        cores = [self.cycle_group(child) for child in siblings]
        needed = self._still_needed(composite_key, obj) if obj is not None else 0
        waiting = self._composite_waits(composite_key, obj, len(siblings), needed)
        if waiting is not None:
            # Nothing to try yet: the children wait (with why) for what is missing, and ask no preemption.
            return [
                self._decided(
                    child,
                    core,
                    nothing_placed(core, self.book.pending_requests(child), waiting, now),
                    started,
                    now,
                    may_preempt=False,
                )
                for child, core in zip(siblings, cores, strict=True)
            ]
        assert obj is not None
        # Quota is reserved before placement, for the children together: all of them fit, or all wait.
        verdict = self._composite_quota_verdict(siblings, now)
        if verdict is not None and not verdict.decision.fits:
            return [
                self._waits_for_quota(child, core, verdict, now, asks=child is popped)
                for child, core in zip(siblings, cores, strict=True)
            ]
        selector = verdict.node_selector if verdict is not None else {}
        children = [
            ChildGroup(
                core, with_node_selector(self.book.pending_requests(child), selector), len(child.placed)
            )
            for child, core in zip(siblings, cores, strict=True)
        ]
        result = schedule_composite(
            self.snapshot, self._core_composite(obj), children, needed=needed, now=now
        )
        ran: list[CycleRan | CompositeCycleRan] = [
            self._decided(child, core, decision, started, now, may_preempt=True)
            for child, core, decision in zip(siblings, cores, result.decisions, strict=True)
        ]
        if result.placed_groups:
            for child in siblings:
                self._hold_quota(child, None)  # held for them together: the placed ones' pods hold it now
        if needed > 0:
            ran.append(_composite_ran(obj, siblings, result, popped.cause))
        return ran

    @staticmethod
    def _composite_waits(key: str, obj: ApiObject | None, ready: int, needed: int) -> str | None:
        """Why a composite's children are not tried yet: it does not exist, or fewer of its children are
        ready (their pods arrived) than it still needs placed together."""
        name = key.partition("/")[2]
        if obj is None:
            return GangReason.COMPOSITE_MISSING.format(composite=name)
        if ready < needed:
            return GangReason.COMPOSITE_WAITING.format(composite=name, ready=ready, count=needed)
        return None

    def _still_needed(self, composite_key: str, obj: ApiObject) -> int:
        """How many more children must be placed together (0: the composite was placed, or is basic)."""
        wanted = composite_min_group_count(obj)
        if wanted is None:
            return 0
        return wanted - sum(1 for child in self.book.children(composite_key) if child.scheduled)

    def _core_composite(self, obj: ApiObject) -> CompositeGroup:
        """The composite as its cycle sees it, with the domain its placed children hold (children keep to the
        composite's domain whoever placed them: no record of it is needed beyond their pods' nodes)."""
        key = composite_topology_key(obj)
        domain = None
        if key is not None:
            for child in self.book.children(obj.key):
                for uid in child.placed:
                    node = self.book.pods[uid].node
                    value = (
                        self.snapshot.node_state(node).labels.get(key)
                        if node is not None and node in self.snapshot
                        else None
                    )
                    if value is not None:
                        domain = TopologyDomainRef(key, value)
                        break
                if domain is not None:
                    break
        return CompositeGroup(obj.namespace, obj.name, composite_min_group_count(obj), key, domain)

    def _decided(
        self,
        group: GroupRecord,
        core: PodGroup,
        decision: CycleDecision,
        started: float,
        now: float,
        *,
        may_preempt: bool,
    ) -> CycleRan:
        """A cycle's decision taken in: a placed gang binds (or waits for its claims), an unschedulable one
        backs off, and may ask for preemption."""
        cause = group.cause if group.attempts == 0 else (self._capacity_cause or group.cause)
        cycle_ms = (self._timer() - started) * 1000 if self._timer is not None else 0.0
        group.attempts += 1
        ran = CycleRan(
            group=self._ref(group),
            attempt=group.attempts,
            pods=len(group.pending),
            min_count=group.min_count or 1,
            decision=decision,
            cycle_ms=cycle_ms,
            cause=cause,
        )
        if decision.placed:
            return self._placed(group, decision, ran, now)
        self.queue.done(decision, now=now)
        group.unschedulable_attempts += 1
        nomination = self._nominations.get(group.key)
        if nomination is not None:
            self._hold(group, nomination)
        return dataclasses.replace(
            ran,
            backoff_s=backoff_seconds(group.unschedulable_attempts),
            preemption_priority=(
                self._preemption_wanted(
                    group, core.priority, lambda: self.reclaims_room(group, core.priority)
                )
                if may_preempt
                else None
            ),
            condition_false=not group.scheduled,
            joining=tuple(sorted(group.pending)) if group.scheduled else (),
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
        self._hold_quota(group, None)  # its pods hold nodes now: their usage is theirs (quotas.py)
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
            cluster_queue=self.quota_queue(group),
        )

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


def _composite_ran(
    obj: ApiObject, children: list[GroupRecord], result: CompositeDecision, cause: str | None
) -> CompositeCycleRan:
    placed = tuple(c.name for c, d in zip(children, result.decisions, strict=True) if d.placed)
    message = "" if placed else next((d.message for d in result.decisions if d.message), "")
    return CompositeCycleRan(
        composite=GroupRef(obj.namespace, obj.name, obj.uid),
        placed=bool(placed),
        groups=placed or tuple(child.name for child in children),
        domain=result.domain,
        message=message,
        cause=cause,
    )


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
