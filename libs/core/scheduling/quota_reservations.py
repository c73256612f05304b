"""The scheduler state machine's quota layer: whether a gang's ClusterQueue has quota for its waiting pods
before it enters a cycle, and what a gang waiting for quota tells (see `quotas.py` for what a gang holds)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from libs.core.quota import (
    AdmittedWorkload,
    Mode,
    PreemptionTarget,
    QuotaDecision,
    QuotaSnapshot,
    WorkloadRequest,
)
from libs.core.quota.admission_fair_sharing import summed
from libs.core.quota.ordering import admitted_after
from libs.core.quota.preemption import borrowers_by_share, reclaimable_by_placement, spared_by_quota
from libs.core.quota.snapshot import Node

from .book import GroupRecord
from .composite import nothing_placed
from .lifecycle import ConditionReason
from .machine_state import MachineState
from .model import PodGroup
from .objects import ApiObject
from .outputs import CycleRan, LocalQueuesSampled
from .quotas import Holding, QuotaHold, QuotaUsage, QuotaVerdict, gang_usage


class QuotaReservations(MachineState):
    """Quota reservation before placement, on the Kueue objects the machine was told of."""

    def _quota_verdict(self, group: GroupRecord, now: float) -> QuotaVerdict | None:
        """What the gang's ClusterQueue answers for its waiting pods (the quota held for them, if it holds
        some); None when it is not quota-managed. A gang that fits holds the quota until it is placed."""
        queue = self.quota_queue(group)
        if queue is None:
            self._hold_quota(group, None)
            return self._missing_local_queue(group)
        hold = group.quota_hold
        if hold is not None:
            decision = QuotaDecision(Mode.FIT, {}, hold.workload.usage)
            return QuotaVerdict(queue, decision, hold.node_selector)
        snapshot = self._quota_snapshot()
        gang, pending = self._holding(group), self._pending_pods(group)
        verdict = self._unless_held_for_others(
            gang, pending, self.quotas.verdict(snapshot, queue, gang, pending)
        )
        if verdict.decision.fits:
            request = self.quotas.request(queue, gang, pending, self.quota_local_queue(group))
            verdict = self.quotas.in_line(snapshot, verdict, request, lambda: self._waiting_for_quota(group))
        if verdict.decision.fits:
            self._hold_quota(group, self.quotas.hold(verdict, gang, now))
            self._charge_local_queue(group)
            if self._others_wait_in_line(queue):
                self._quota_freed = True  # the next in line, or the heads it went before, may go now
        return verdict

    def _composite_quota_verdict(self, children: list[GroupRecord], now: float) -> QuotaVerdict | None:
        """What the ClusterQueue answers for a composite's waiting children together, as one workload with a
        pod set per shape (Kueue's multi-pod-set workload): all of them reserve quota, or none. None when no
        child is quota-managed. The quota held for them is kept on the first child until they are placed."""
        queue = next((q for child in children if (q := self.quota_queue(child)) is not None), None)
        if queue is None:
            return next(filter(None, map(self._missing_local_queue, children)), None)
        lead = children[0]
        for child in children:
            if child.quota_hold is not None:
                hold = child.quota_hold
                decision = QuotaDecision(Mode.FIT, {}, hold.workload.usage)
                return QuotaVerdict(queue, decision, hold.node_selector)
        snapshot = self._quota_snapshot()
        gang, pending = self._holding(lead), [pod for child in children for pod in self._pending_pods(child)]
        verdict = self.quotas.verdict(snapshot, queue, gang, pending)
        verdict = self._unless_held_for_others(gang, pending, verdict)
        if verdict.decision.fits:
            request = self.quotas.request(queue, gang, pending, self.quota_local_queue(lead))
            ignored = {child.key for child in children}
            verdict = self.quotas.in_line(
                snapshot,
                verdict,
                request,
                lambda: [w for w in self._waiting_for_quota(lead) if w.name not in ignored],
            )
        if verdict.decision.fits:
            self._hold_quota(lead, self.quotas.hold(verdict, gang, now))
            self._charge_local_queue(lead)
        return verdict

    def _missing_local_queue(self, group: GroupRecord) -> QuotaVerdict | None:
        """A gang queued to a LocalQueue its namespace does not have waits, in Kueue's words, until it is
        created (a quota object's change wakes the gangs waiting for quota)."""
        if group.standalone:
            return None
        missing = self.quotas.missing_local_queue(group.obj, self.book.workload_of(group))
        if missing is None:
            return None
        decision = QuotaDecision(Mode.NO_FIT, {}, {}, message=f"LocalQueue {missing} doesn't exist")
        return QuotaVerdict("", decision, {}, ConditionReason.QUOTA_INADMISSIBLE)

    def _usage_decides_between_waiting_gangs(self) -> bool:
        """Whether gangs of two LocalQueues or more wait in one ClusterQueue that orders by usage: only then
        can a new sample change who goes first (waking gangs for nothing would tell each its wait again)."""
        local_queues: dict[str, set[str]] = {}
        for request in self._all_waiting_for_quota():
            if self.quotas.orders_by_usage(request.cluster_queue):
                local_queues.setdefault(request.cluster_queue, set()).add(request.local_queue)
        return any(len(queues) > 1 for queues in local_queues.values())

    def _charge_local_queue(self, group: GroupRecord) -> None:
        """Admission fair sharing: the quota just reserved counts for the gang's LocalQueue at once (Kueue's
        entry penalty), before the next sample of usage."""
        usage, hold = self.quotas.usage, group.quota_hold
        if usage is None or hold is None:
            return
        local_queue = self.quota_local_queue(group)
        if local_queue and self.quotas.orders_by_usage(hold.workload.cluster_queue):
            usage.admitted(local_queue, summed([hold.workload.usage]))

    def _sample_local_queues(self, now: float) -> list[LocalQueuesSampled]:
        """Admission fair sharing: every sampling interval, each LocalQueue's usage decays towards what its
        gangs hold now; gangs waiting for quota are tried again in the new order, and the LocalQueues'
        statuses are written."""
        usage = self.quotas.usage
        if usage is None or not usage.due(now):
            return []
        held: dict[str, list[Mapping[tuple[str, str], int]]] = {}
        for group in self.book.groups.values():
            if group.standalone or (not group.placed and group.quota_hold is None):
                continue
            local_queue = self.quota_local_queue(group)
            if local_queue:
                held.setdefault(local_queue, []).extend(w.usage for w in self._gang_usage(group))
        changed = usage.sample(now, {key: summed(usages) for key, usages in held.items()})
        if not changed:
            return []
        if self._usage_decides_between_waiting_gangs():
            self._quota_freed = True  # the order among them may have changed: they are tried again
        statuses = []
        for key in changed:
            queue = self.quotas.local_queues.get(key)
            status = usage.status(key)
            if queue is not None and status is not None:
                statuses.append((queue.namespace, queue.name, status))
        return [LocalQueuesSampled(tuple(statuses))] if statuses else []

    def _unless_held_for_others(
        self, gang: Holding, pending: list[ApiObject], verdict: QuotaVerdict
    ) -> QuotaVerdict:
        """A gang that preemption could admit, but that the quota held in memory for other gangs admitted and
        not placed yet alone keeps out, waits for them without asking the preemptor: the preemptor sees
        bindings alone, so it would find nothing to reclaim, or evict for a gang still not admitted after.
        (A gang asking holds nothing itself: one holding quota is not asked again until it lets it go.)"""
        if verdict.decision.mode is not Mode.PREEMPT:
            return verdict
        snapshot = self._quota_snapshot()
        root = snapshot.root_of(snapshot.cluster_queue_node(verdict.cluster_queue))
        if next(self._holders_in(snapshot, root), None) is None:
            return verdict
        without = self._quota_snapshot_without_holds()
        freed = self.quotas.verdict(without, verdict.cluster_queue, gang, pending)
        if not freed.decision.fits:
            return verdict
        if not freed.decision.borrows and (taken := self._reclaim_held(gang, pending, verdict)) is not None:
            return taken
        holders = sorted(self._holders_in(snapshot, root))
        message = (
            f"{verdict.decision.message}; the quota is held for gangs admitted but not placed yet: "
            f"{', '.join(holders)}"
        )
        return QuotaVerdict(verdict.cluster_queue, QuotaDecision(Mode.NO_FIT, {}, {}, message=message), {})

    def _holders_in(self, snapshot: QuotaSnapshot, root: Node) -> Iterator[str]:
        """Keys of the gangs holding quota (admitted, not placed) in queues of the cohort tree `root`, in no
        particular order (the first is found without walking them all; `_groups_holding_quota` drops the
        keys of groups that hold nothing any more)."""
        for key in self._quota_holders:
            other = self.book.groups.get(key)
            if other is None or other.quota_hold is None:
                continue
            queue = other.quota_hold.workload.cluster_queue
            if (
                queue in snapshot.cluster_queues
                and snapshot.root_of(snapshot.cluster_queue_node(queue)) == root
            ):
                yield key

    def _reclaim_held(
        self, gang: Holding, pending: list[ApiObject], verdict: QuotaVerdict
    ) -> QuotaVerdict | None:
        """A gang within its queue's nominal quota takes back what borrowing queues of its cohort hold for gangs
        admitted but not placed yet (the newest holds first, only as many as it needs), as Kueue reclaims from
        admitted workloads: they never ran, so they lose nothing but their place, and wait for quota again.
        None (nothing let go) when letting go of those holds would not admit it."""
        snapshot = self._quota_snapshot()
        trial = snapshot.copy()
        borrowing = set(
            snapshot.borrowing_queues(
                snapshot.root_of(snapshot.cluster_queue_node(verdict.cluster_queue)), verdict.decision.usage
            )
        )
        holders = sorted(
            (
                other
                for other in self._groups_holding_quota()
                if other.quota_hold is not None
                and other.quota_hold.workload.cluster_queue in borrowing
                and other.quota_hold.workload.cluster_queue != verdict.cluster_queue
            ),
            key=lambda other: (-other.quota_hold.since if other.quota_hold else 0.0, other.key),
        )
        let_go: list[GroupRecord] = []
        for other in holders:
            for workload in reversed(self._gang_usage(other)):
                trial.remove(workload)
            for workload in gang_usage(self._placed_usage(other), None):
                trial.add(workload)
            let_go.append(other)
            taken = self.quotas.verdict(trial, verdict.cluster_queue, gang, pending)
            if taken.decision.fits:
                for group in let_go:
                    self._hold_quota(group, None)
                return self.quotas.verdict(self._quota_snapshot(), verdict.cluster_queue, gang, pending)
        return None

    def _quota_snapshot_without_holds(self) -> QuotaSnapshot:
        """What the gangs' pods on nodes hold, without the quota held in memory for waiting pods: the
        preemptor's view. Kept until the usage changes (gangs waiting for quota ask it in turn)."""
        snapshot = self._quota_snapshot()
        usage = self._quota_usage
        assert usage is not None
        kept = self._without_holds
        if kept is not None and kept[0] is usage and kept[1] == usage.changes:
            return kept[2]
        without = snapshot.copy()
        for other in self._groups_holding_quota():
            for workload in reversed(self._gang_usage(other)):
                without.remove(workload)
            for workload in gang_usage(self._placed_usage(other), None):
                without.add(workload)
        self._without_holds = (usage, usage.changes, without)
        return without

    def _quota_pending(self, group: GroupRecord) -> list[ApiObject]:
        """The pods a quota request is made for: the group's waiting pods, or for a composite's child those
        of every child of its composite still waiting (they reserve quota together)."""
        composite = self.book.composite_of(group)
        if composite is None:
            return self._pending_pods(group)
        return [pod for child in self.book.children(composite) for pod in self._pending_pods(child)]

    def _waiting_for_quota(self, group: GroupRecord) -> list[WorkloadRequest]:
        """What the other gangs ready to run and holding no quota ask of their ClusterQueues (in no particular
        order: who goes first is decided by a total order on them). The list of them all is kept while no
        group and no quota object changed: in a busy pass most gangs that ask are told to wait."""
        return [request for request in self._all_waiting_for_quota() if request.name != group.key]

    def _all_waiting_for_quota(self) -> list[WorkloadRequest]:
        token = (self.book.revision, self.quotas.version)
        kept = self._all_waiting
        if kept is None or kept[0] != token:
            kept = self._all_waiting = (token, self._gangs_waiting_for_quota())
        return kept[1]

    def _gangs_waiting_for_quota(self) -> list[WorkloadRequest]:
        waiting = []
        for other in self.book.groups.values():
            if not other.pending or other.quota_hold is not None:
                continue
            if len(other.pending) + len(other.placed) < (other.min_count or 1):
                continue  # not all its pods are there yet: it could not be admitted whole
            request = self._waiting_request(other)
            if request is not None:
                waiting.append(request)
        if len(self._quota_requests) > 2 * len(self.book.groups) + 64:
            self._quota_requests = {k: v for k, v in self._quota_requests.items() if k in self.book.groups}
        return waiting

    def _waiting_request(self, group: GroupRecord) -> WorkloadRequest | None:
        """The gang's request for its waiting pods, kept while the group was not touched (its PodGroup, its
        Workload or its pods changed) and the quota objects are unchanged: a gang that fits asks for every
        other's, and parsing each one's pods anew made that quadratic in the gangs waiting."""
        token = (self.quotas.version, group.obj, self.book.changes.get(group.key, 0))
        kept = self._quota_requests.get(group.key)
        if kept is not None and kept[0] == token:
            return kept[1]
        queue = self.quota_queue(group)
        request = None
        if queue is not None:
            pending = self._pending_pods(group)
            request = self.quotas.request(queue, self._holding(group), pending, self.quota_local_queue(group))
        self._quota_requests[group.key] = (token, request)
        return request

    def _others_wait_in_line(self, queue: str) -> bool:
        # Under fair sharing loans wait for heads within their nominal quota too: any admission may end it.
        quota = self.quotas.cluster_queues.get(queue)
        return (
            (quota is not None and quota.strict_fifo)
            or self.quotas.fair_sharing
            or self.quotas.orders_by_usage(queue)
        )

    def _hold_quota(self, group: GroupRecord, hold: QuotaHold | None) -> None:
        if hold is not None or group.quota_hold is not None:
            group.quota_hold = hold
            self.book.touch(group.key)
            if hold is not None:
                self._quota_holders.add(group.key)

    def _groups_holding_quota(self) -> list[GroupRecord]:
        """The groups quota is held for, by key."""
        found = []
        for key in sorted(self._quota_holders):
            group = self.book.groups.get(key)
            if group is None or group.quota_hold is None:
                self._quota_holders.discard(key)
            else:
                found.append(group)
        return found

    def _quota_snapshot(self) -> QuotaSnapshot:
        """The quotas and what the gangs hold, brought up to date for the gangs that changed since it was
        last asked for (built anew when a quota object changed, a node's or Workload's labels may have, or
        too many gangs changed). Read it only: it is kept."""
        usage, touched = self._quota_usage, self.book.touched
        if usage is None or usage.version != self.quotas.version or touched is None:
            usage = self._quota_usage = QuotaUsage(self.quotas.empty_snapshot(), self.quotas.version)
            touched = set(self.book.groups)
        for key in touched:
            group = self.book.groups.get(key)
            usage.put(key, self._gang_usage(group) if group is not None else ())
        self.book.touched = set()
        return usage.snapshot

    def _gang_usage(self, group: GroupRecord) -> tuple[AdmittedWorkload, ...]:
        return gang_usage(self._placed_usage(group), group.quota_hold)

    def _placed_usage(self, group: GroupRecord) -> AdmittedWorkload | None:
        """What the gang's pods on nodes hold of its quota."""
        if not group.placed or group.standalone:
            return None
        found = self.quotas.admitted([self._holding(group)], self._node_labels)
        return found[0] if found else None

    def _let_go_of_quota(self, now: float) -> None:
        """Quota held for gangs still not placed after `quota_hold_s` is let go: they wait for it again."""
        for group in self._groups_holding_quota():
            hold = group.quota_hold
            if hold is not None and (not group.pending or now - hold.since >= self.settings.quota_hold_s):
                self._hold_quota(group, None)
                self._quota_freed = True

    def _next_quota_deadline(self) -> float | None:
        holds = [g.quota_hold.since for g in self._groups_holding_quota() if g.quota_hold is not None]
        deadlines = [min(holds) + self.settings.quota_hold_s] if holds else []
        usage = self.quotas.usage
        if usage is not None and usage.entries:  # the next sample of LocalQueue usage
            last = usage.last_sample
            deadlines.append(last + usage.config.sampling_interval_s if last is not None else self._now)
        return min(deadlines) if deadlines else None

    def quota_targets(self, group: GroupRecord) -> tuple[PreemptionTarget, ...] | None:
        """The gangs to preempt so that the group gets its quota, by its queue's preemption policies; None
        when quota is not what it waits for (not quota-managed, it fits, or nothing could free it)."""
        queue = self.quota_queue(group)
        if queue is None:
            return None
        snapshot = self._quota_snapshot()
        gang, pending = self._holding(group), self._quota_pending(group)
        verdict = self.quotas.verdict(snapshot, queue, gang, pending)
        if verdict.decision.mode is not Mode.PREEMPT:
            return None
        targets = self.quotas.targets(snapshot, verdict, gang, pending)
        composite = self.book.composite_of(group)
        together = {child.key for child in self.book.children(composite)} if composite else {group.key}
        waiting = [w for w in self._waiting_for_quota(group) if w.name not in together]
        request = self.quotas.request(queue, gang, pending)
        if targets and not admitted_after(
            snapshot, request, targets, waiting, fair_sharing=self.quotas.fair_sharing
        ):
            return ()  # the gang would still wait: evicting would free quota for others only
        return targets

    def reclaimable_by_placement(self, group: GroupRecord, priority: int) -> Iterator[AdmittedWorkload]:
        """The gangs of borrowing queues whose room the group may take back though its quota fits
        (`libs.core.quota.preemption.reclaimable_by_placement`): counted with the quota the scheduler holds
        for it, or, in the preemptor, which holds none for it, with what its queue would give it."""
        queue = self.quota_queue(group)
        if queue is None:
            return iter(())
        snapshot = self._quota_snapshot()
        hold = group.quota_hold
        if hold is not None:
            return reclaimable_by_placement(snapshot, queue, hold.workload.usage.keys(), priority)
        decision = self.quotas.verdict(
            snapshot, queue, self._holding(group), self._quota_pending(group)
        ).decision
        if not decision.fits or decision.borrows:
            return iter(())
        return reclaimable_by_placement(snapshot, queue, decision.usage.keys(), priority)

    def spared_by_quota(self, group: GroupRecord, priority: int) -> Iterator[AdmittedWorkload]:
        """The gangs the group may not preempt by priority (`libs.core.quota.preemption.spared_by_quota`);
        none when it is not quota-managed."""
        queue = self.quota_queue(group)
        if queue is None:
            return iter(())
        return spared_by_quota(self._quota_snapshot(), queue, priority)

    def borrowers_by_share(self, queues: Iterable[str]) -> list[str]:
        """These ClusterQueues, the highest dominant resource share first."""
        return borrowers_by_share(self._quota_snapshot(), queues)

    def reclaims_room(self, group: GroupRecord, priority: int) -> bool:
        """Whether placement-aware reclaim could free room for the group."""
        return next(self.reclaimable_by_placement(group, priority), None) is not None

    def hold_reclaimed_quota(self, group: GroupRecord, now: float) -> None:
        """Hold the quota a reclaim freed for the group (its victims are on their way out) until it is placed,
        as the scheduler will once it admits it: the preemptor must not hand that quota out again meanwhile."""
        queue = self.quota_queue(group)
        if queue is None:
            return
        gang, pending = self._holding(group), self._quota_pending(group)
        verdict = self.quotas.verdict(self._quota_snapshot(), queue, gang, pending)
        if verdict.decision.fits:
            self._hold_quota(group, self.quotas.hold(verdict, gang, now))

    def let_go_of_reclaimed_quota(self, group: GroupRecord) -> None:
        self._hold_quota(group, None)

    def _waits_for_quota(
        self, group: GroupRecord, core: PodGroup, verdict: QuotaVerdict, now: float, *, asks: bool = True
    ) -> CycleRan:
        """The gang waits gated for quota; when preemption could free it, the preemptor is asked (unless
        `asks` is off: a composite's other children, whose quota the asking one asks for)."""
        self.queue.wait_for_quota(group.key, verdict.message)
        group.attempts += 1
        reclaims = asks and verdict.decision.mode is Mode.PREEMPT
        return CycleRan(
            group=self._ref(group),
            attempt=group.attempts,
            pods=len(group.pending),
            min_count=group.min_count or 1,
            decision=nothing_placed(core, self.book.pending_requests(group), verdict.message, now),
            cycle_ms=0.0,
            cause=group.cause,
            preemption_priority=self._reclaim_wanted(group, core.priority) if reclaims else None,
            condition_false=not group.scheduled,
            quota_message=verdict.decision.message,
            quota_reason=verdict.reason,
        )

    def _reclaim_wanted(self, group: GroupRecord, priority: int) -> int | None:
        """Ask the preemptor for quota once per change of the world (its policies, not priorities alone,
        decide whom it may preempt), and not while room is nominated for the group."""
        if group.preemption_asked == self._preemption_generation or group.key in self._nominations:
            return None
        group.preemption_asked = self._preemption_generation
        return priority

    def _holding(self, group: GroupRecord) -> Holding:
        pods = tuple(
            (self.book.pods[uid].obj, node)
            for uid in sorted(group.placed)
            if (node := self.book.pods[uid].node) is not None
        )
        priority = int(group.obj.spec.get("priority") or 0)
        return Holding(group.key, group.obj, self.book.workload_of(group), priority, pods)

    def _pending_pods(self, group: GroupRecord) -> list[ApiObject]:
        return [self.book.pods[uid].obj for uid in sorted(group.pending)]

    def _node_labels(self, node: str) -> Mapping[str, str] | None:
        return self.snapshot.node_state(node).labels if node in self.snapshot else None
