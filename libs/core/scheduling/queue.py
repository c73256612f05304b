"""The scheduling queue of PodGroups: ordering, gang PreEnqueue, backoff, queueing hints and timeouts.

Modelled on kube-scheduler's queue: PodGroups wait gated until they may be tried, wait active in priority
order, run one cycle at a time (in flight), wait for their claims when a placement needs devices allocated,
and after an unschedulable cycle wait parked until a cluster event that could help them (a queueing hint
says which), then back off before the next try. Time is always passed in.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from .model import CycleDecision, PodGroup, Unschedulable

INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 300.0
MAX_PARKED_SECONDS = 300.0
"""An unschedulable group is retried after this long even if no event came (kube-scheduler's flush)."""


class ClusterEvent(StrEnum):
    """Cluster changes that may make room for an unschedulable PodGroup."""

    NODE_ADDED = "NodeAdded"
    NODE_UPDATED = "NodeUpdated"
    POD_FINISHED = "PodFinished"
    POD_EVICTED = "PodEvicted"
    POD_DELETED = "PodDeleted"
    CAPACITY_FREED = "CapacityFreed"


class QueueState(StrEnum):
    GATED = "Gated"
    ACTIVE = "Active"
    IN_FLIGHT = "InFlight"
    AWAITING_CLAIMS = "AwaitingClaims"
    PARKED = "Parked"
    BACKING_OFF = "BackingOff"


class QueueReason(StrEnum):
    """Why a PodGroup is not tried yet, or was given up (templates take `str.format` arguments)."""

    WAITING_FOR_WORKLOAD = "waiting for Workload {workload}"
    WAITING_FOR_PODS = "waiting for pods: {present} of {count} exist"
    TIMED_OUT = "gave up after {seconds:g} s pending (podway.io/max-pending-seconds: {limit:g})"


RoomFor = Callable[[PodGroup, Unschedulable], int]
"""A queueing hint: how many parked groups of one kind (see `need_kind`) what just changed in the cluster
could let fit at most, given why their last cycle failed. It may say too many (wasted cycles) but never
too few."""

NeedKind = tuple[object, ...]


def need_kind(group: PodGroup, need: Unschedulable) -> NeedKind | None:
    """Groups of one kind compete for the same room: same hard constraint, assigned domain, pod shapes and
    demand. None for a need too vague to compare (every hint wakes such a group)."""
    totals = need.required_totals
    if not need.shapes or totals is None:
        return None
    devices = tuple(sorted(totals.devices.items()))
    return (group.topology_key, group.assigned_domain, need.shapes, totals.pods, totals.cpu_milli,
            totals.memory, devices)  # fmt: skip


def backoff_seconds(attempts: int) -> float:
    """The wait after the n-th unschedulable attempt: 1 s, doubling each time, at most 5 minutes."""
    if attempts <= 0:
        return 0.0
    return min(MAX_BACKOFF_SECONDS, INITIAL_BACKOFF_SECONDS * 2.0 ** min(attempts - 1, 32))


def queue_order(group: PodGroup) -> tuple[int, float, str, str]:
    """Sort key: PodGroup priority (highest first), then creation time, then name (then namespace)."""
    return (-group.priority, group.created_at, group.name, group.namespace)


@dataclass(frozen=True, slots=True)
class PodGroupTimedOut:
    """A gang pending for longer than its `podway.io/max-pending-seconds`: fail it and its pods."""

    podgroup: str
    podgroup_uid: str
    pending_seconds: float
    max_pending_seconds: float
    message: str
    decided_at: float


@dataclass(slots=True)
class _Entry:
    group: PodGroup
    pod_count: int
    state: QueueState = QueueState.GATED
    attempts: int = 0
    backoff_until: float = 0.0
    pending_since: float | None = None
    last_message: str = ""
    need: Unschedulable | None = None
    kind: NeedKind | None = None
    event_in_flight: bool = False
    ticket: int = 0
    quota_wait: str | None = None
    """Why its ClusterQueue has no quota for it (Kueue's message), while it waits gated for quota."""

    @property
    def busy(self) -> bool:
        """In a cycle, or placed and waiting for its claims: the queue must not hand it out or regate it."""
        return self.state in (QueueState.IN_FLIGHT, QueueState.AWAITING_CLAIMS)


class SchedulingQueue:
    """PodGroups waiting for a scheduling cycle.

    `pop(now)` hands out the most important ready group; `done(decision, now)` takes the cycle's outcome
    back (`await_claims` first when the placement waits for the DRA allocator). Placed groups leave the
    queue (or, with pods left over, wait for room to place them); unschedulable ones park until `wake`
    reports a cluster change that may help them, then back off (1 s doubling to 5 min per group) before
    they are active again. `expire(now)` times out groups pending (tried and not yet bound, whether
    unschedulable or waiting for claims) longer than their `max_pending_seconds`.
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._workloads: set[str] = set()
        self._parked_keys: set[str] = set()
        self._parked_by_kind: dict[NeedKind | None, set[str]] = {}
        self._busy: set[str] = set()
        self._quota_waits: set[str] = set()
        self._active: list[tuple[tuple[int, float, str, str], int, str]] = []
        self._backoff: list[tuple[float, str, int]] = []
        self._parked: list[tuple[float, str, int]] = []
        self._deadlines: list[tuple[float, str]] = []
        self._tickets = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def state(self, key: str) -> QueueState | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.state

    def group(self, key: str) -> PodGroup | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.group

    @property
    def parked(self) -> int:
        """How many groups wait parked for a cluster event."""
        return len(self._parked_keys)

    # -- what exists --------------------------------------------------------------------------------

    def add(self, group: PodGroup, *, pod_count: int, now: float) -> None:
        """Add a PodGroup, or update its spec and pod count; it is gated until it may be tried. A parked
        group whose own pods arrived is tried again (the new pods may fit where the others did not)."""
        entry = self._entries.get(group.key)
        if entry is None:
            entry = self._entries[group.key] = _Entry(group, pod_count)
        else:
            grew = pod_count > entry.pod_count
            entry.group, entry.pod_count = group, pod_count
            if entry.state == QueueState.ACTIVE:
                self._activate(entry, now)
            elif grew and entry.state == QueueState.PARKED:
                self._back_off(entry, now)
        self._regate(entry, now)

    def set_pod_count(self, key: str, pod_count: int, *, now: float) -> None:
        entry = self._entries[key]
        entry.pod_count = pod_count
        self._regate(entry, now)

    def remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._leave_parking(entry)
            self._busy.discard(key)
            self._quota_waits.discard(key)

    def add_workload(self, namespace: str, name: str, *, now: float) -> None:
        """A Workload appeared: its PodGroups may pass PreEnqueue now."""
        self._workloads.add(f"{namespace}/{name}")
        for entry in list(self._entries.values()):
            group = entry.group
            if (
                entry.state == QueueState.GATED
                and group.workload_name == name
                and group.namespace == namespace
            ):
                self._regate(entry, now)

    def remove_workload(self, namespace: str, name: str) -> None:
        self._workloads.discard(f"{namespace}/{name}")

    def gate_reason(self, key: str) -> str | None:
        """Why the PodGroup may not be tried yet (gang PreEnqueue), or None if it may."""
        entry = self._entries[key]
        group = entry.group
        if entry.quota_wait is not None:
            return entry.quota_wait
        if (
            group.workload_name is not None
            and f"{group.namespace}/{group.workload_name}" not in self._workloads
        ):
            return QueueReason.WAITING_FOR_WORKLOAD.format(
                workload=f"{group.namespace}/{group.workload_name}"
            )
        needed = group.gang_min_count if group.gang_min_count is not None else 1
        if entry.pod_count < needed:
            return QueueReason.WAITING_FOR_PODS.format(present=entry.pod_count, count=needed)
        return None

    def _regate(self, entry: _Entry, now: float) -> None:
        gated = self.gate_reason(entry.group.key) is not None
        if gated and not entry.busy:
            self._leave_parking(entry)
            entry.state = QueueState.GATED
            entry.ticket = self._next_ticket()
        elif not gated and entry.state == QueueState.GATED:
            self._activate(entry, now)

    def wait_for_quota(self, key: str, message: str) -> None:
        """Take back a group whose ClusterQueue has no quota for it: gated (not parked, so no cluster event
        wakes it) until `end_quota_waits`."""
        entry = self._entries.get(key)
        if entry is None:
            return
        self._busy.discard(key)
        self._leave_parking(entry)
        self._quota_waits.add(key)
        entry.quota_wait = message
        entry.state = QueueState.GATED
        entry.ticket = self._next_ticket()

    def end_quota_waits(self, now: float) -> int:
        """Quota may have come free: the groups waiting for it may be tried again; returns how many."""
        waiting, self._quota_waits = sorted(self._quota_waits), set()
        for key in waiting:
            entry = self._entries.get(key)
            if entry is not None:
                entry.quota_wait = None
                self._regate(entry, now)
        return len(waiting)

    # -- cycles -------------------------------------------------------------------------------------

    def pop(self, now: float) -> PodGroup | None:
        """The most important PodGroup ready for a cycle (it is in flight until `done`), or None."""
        self._flush(now)
        while self._active:
            _, ticket, key = heapq.heappop(self._active)
            entry = self._entries.get(key)
            if entry is not None and entry.ticket == ticket and entry.state == QueueState.ACTIVE:
                entry.state = QueueState.IN_FLIGHT
                self._busy.add(key)
                entry.event_in_flight = False
                if entry.pending_since is None:
                    entry.pending_since = now
                    self._push_deadline(entry)
                return entry.group
        return None

    def await_claims(self, key: str) -> None:
        """The group's cycle placed it, and the placement waits for its claims to be allocated: it stays out
        of the queue's hands until `done` (allocated, or refused: a failed decision), and its pending time
        keeps counting towards `max_pending_seconds`."""
        entry = self._entries.get(key)
        if entry is not None and entry.state == QueueState.IN_FLIGHT:
            entry.state = QueueState.AWAITING_CLAIMS

    def hold_for_claims(self, group: PodGroup, *, pod_count: int, pending_since: float) -> None:
        """A group a previous leader placed, whose placement still waits for its claims."""
        entry = self._entries.get(group.key)
        if entry is None:
            entry = self._entries[group.key] = _Entry(group, pod_count)
        self._leave_parking(entry)
        entry.state = QueueState.AWAITING_CLAIMS
        self._busy.add(group.key)
        entry.ticket = self._next_ticket()
        entry.pending_since = pending_since
        self._push_deadline(entry)

    def done(self, decision: CycleDecision, *, now: float) -> None:
        """Take back a PodGroup after its cycle: placed ones leave, unschedulable ones park and back off.

        A placed group with pods left over stays, carrying the domain it was given, so the rest join it.
        """
        entry = self._entries.get(decision.podgroup)
        if entry is None:
            return
        self._busy.discard(decision.podgroup)
        if decision.placed:
            if not decision.unplaced:
                self.remove(decision.podgroup)
                return
            entry.group = replace(entry.group, assigned_domain=decision.domain or entry.group.assigned_domain)
            entry.attempts = 0
            entry.pending_since = None
            entry.need = entry.kind = None
        else:
            entry.last_message = decision.message
            entry.need = decision.unschedulable
            entry.kind = need_kind(entry.group, entry.need) if entry.need is not None else None
        entry.attempts += 1
        entry.backoff_until = now + backoff_seconds(entry.attempts)
        if entry.event_in_flight:
            self._back_off(entry, now)
        else:
            self._park(entry, now)

    def wake(self, now: float, room_for: RoomFor | None = None) -> int:
        """A cluster change: parked groups it may help move on (to back-off, or active if that ended);
        without a hint, every parked group does. Returns how many groups moved.

        With a hint, each kind of parked group is asked once, and at most as many of that kind as the hint
        allows move, most important first. A group in a cycle, or waiting for its claims, remembers the
        change, so that if it then fails it backs off instead of parking (the change may have come too late
        for its snapshot).
        """
        for key in self._busy:
            self._entries[key].event_in_flight = True
        moved: list[_Entry] = []
        for kind, keys in self._parked_by_kind.items():
            entries = [self._entries[key] for key in keys]
            if room_for is None or kind is None:
                moved += entries
                continue
            representative = entries[0]
            assert representative.need is not None
            allowed = room_for(representative.group, representative.need)
            if allowed >= len(entries):
                moved += entries
            elif allowed > 0:
                moved += heapq.nsmallest(allowed, entries, key=lambda entry: queue_order(entry.group))
        for entry in moved:
            self._back_off(entry, now)
        return len(moved)

    def wake_above(self, now: float, priority: int) -> int:
        """Pods of `priority` were bound: parked groups of a higher priority may preempt them now, so they
        move on (to back-off, or active if that ended). Returns how many moved."""
        moved = [
            entry
            for entry in (self._entries[key] for key in self._parked_keys)
            if entry.group.priority > priority
        ]
        for entry in moved:
            self._back_off(entry, now)
        return len(moved)

    def activate(self, key: str, now: float) -> bool:
        """A parked or backing-off group is ready now, its back-off waived (the room a preemptor made for it
        came free); returns whether it moved."""
        entry = self._entries.get(key)
        if entry is None or entry.state not in (QueueState.PARKED, QueueState.BACKING_OFF):
            return False
        entry.backoff_until = now
        self._activate(entry, now)
        return True

    def on_event(self, event: ClusterEvent, *, now: float) -> int:
        """A cluster change without a hint: every parked group may try again (see `wake`)."""
        return self.wake(now)

    def expire(self, now: float) -> list[PodGroupTimedOut]:
        """Remove and report the groups pending for longer than their `max_pending_seconds`.

        A group in a cycle times out after it (the cycle may place it); one waiting for its claims times
        out now, and the caller forgets its placement."""
        timed_out: list[PodGroupTimedOut] = []
        later: list[tuple[float, str]] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, key = heapq.heappop(self._deadlines)
            entry = self._entries.get(key)
            if entry is None or _deadline(entry) != deadline:
                continue
            if entry.state == QueueState.IN_FLIGHT:
                later.append((deadline, key))
                continue
            timed_out.append(self._time_out(entry, now))
            self.remove(key)
        for item in later:
            heapq.heappush(self._deadlines, item)
        return timed_out

    def next_wakeup(self) -> float | None:
        """When the next back-off, parking or deadline ends (None if nothing is waiting on time)."""
        times = [heap[0][0] for heap in (self._backoff, self._parked, self._deadlines) if heap]
        return min(times) if times else None

    # -- transitions --------------------------------------------------------------------------------

    def _flush(self, now: float) -> None:
        for heap in (self._backoff, self._parked):
            while heap and heap[0][0] <= now:
                _, key, ticket = heapq.heappop(heap)
                entry = self._entries.get(key)
                if entry is not None and entry.ticket == ticket:
                    self._activate(entry, now)

    def _activate(self, entry: _Entry, now: float) -> None:
        if entry.backoff_until > now:
            self._back_off(entry, now)
            return
        self._leave_parking(entry)
        entry.state = QueueState.ACTIVE
        entry.ticket = self._next_ticket()
        heapq.heappush(self._active, (queue_order(entry.group), entry.ticket, entry.group.key))

    def _back_off(self, entry: _Entry, now: float) -> None:
        if entry.backoff_until <= now:
            self._activate(entry, now)
            return
        self._leave_parking(entry)
        entry.state = QueueState.BACKING_OFF
        entry.ticket = self._next_ticket()
        heapq.heappush(self._backoff, (entry.backoff_until, entry.group.key, entry.ticket))

    def _park(self, entry: _Entry, now: float) -> None:
        entry.state = QueueState.PARKED
        entry.ticket = self._next_ticket()
        self._parked_keys.add(entry.group.key)
        self._parked_by_kind.setdefault(entry.kind, set()).add(entry.group.key)
        wake = max(now + MAX_PARKED_SECONDS, entry.backoff_until)
        heapq.heappush(self._parked, (wake, entry.group.key, entry.ticket))

    def _leave_parking(self, entry: _Entry) -> None:
        key = entry.group.key
        if key not in self._parked_keys:
            return
        self._parked_keys.discard(key)
        kind = self._parked_by_kind[entry.kind]
        kind.discard(key)
        if not kind:
            del self._parked_by_kind[entry.kind]

    def _push_deadline(self, entry: _Entry) -> None:
        deadline = _deadline(entry)
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, entry.group.key))

    def _time_out(self, entry: _Entry, now: float) -> PodGroupTimedOut:
        group = entry.group
        limit = group.max_pending_seconds or 0.0
        since = entry.pending_since if entry.pending_since is not None else now
        message = QueueReason.TIMED_OUT.format(seconds=now - since, limit=limit)
        if entry.last_message:
            message += f": {entry.last_message}"
        return PodGroupTimedOut(group.key, group.uid, now - since, limit, message, now)

    def _next_ticket(self) -> int:
        self._tickets += 1
        return self._tickets


def _deadline(entry: _Entry) -> float | None:
    limit = entry.group.max_pending_seconds
    if limit is None or entry.pending_since is None:
        return None
    return entry.pending_since + limit
