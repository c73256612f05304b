"""What the scheduler state machine holds, and the rules all of it shares: when a PodGroup is queued, and
which parked groups a change wakes.

The machine is built in layers, each a class that adds one concern's rules to the layers it uses, all on the
one state set up here:

- `ClaimHolds` (`claim_holds.py`): what pods' claims ask for, allocations held, claims pods name;
- `Nominations` (`nominations.py`): asking the preemptor, and the room it nominates;
- `ClaimProposals` (`claim_proposals.py`, on `ClaimHolds`): placements waiting for their claims;
- `Disruptions` (`disruptions.py`, on the two above): node health and loss, gang restarts, disruption and
  time-outs;
- `ObjectChanges` (`object_changes.py`): objects stored and removed, pods finished;
- `WorldRestore` (`world_restore.py`): the world a new leader loads;
- `QuotaReservations` (`quota_reservations.py`): quota reserved in a gang's ClusterQueue before its cycle;
- `SchedulerStateMachine` (`machine.py`), on top: the inputs' dispatch, the pass, its cycles and bindings.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from libs.core.quota import QuotaSnapshot, WorkloadRequest
from libs.core.quota.admission_fair_sharing import AdmissionFairSharing

from .book import GroupRecord, PodBook, PodRecord
from .claims import ClaimsView
from .hints import FreedCapacity, capacity_hint
from .inventory import NodeInventory
from .node_health import NodeHealth, NodeHealthSettings
from .objects import ApiObject
from .outputs import GroupRef, Output
from .queue import QueueState, SchedulingQueue
from .quotas import QuotaLedger, QuotaUsage
from .snapshot import ClusterSnapshot


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
    quota_hold_s: float = 300.0
    """How long quota reserved for a gang stays reserved while the gang is not placed (then it is let go,
    and the gang waits for quota again): a gang never holds quota unplaced for longer."""
    fair_sharing: bool = False
    """Kueue's `fairSharing.enable`: heads of a cohort compete by dominant resource share, and preemption
    follows the fair-sharing strategies."""
    admission_fair_sharing: AdmissionFairSharing | None = None
    """Kueue's `admissionFairSharing`: in ClusterQueues with `UsageBasedAdmissionFairSharing`, the workloads of
    the LocalQueue that used the least lately go first. None: off."""


@dataclass(slots=True)
class WakeStats:
    """How selective the queueing hints were: releases of capacity, and parked groups each woke."""

    capacity_releases: int = 0
    wakeups: int = 0


@dataclass(frozen=True, slots=True)
class NominatedRoom:
    """The nodes the preemptor nominated for a PodGroup, and until when they are held for it."""

    nodes: tuple[str, ...]
    expires_at: float


class MachineState:
    """What every layer of the machine reads and changes: nodes, pods and PodGroups as the scheduler last
    heard of them, one snapshot, one queue, and what is waited for or remembered between passes."""

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
        self._nominations: dict[str, NominatedRoom] = {}
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
        self.quotas = QuotaLedger(
            fair_sharing=self.settings.fair_sharing, admission=self.settings.admission_fair_sharing
        )
        self._quota_usage: QuotaUsage | None = None
        """What the gangs hold, kept between passes; None: built anew when next asked for."""
        self._quota_holders: set[str] = set()
        """Keys of the groups that quota is held for (`GroupRecord.quota_hold`), so that finding them does not
        walk every group (a key whose group is gone, or holds nothing now, is dropped when found)."""
        self._without_holds: tuple[QuotaUsage, int, QuotaSnapshot] | None = None
        """The quota usage without the holds, and the usage and change it was derived from."""
        self._quota_requests: dict[str, tuple[object, WorkloadRequest | None]] = {}
        self._all_waiting: tuple[tuple[int, int], list[WorkloadRequest]] | None = None
        """The requests of every gang waiting for quota, and the book's and quotas' versions they are of."""
        """What each gang waiting for quota asks, and what it was made from (`_waiting_request`)."""
        self._quota_freed = False
        """Quota may have come free since the last pass (pods ended or left, a gang or a queue changed): the
        groups waiting for quota are tried again."""
        self._preemptable_from: int | None = None
        """The lowest priority of the pods bound since the last pass: units a parked group of a higher
        priority may now preempt."""

    def _forget_quota_usage(self) -> None:
        """What the gangs hold is built anew when next asked for (`QuotaReservations`)."""
        self._quota_usage = None
        self.book.touched = None

    # -- queueing -----------------------------------------------------------------------------------------

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

    def _group_by_uid(self, uid: str) -> GroupRecord | None:
        key = self.book.group_uids.get(uid)
        return self.book.groups.get(key) if key is not None else None

    @staticmethod
    def _ref(group: GroupRecord) -> GroupRef:
        return GroupRef(group.namespace, group.name, group.uid, group.standalone)

    def quota_queue(self, group: GroupRecord) -> str | None:
        """The ClusterQueue the group reserves quota in; None when it is not quota-managed."""
        if group.standalone:
            return None
        return self.quotas.cluster_queue_for(group.obj, self.book.workload_of(group))

    def quota_local_queue(self, group: GroupRecord) -> str:
        """The key of the LocalQueue the group is queued through ("" when none)."""
        if group.standalone:
            return ""
        queue = self.quotas.local_queue_for(group.obj, self.book.workload_of(group))
        return queue.key if queue is not None else ""

    # -- wake-ups -----------------------------------------------------------------------------------------

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
