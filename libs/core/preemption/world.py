"""The preemptor's state machine: the cluster as the scheduler sees it, the candidates, the nominations in
force, and the preemption requests waiting for an answer; no I/O, time passed in.

The cluster is tracked by a `SchedulerStateMachine` that is never asked to run a pass: it is told what
the scheduler bound (`PodsBound`) and everything the scheduler is told, so its snapshot and its pod book
are the scheduler's. `run_pass(now)` answers the requests on that state (recomputed, never on what the
request said) and ends the nominations that expired or can no longer be kept (a node gone, or the room
taken by pods bound there since).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from libs.core.dra.allocator import ClaimAllocation
from libs.core.quota import AdmittedWorkload, PreemptionTarget
from libs.core.quota import PreemptionReason as QuotaPreemption
from libs.core.scheduling import MachineSettings, SchedulerStateMachine
from libs.core.scheduling.book import TERMINAL, GroupRecord, PodRecord
from libs.core.scheduling.inputs import (
    Input,
    ObjectRemoved,
    ObjectStored,
    PodsBound,
    PodsEvicted,
    PodsFinished,
    World,
)
from libs.core.scheduling.nominations import NOMINATED_PREFIX
from libs.core.scheduling.objects import STANDALONE_PREFIX, completion_index
from libs.core.scheduling.outputs import GroupRef
from libs.core.scheduling.quotas import preemption_message, quota_preemption_message
from libs.core.scheduling.snapshot import PlacementConflict

from .candidates import CandidateIndex
from .model import (
    PREEMPT_NEVER,
    DisruptionMode,
    PreemptionDecision,
    PreemptionReason,
    Preemptor,
    RunningPod,
    SearchSettings,
    UnitOwner,
    Victim,
)
from .room import put_back, take_out
from .search import find_victims


class NominationEndReason:
    EXPIRED = "Expired"
    DELETED = "PodGroupDeleted"
    INFEASIBLE = "Infeasible"
    SCHEDULED = "Scheduled"


@dataclass(frozen=True, slots=True)
class PreemptorSettings:
    nomination_ttl_s: float = 60.0
    """How long room made for a preemptor is held for it."""
    search: SearchSettings = field(default_factory=SearchSettings)
    max_requests_per_pass: int = 64
    """Requests answered in one pass (the rest in the next), so that a pass's write stays short."""
    fair_sharing: bool = False
    """Kueue's `fairSharing.enable`, as the scheduler has it: quota preemption follows the fair-sharing
    strategies."""


@dataclass(frozen=True, slots=True)
class Preempted:
    """A request answered: the victims to evict (possibly none, then `decision.reason` says why) and,
    with victims, the nomination that holds the freed room until `expires_at`."""

    preemptor: GroupRef
    priority: int
    decision: PreemptionDecision
    expires_at: float | None
    cause: str | None
    search_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class NominationEnded:
    """A nomination is over: expired or infeasible (announced with `podgroup.nomination_cleared`), or the
    group was scheduled (its row is only removed)."""

    group: GroupRef
    reason: str
    message: str
    announce: bool
    cause: str | None = None


PreemptionOutput = Preempted | NominationEnded


@dataclass(slots=True)
class _Nomination:
    group: GroupRef
    nodes: tuple[str, ...]
    expires_at: float
    claims: Mapping[str, tuple[ClaimAllocation, ...]] = field(default_factory=dict)
    """The allocations the search found for the group's claims (unknown to a new term: none)."""


