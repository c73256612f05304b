"""The scheduler's record of Workloads, PodGroups and Pods: which pods wait, which are placed, and where."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .lifecycle import PodPhase
from .model import CycleDecision, PodGroup, PodRequest, TopologyDomainRef
from .objects import (
    STANDALONE_PREFIX,
    ApiObject,
    assigned_domain,
    core_podgroup,
    parent_composite,
    pod_group_name,
    pod_has_claims,
    pod_phase,
    pod_priority,
    podgroup_has_claims,
    podgroup_min_count,
    podgroup_workload_name,
    standalone_podgroup,
)
from .quotas import QuotaHold

TERMINAL = (PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.UNKNOWN)
_TOUCHED_AT_MOST = 4096
"""Groups noted as changed, beyond twice the groups there are, after which the quota usage is built anew."""
"""Phases of pods that hold no capacity (Unknown: the node was lost)."""


@dataclass(slots=True)
class PodRecord:
    """One pod: its request, phase, and node once a cycle placed it (assumed until written, then bound)."""

    obj: ApiObject
    request: PodRequest
    group_key: str
    phase: PodPhase
    priority: int
    node: str | None = None
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    assumed: bool = False
    evicting: bool = False

    @property
    def uid(self) -> str:
        return self.obj.uid

    @property
    def pending(self) -> bool:
        """Waiting for a cycle: not placed, not finished."""
        return self.node is None and self.phase == PodPhase.PENDING


@dataclass(slots=True)
class GroupRecord:
    """A PodGroup (or the one-pod group of a standalone pod) and what the scheduler did with it."""

    key: str
    obj: ApiObject
    standalone: bool
    min_count: int | None
    has_claims: bool
    domain: TopologyDomainRef | None = None
    placement: dict[str, dict[str, object]] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    """The PodGroup's own claims as allocated (`status.placement.claims`)."""
    scheduled: bool = False
    attempts: int = 0
    unschedulable_attempts: int = 0
    cause: str | None = None
    preemption_asked: int = -1
    """The world's preemption generation when the group last asked for preemption (-1: not since it was
    placed): it asks again only once the world changed in a way that could change the answer."""
    timed_out: bool = False
    awaiting_claims: CycleDecision | None = None
    claims_wait: int = 0
    core: tuple[tuple[object, object, object], PodGroup] | None = None
    """The core's view of the group, and the objects it was made from."""
    """Counts the group's waits for claims, so a deadline of an earlier wait is recognised as stale."""
    pending: set[str] = field(default_factory=set)
    placed: set[str] = field(default_factory=set)
    quota_hold: QuotaHold | None = None
    """The quota reserved for the gang's waiting pods (`quotas.QuotaHold`) until they are placed."""

    @property
    def uid(self) -> str:
        return self.obj.uid

    @property
    def name(self) -> str:
        return STANDALONE_PREFIX + self.obj.name if self.standalone else self.obj.name

    @property
    def namespace(self) -> str:
        return self.obj.namespace