class PreemptorStateMachine:
    """Inputs through `handle` (the scheduler's inputs plus `PodsBound`), requests through `request`,
    decisions from `run_pass`. `timer`, when given, times each search (a measurement only)."""

    def __init__(
        self, settings: PreemptorSettings | None = None, *, timer: Callable[[], float] | None = None
    ) -> None:
        self.settings = settings or PreemptorSettings()
        self.cluster = SchedulerStateMachine(MachineSettings(fair_sharing=self.settings.fair_sharing))
        self.candidates = CandidateIndex(self.cluster.snapshot.topology_keys)
        self._timer = timer
        self._requests: dict[str, str | None] = {}
        self._nominations: dict[str, _Nomination] = {}
        self._leaving: set[str] = set()
        self._ended: list[NominationEnded] = []
        self._recheck: set[str] = set()
        """Nominations whose nodes something was bound on since the last pass."""

    # -- loading ------------------------------------------------------------------------------------------

    def load(self, world: World, *, now: float, unschedulable: Iterable[str] = ()) -> None:
        """The cluster a new term starts from (the scheduler's world), and the nominations in force.

        `unschedulable` are the uids of PodGroups the scheduler found unschedulable: a request made to an
        earlier term may not have been answered, and the scheduler asks once, so each of them whose
        priority is above some running pod's is asked for again (answered quietly when nothing can be
        done)."""
        self.cluster.load(world, now=now)
        self.cluster.drop_outputs()
        for state in self.cluster.snapshot.node_states():
            self.candidates.put_node(state.name, state.labels)
        for pod in self.cluster.book.pods.values():
            if pod.evicting and pod.node is not None and pod.phase not in TERMINAL:
                self._leaving.add(pod.uid)
            else:
                self._run(pod, pod.obj.created_at)
        for record in world.nominations:
            group = self._group_by_uid(record.podgroup_uid)
            if group is not None and record.expires_at > now:
                self._nominations[group.uid] = _Nomination(_ref(group), record.nodes, record.expires_at)
                if group.pending:
                    self.cluster.hold_reclaimed_quota(group, now)
        lowest = self.cluster.book.lowest_running_priority()
        book = self.cluster.book
        for uid in sorted(unschedulable):
            group = self._group_by_uid(uid)
            if group is None or not group.pending or lowest is None:
                continue
            priority = book.core_group(group).priority
            if priority > lowest or self.cluster.reclaims_room(group, priority):
                self._requests.setdefault(uid, None)

    # -- inputs -------------------------------------------------------------------------------------------

    def handle(self, event: Input, *, now: float) -> None:
        self.cluster.handle(event, now=now)
        self.cluster.drop_outputs()
        if isinstance(event, PodsBound):
            for uid, node, _ in event.placements:
                pod = self.cluster.book.pods.get(uid)
                if pod is not None:
                    self._run(pod, now)
                    self._scheduled(pod.group_key)
                    self._recheck_nominations(node, pod.group_key)
        elif isinstance(event, PodsFinished):
            for uid in event.uids:
                self._gone(uid)
            for key in {
                self.cluster.book.pods[u].group_key for u in event.uids if u in self.cluster.book.pods
            }:
                self._sync_group(key)
        elif isinstance(event, PodsEvicted):
            self._sync(event.uids)
        elif isinstance(event, ObjectStored):
            self._stored(event)
        elif isinstance(event, ObjectRemoved):
            self._removed(event)

    def request(self, podgroup_uid: str, cause: str | None) -> None:
        """The scheduler asks for room for a group (answered by the next pass)."""
        self._requests.setdefault(podgroup_uid, cause)

    def _stored(self, event: ObjectStored) -> None:
        obj = event.obj
        if obj.kind == "Node":
            state = self.cluster.snapshot.nodes_by_name.get(obj.name)
            if state is not None:
                self.candidates.put_node(state.name, state.labels)
                self._recheck_nominations(obj.name, None)
        elif obj.kind == "Pod":
            self._sync((obj.uid,))
        elif obj.kind == "PodGroup":
            self._owner_changed(obj.key)

    def _owner_changed(self, key: str) -> None:
        """A PodGroup with running pods was updated (an elastic gang's minCount): its owner is filed anew."""
        group = self.cluster.book.groups.get(key)
        if group is not None and not group.standalone and key in self.candidates.owners:
            self.candidates.put_owner(_group_owner(group))

    def _removed(self, event: ObjectRemoved) -> None:
        if event.kind == "Pod":
            self._gone(event.uid)
        elif event.kind == "Node":
            for pod in self.candidates.remove_node(event.name):
                self._leaving.discard(pod.uid)
        elif event.kind == "PodGroup":
            nomination = self._nominations.get(event.uid)
            if nomination is not None:
                self._end(nomination, NominationEndReason.DELETED, "the PodGroup was deleted", True)
            self._requests.pop(event.uid, None)

    # -- the pass -----------------------------------------------------------------------------------------

    def run_pass(self, now: float) -> list[PreemptionOutput]:
        """Nominations that ended, then one decision per request, in the order they came."""
        self._expire(now)
        outputs: list[PreemptionOutput] = list(self._ended)
        self._ended = []
        taken = list(self._requests.items())[: self.settings.max_requests_per_pass]
        for uid, _ in taken:
            del self._requests[uid]
        for uid, cause in taken:
            answered = self._answer(uid, cause, now)
            if answered is not None:
                outputs.append(answered)
        return outputs

    def next_wakeup(self) -> float | None:
        if self._requests:
            return 0.0
        return min((n.expires_at for n in self._nominations.values()), default=None)

    @property
    def nominations(self) -> dict[str, tuple[str, ...]]:
        """Nominated nodes per PodGroup uid (for tests and diagnostics)."""
        return {uid: nomination.nodes for uid, nomination in self._nominations.items()}

    def _answer(self, uid: str, cause: str | None, now: float) -> Preempted | None:
        group = self._group_by_uid(uid)
        if group is None or uid in self._nominations:
            return None
        book = self.cluster.book
        core = self.cluster.cycle_group(group)
        pending = [book.pods[pod_uid] for pod_uid in sorted(group.pending)]
        preemptor = Preemptor(
            core,
            [pod.request for pod in pending],
            bound_pods=len(group.placed),
            never=group.obj.spec.get("preemptionPolicy") == PREEMPT_NEVER
            or any(pod.obj.spec.get("preemptionPolicy") == PREEMPT_NEVER for pod in pending),
            spared=frozenset(self._owner_keys(self.cluster.spared_by_quota(group, core.priority))),
        )
        started = self._timer() if self._timer is not None else 0.0
        targets = self.cluster.quota_targets(group)
        if targets is not None:
            decision = self._reclaim(group, targets)
        else:
            decision = self._search(preemptor, now, self._borrowers(group, core.priority))
        search_ms = (self._timer() - started) * 1000 if self._timer is not None else 0.0
        expires_at = None
        if decision.victims:
            expires_at = now + self.settings.nomination_ttl_s
            self._evict(decision, now)
            self._nominations[uid] = _Nomination(_ref(group), decision.nodes, expires_at, decision.claims)
            if targets is not None:
                self.cluster.hold_reclaimed_quota(group, now)
        return Preempted(_ref(group), core.priority, decision, expires_at, cause, search_ms)

    def _search(self, preemptor: Preemptor, now: float, borrowers: Mapping[str, int]) -> PreemptionDecision:
        """The search on the snapshot as it will be: pods on their way out gone, the room nominated for
        other groups held for them; the gangs of `borrowers` (placement-aware reclaim) are candidates
        whatever their priority."""
        snapshot = self.cluster.snapshot
        leaving = take_out(snapshot, sorted(self._leaving), self._groups_leaving())
        held = self._hold_nominated(preemptor.group.uid)
        lowered = self.candidates.rank_below(borrowers, preemptor.group.priority)
        try:
            found = find_victims(snapshot, self.candidates, preemptor, now=now, settings=self.settings.search)
        finally:
            self.candidates.restore(lowered)
            self._let_go(held)
            put_back(snapshot, [leaving])
        return self._reclaimed(found, lowered, preemptor.group.uid) if lowered else found

    def _borrowers(self, group: GroupRecord, priority: int) -> dict[str, int]:
        """The running gangs the group may take room from though their priority is not lower, by owner key,
        with the priority the search ranks them at: below the group's, the gangs of the queue with the
        highest dominant resource share lowest, so that they go first (as Kueue's fair sharing picks the
        queue to preempt from)."""
        workloads = list(self.cluster.reclaimable_by_placement(group, priority))
        order = self.cluster.borrowers_by_share({w.cluster_queue for w in workloads})
        ranks = {w.name: priority - len(order) + order.index(w.cluster_queue) for w in workloads}
        return {key: ranks[name] for name, key in self._owner_keys_by_gang(ranks).items()}

    def _owner_keys(self, workloads: Iterable[AdmittedWorkload]) -> Iterable[str]:
        return self._owner_keys_by_gang(w.name for w in workloads).values()

    def _owner_keys_by_gang(self, gangs: Iterable[str]) -> dict[str, str]:
        """The candidate owner of each running gang (its CompositePodGroup when they go together)."""
        book, found = self.cluster.book, {}
        for name in gangs:
            gang = book.groups.get(name)
            if gang is not None and gang.placed:
                owner = self._composite_owner(gang)
                found[name] = owner.key if owner is not None else gang.key
        return found

    def _reclaimed(
        self, decision: PreemptionDecision, lowered: Iterable[UnitOwner], preemptor_uid: str
    ) -> PreemptionDecision:
        """The search's victims with their own priority again; those it could take for placement-aware
        reclaim alone are told so in Kueue's words."""
        reclaimed = {owner.key for owner in lowered}
        message = quota_preemption_message(QuotaPreemption.IN_COHORT_RECLAMATION, preemptor_uid)
        victims = []
        for victim in decision.victims:
            key = victim.owner.key
            victims.append(
                dataclasses.replace(
                    victim,
                    owner=self.candidates.owners.get(key, victim.owner),
                    pods=tuple(self.candidates.pods.get(pod.uid, pod) for pod in victim.pods),
                    message=message if key in reclaimed else victim.message,
                )
            )
        return dataclasses.replace(decision, victims=tuple(victims))

    def _reclaim(self, group: GroupRecord, targets: tuple[PreemptionTarget, ...]) -> PreemptionDecision:
        """Quota the group's ClusterQueue needs, freed by preempting the target gangs whole (Kueue's
        policies chose them); the room they leave is the cycle's to find."""
        victims = tuple(
            victim for target in targets if (victim := self._whole_gang(target, group.uid)) is not None
        )
        if len(victims) < len(targets):
            victims = ()  # a target it cannot evict: the others alone would not get the gang admitted
        queue = self.cluster.quota_queue(group) or ""
        reason = (
            PreemptionReason.RECLAIMING.format(groups=len(victims), queue=queue)
            if victims
            else PreemptionReason.NOTHING_TO_RECLAIM.format(queue=queue)
        )
        return PreemptionDecision(group.key, victims, None, (), reason)

    def _whole_gang(self, target: PreemptionTarget, preemptor_uid: str) -> Victim | None:
        gang = self.cluster.book.groups.get(target.workload.name)
        if gang is None:
            return None
        owner = _group_owner(gang)
        book = self.cluster.book
        pods = tuple(
            RunningPod(placement, gang.namespace, owner.key, owner.priority, book.pods[uid].obj.created_at)
            for uid in sorted(gang.placed)
            if (placement := self.cluster.snapshot.placement(uid)) is not None
        )
        message = preemption_message(target, preemptor_uid)
        return Victim(owner, pods, whole=True, message=message) if pods else None

    def _groups_leaving(self) -> list[str]:
        """PodGroups whose every pod holding room is on its way out: their own claims go with them."""
        book, claims = self.cluster.book, self.cluster.claims
        keys = {book.pods[uid].group_key for uid in self._leaving if uid in book.pods}
        return sorted(
            key
            for key in keys
            if claims.holds(key)
            and all(
                pod.uid in self._leaving
                for pod in book.members(key)
                if pod.node is not None and pod.phase not in TERMINAL
            )
        )

    def _hold_nominated(self, preemptor_uid: str) -> list[str]:
        held: list[str] = []
        for uid, nomination in self._nominations.items():
            group = self._group_by_uid(uid)
            if uid == preemptor_uid or group is None:
                continue
            held += self._hold_stand_ins(group, nomination.nodes)
            for owner, allocations in self._claims_to_come(group, nomination).items():
                self.cluster.claims.hold(NOMINATED_PREFIX + owner, allocations)
                held.append(NOMINATED_PREFIX + owner)
        return held

    def _claims_to_come(
        self, group: GroupRecord, nomination: _Nomination
    ) -> dict[str, tuple[ClaimAllocation, ...]]:
        """The allocations found for the claims of the group's waiting pods and, until they are allocated,
        of the group itself, by owner (pod uid, or group key)."""
        found = nomination.claims
        to_come = {uid: found[uid] for uid in sorted(group.pending) if uid in found}
        if "" in found and not self.cluster.claims.holds(group.key):
            to_come[group.key] = found[""]
        return to_come

    def _let_go(self, held: Iterable[str]) -> None:
        """Give back the room and the claims stand-ins held."""
        for uid in set(held):
            self.cluster.snapshot.unbind(uid)
            self.cluster.claims.release(uid)

    def _hold_stand_ins(self, group: GroupRecord, nodes: tuple[str, ...]) -> list[str]:
        """Stand-ins of the group's waiting pods bound on the nominated nodes, where they fit: their uids."""
        held: list[str] = []
        for pod_uid in sorted(group.pending):
            request = self.cluster.book.pods[pod_uid].request
            stand_in = dataclasses.replace(request, uid=NOMINATED_PREFIX + pod_uid)
            for node in nodes:
                try:
                    self.cluster.snapshot.bind(stand_in, node)
                except (PlacementConflict, KeyError):
                    continue
                held.append(stand_in.uid)
                break
        return held

    def _evict(self, decision: PreemptionDecision, now: float) -> None:
        """Victims are leaving from now on: no later search counts them again."""
        uids = tuple(pod.uid for victim in decision.victims for pod in victim.pods)
        self.cluster.handle(PodsEvicted(uids), now=now)
        for uid in uids:
            self.candidates.remove(uid)
            self._leaving.add(uid)

    def _expire(self, now: float) -> None:
        recheck, self._recheck = self._recheck, set()
        for nomination in list(self._nominations.values()):
            if nomination.expires_at <= now:
                message = f"the room held on {', '.join(nomination.nodes)} was not taken in time"
                self._end(nomination, NominationEndReason.EXPIRED, message, True)
            elif any(node not in self.cluster.snapshot for node in nomination.nodes):
                lost = [node for node in nomination.nodes if node not in self.cluster.snapshot]
                message = f"nominated node(s) {', '.join(lost)} left the cluster"
                self._end(nomination, NominationEndReason.INFEASIBLE, message, True)
            elif nomination.group.uid in recheck and not self._room_kept(nomination):
                message = f"the room held on {', '.join(nomination.nodes)} no longer holds the group"
                self._end(nomination, NominationEndReason.INFEASIBLE, message, True)

    def _recheck_nominations(self, node: str, bound_group: str | None) -> None:
        """Something was bound on a node (or the node changed): the nominations there are checked on the
        next pass, but not the one of the group bound."""
        for uid, nomination in self._nominations.items():
            if node in nomination.nodes and self.cluster.book.group_uids.get(uid) != bound_group:
                self._recheck.add(uid)

    def _room_kept(self, nomination: _Nomination) -> bool:
        """Whether the nominated nodes still hold every waiting pod of the group once the pods on their way
        out are gone, and the shares found for its claims are still free (whole devices by count: the
        cheap check, not the group's scheduling cycle)."""
        group = self._group_by_uid(nomination.group.uid)
        if group is None or not group.pending:
            return True
        snapshot = self.cluster.snapshot
        leaving = take_out(snapshot, sorted(self._leaving), self._groups_leaving())
        held: list[str] = []
        try:
            held = self._hold_stand_ins(group, nomination.nodes)
            to_come = self._claims_to_come(group, nomination).values()
            allocations = [allocation for found in to_come for allocation in found]
            return len(held) == len(group.pending) and self.cluster.claims.usage.check(allocations) is None
        finally:
            self._let_go(held)
            put_back(snapshot, [leaving])

    def _end(self, nomination: _Nomination, reason: str, message: str, announce: bool) -> None:
        self._nominations.pop(nomination.group.uid, None)
        group = self._group_by_uid(nomination.group.uid)
        if group is not None:
            self.cluster.let_go_of_reclaimed_quota(group)
        self._ended.append(NominationEnded(nomination.group, reason, message, announce))

    def _scheduled(self, group_key: str) -> None:
        group = self.cluster.book.groups.get(group_key)
        if group is None or group.pending:
            return
        nomination = self._nominations.get(group.uid)
        if nomination is not None:
            self._end(nomination, NominationEndReason.SCHEDULED, "the group was bound", False)

    # -- candidates ---------------------------------------------------------------------------------------

    def _run(self, pod: PodRecord, started_at: float) -> None:
        """A pod holding room becomes a candidate (of its owner, which is filed with it)."""
        if pod.node is None or pod.phase in TERMINAL or pod.evicting:
            return
        placement = self.cluster.snapshot.placement(pod.uid)
        group = self.cluster.book.groups.get(pod.group_key)
        if placement is None or group is None:
            return
        owner = self._composite_owner(group) or _owner(group, pod)
        self.candidates.put_owner(owner)
        self.candidates.add(
            RunningPod(
                placement,
                pod.obj.namespace,
                owner.key,
                owner.priority,
                started_at,
                completion_index(pod.obj),
            )
        )

    def _composite_owner(self, group: GroupRecord) -> UnitOwner | None:
        """The CompositePodGroup a child's pods go with, when its children may only be disrupted together
        (`disruptionMode: {all: {}}`, or unset): the whole composite is one unit."""
        key = self.cluster.book.composite_of(group)
        composite = self.cluster.book.composites.get(key) if key is not None else None
        if composite is None or (composite.spec.get("disruptionMode") or {}).get("single") is not None:
            return None
        priority = composite.spec.get("priority")
        if priority is None:
            priority = group.obj.spec.get("priority")
        return UnitOwner(
            composite.key,
            composite.namespace,
            composite.name,
            composite.uid,
            int(priority or 0),
            DisruptionMode.POD_GROUP,
            0,
        )

    def _gone(self, uid: str) -> None:
        self.candidates.remove(uid)
        self._leaving.discard(uid)

    def _sync(self, uids: Iterable[str]) -> None:
        """Pods the cluster now knows to be leaving (evicted, deleted, restarted) are candidates no more."""
        for uid in uids:
            pod = self.cluster.book.pods.get(uid)
            if pod is None or pod.phase in TERMINAL:
                self._gone(uid)
            elif pod.evicting:
                self.candidates.remove(uid)
                if pod.node is not None:
                    self._leaving.add(uid)

    def _sync_group(self, key: str) -> None:
        self._sync([pod.uid for pod in self.cluster.book.members(key)])

    def _group_by_uid(self, uid: str) -> GroupRecord | None:
        key = self.cluster.book.group_uids.get(uid)
        return self.cluster.book.groups.get(key) if key is not None else None


def _owner(group: GroupRecord, pod: PodRecord) -> UnitOwner:
    if group.standalone:
        return UnitOwner(
            group.key,
            group.namespace,
            group.name.removeprefix(STANDALONE_PREFIX),
            group.uid,
            pod.priority,
            DisruptionMode.POD,
            0,
            standalone=True,
        )
    return _group_owner(group)


def _group_owner(group: GroupRecord) -> UnitOwner:
    spec = group.obj.spec
    mode = DisruptionMode.POD_GROUP if spec.get("disruptionMode") == "PodGroup" else DisruptionMode.POD
    return UnitOwner(
        group.key,
        group.namespace,
        group.name,
        group.uid,
        int(spec.get("priority") or 0),
        mode,
        group.min_count or 0,
    )


def _ref(group: GroupRecord) -> GroupRef:
    return GroupRef(group.namespace, group.name, group.uid, group.standalone)