class PodBook:
    """Workloads, PodGroups and Pods as the scheduler needs them, with each group's waiting and placed pods.

    Pods may arrive before their PodGroup; they are attached when it comes. A pod without a PodGroup is a
    group of its own (`ns/pod/<name>`).
    """

    def __init__(self) -> None:
        self.workloads: dict[str, ApiObject] = {}
        self.groups: dict[str, GroupRecord] = {}
        self.pods: dict[str, PodRecord] = {}
        self.group_uids: dict[str, str] = {}
        self._members: dict[str, set[str]] = {}
        self._groups_of_workload: dict[str, set[str]] = {}
        self.composites: dict[str, ApiObject] = {}
        self._children: dict[str, set[str]] = {}
        self.bound_priorities: Counter[int] = Counter()
        self.touched: set[str] | None = None
        """Keys of the groups whose PodGroup, Workload or pods changed since the quota usage last looked at
        them (`QuotaReservations`); None while none is kept, or once it fell too far behind (it is then
        built anew)."""
        self.changes: dict[str, int] = {}
        self.revision = 0
        """Counts every touch: what was derived from all the groups is current while it is the same."""
        """How often each group was touched: what was derived from a group is current while it is the same."""

    def touch(self, key: str) -> None:
        """Note that what the group `key` holds may have changed."""
        self.changes[key] = self.changes.get(key, 0) + 1
        self.revision += 1
        if self.touched is not None:
            self.touched.add(key)
            if len(self.touched) > max(_TOUCHED_AT_MOST, 2 * len(self.groups)):
                self.touched = None

    # -- objects ----------------------------------------------------------------------------------------

    def put_workload(self, obj: ApiObject) -> list[str]:
        """Store a Workload; returns the keys of its PodGroups (their annotations may have changed)."""
        self.workloads[obj.key] = obj
        keys = sorted(self._groups_of_workload.get(obj.key, ()))
        for key in keys:
            self.touch(key)
        return keys

    def put_composite(self, obj: ApiObject) -> list[str]:
        """Store a CompositePodGroup; returns the keys of its child PodGroups."""
        self.composites[obj.key] = obj
        return sorted(self._children.get(obj.key, ()))

    def remove_composite(self, key: str) -> list[str]:
        self.composites.pop(key, None)
        return sorted(self._children.get(key, ()))

    def composite_of(self, group: GroupRecord) -> str | None:
        """The key of the CompositePodGroup the group belongs to, if it names one."""
        name = None if group.standalone else parent_composite(group.obj)
        return f"{group.namespace}/{name}" if name else None

    def children(self, composite_key: str) -> list[GroupRecord]:
        """The child PodGroups of a composite, by name."""
        return [
            self.groups[key] for key in sorted(self._children.get(composite_key, ())) if key in self.groups
        ]

    def workload_of(self, group: GroupRecord) -> ApiObject | None:
        name = None if group.standalone else podgroup_workload_name(group.obj)
        return self.workloads.get(f"{group.namespace}/{name}") if name else None

    def put_group(self, obj: ApiObject) -> GroupRecord:
        self.touch(obj.key)
        record = self.groups.get(obj.key)
        if record is None or record.uid != obj.uid:
            record = GroupRecord(
                key=obj.key,
                obj=obj,
                standalone=False,
                min_count=podgroup_min_count(obj),
                has_claims=podgroup_has_claims(obj),
                domain=assigned_domain(obj),
                placement=dict((obj.status.get("placement") or {}).get("pods") or {}),
                claims=list((obj.status.get("placement") or {}).get("claims") or []),
                # A gang placed anew (restarted, disrupted) keeps a `placement` with no node: not scheduled.
                scheduled=bool((obj.status.get("placement") or {}).get("nodes")),
            )
            self.groups[obj.key] = record
            self.group_uids[obj.uid] = obj.key
            workload = podgroup_workload_name(obj)
            if workload:
                self._groups_of_workload.setdefault(f"{obj.namespace}/{workload}", set()).add(obj.key)
            parent = parent_composite(obj)
            if parent:
                self._children.setdefault(f"{obj.namespace}/{parent}", set()).add(obj.key)
            for uid in self._members.get(obj.key, ()):
                self._file(record, self.pods[uid])
                # Pods that came before their PodGroup: their claims are the group's wait too.
                record.has_claims = record.has_claims or pod_has_claims(self.pods[uid].obj)
        else:
            record.obj = obj
            record.min_count = podgroup_min_count(obj)  # an elastic gang's minCount may change
        return record

    def remove_group(self, key: str) -> GroupRecord | None:
        record = self.groups.pop(key, None)
        self.touch(key)
        self.changes.pop(key, None)  # a group added again under this key is a new object
        if record is not None:
            self.group_uids.pop(record.uid, None)
            workload = None if record.standalone else podgroup_workload_name(record.obj)
            if workload:
                self._groups_of_workload.get(f"{record.namespace}/{workload}", set()).discard(key)
            parent = None if record.standalone else parent_composite(record.obj)
            if parent:
                self._children.get(f"{record.namespace}/{parent}", set()).discard(key)
        return record

    def put_pod(self, obj: ApiObject, request: PodRequest) -> PodRecord:
        """Store a pod (a known pod keeps its placement and phase: events may be replayed)."""
        known = self.pods.get(obj.uid)
        if known is not None:
            self.touch(known.group_key)
            known.obj = obj
            if known.pending:
                known.request = request
            return known
        group_name = pod_group_name(obj)
        group_key = (
            f"{obj.namespace}/{group_name}"
            if group_name
            else f"{obj.namespace}/{STANDALONE_PREFIX}{obj.name}"
        )
        record = PodRecord(obj, request, group_key, pod_phase(obj), pod_priority(obj))
        self.pods[obj.uid] = record
        self._members.setdefault(group_key, set()).add(obj.uid)
        if group_name is None:
            self.groups[group_key] = GroupRecord(
                key=group_key, obj=obj, standalone=True, min_count=None, has_claims=pod_has_claims(obj)
            )
            self.group_uids[obj.uid] = group_key
        group = self.groups.get(group_key)
        if group is not None:
            if pod_has_claims(obj):
                group.has_claims = True
            self._file(group, record)
        return record

    def remove_pod(self, uid: str) -> PodRecord | None:
        record = self.pods.pop(uid, None)
        if record is None:
            return None
        self._members.get(record.group_key, set()).discard(uid)
        self.touch(record.group_key)
        group = self.groups.get(record.group_key)
        if group is not None:
            group.pending.discard(uid)
            group.placed.discard(uid)
            if group.standalone:
                self.remove_group(group.key)
        if record.node is not None and record.phase not in TERMINAL and not record.evicting:
            self.bound_priorities[self.priority_of(record)] -= 1
        return record

    def members(self, key: str) -> Iterator[PodRecord]:
        for uid in self._members.get(key, ()):
            yield self.pods[uid]

    def _file(self, group: GroupRecord, pod: PodRecord) -> None:
        self.touch(group.key)
        group.pending.discard(pod.uid)
        group.placed.discard(pod.uid)
        if pod.pending:
            group.pending.add(pod.uid)
        elif pod.node is not None and pod.phase not in TERMINAL and not pod.evicting:
            group.placed.add(pod.uid)

    # -- the core's view --------------------------------------------------------------------------------

    def core_group(self, group: GroupRecord) -> PodGroup:
        """The group as the core's cycle and queue see it, built again only when what it is built from
        (the PodGroup, its Workload, its assigned domain) changed."""
        workload = None if group.standalone else self.workload_of(group)
        made_from = (group.obj, workload, group.domain)
        cached = group.core
        if cached is not None and all(a is b for a, b in zip(cached[0], made_from, strict=True)):
            return cached[1]
        if group.standalone:
            core = standalone_podgroup(group.obj)
        else:
            core = core_podgroup(group.obj, workload, domain=group.domain)
        group.core = (made_from, core)
        return core

    def pending_requests(self, group: GroupRecord) -> list[PodRequest]:
        return [self.pods[uid].request for uid in group.pending]

    def priority_of(self, pod: PodRecord) -> int:
        """A pod's priority for preemption: its PodGroup's, which overrides the pod's own."""
        group = self.groups.get(pod.group_key)
        if group is not None and not group.standalone:
            return int(group.obj.spec.get("priority") or 0)
        return pod.priority

    # -- pod transitions --------------------------------------------------------------------------------

    def place(self, uid: str, node: str, devices: Mapping[str, tuple[str, ...]], *, assumed: bool) -> None:
        pod = self.pods[uid]
        pod.node, pod.devices, pod.assumed = node, devices, assumed
        self.bound_priorities[self.priority_of(pod)] += 1
        self._refile(pod)

    def confirm(self, uid: str) -> None:
        pod = self.pods.get(uid)
        if pod is not None:
            pod.assumed = False

    def unplace(self, uid: str) -> None:
        """A placement that did not happen (claims refused, write lost): the pod waits again."""
        pod = self.pods.get(uid)
        if pod is None or pod.node is None:
            return
        self.bound_priorities[self.priority_of(pod)] -= 1
        pod.node, pod.devices, pod.assumed = None, {}, False
        self._refile(pod)

    def finish(self, uid: str, phase: PodPhase) -> PodRecord | None:
        """A pod succeeded, failed or was lost; returns it if this changed anything."""
        pod = self.pods.get(uid)
        if pod is None or pod.phase in TERMINAL:
            return None
        if pod.node is not None and not pod.evicting:
            self.bound_priorities[self.priority_of(pod)] -= 1
        pod.phase = phase
        self._refile(pod)
        return pod

    def mark_evicting(self, uid: str) -> PodRecord | None:
        pod = self.pods.get(uid)
        if pod is None or pod.evicting or pod.phase in TERMINAL:
            return None
        if pod.node is not None:
            self.bound_priorities[self.priority_of(pod)] -= 1
        pod.evicting = True
        self._refile(pod)
        return pod

    def _refile(self, pod: PodRecord) -> None:
        group = self.groups.get(pod.group_key)
        if group is not None:
            self._file(group, pod)

    def lowest_running_priority(self) -> int | None:
        """The lowest priority among pods holding capacity (placed, not finished, not being evicted)."""
        live = [priority for priority, count in self.bound_priorities.items() if count > 0]
        return min(live) if live else None
