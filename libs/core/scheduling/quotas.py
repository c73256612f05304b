"""Quota reservation before placement (docs/quotas.md): Kueue's objects as stored, the ClusterQueue a gang
reserves quota in, and the quota gangs hold.

A gang holds its reservation while pods of it hold nodes and are not leaving; its usage is those pods'
requests, each resource counted in the flavor (of the queue's resource group covering it) whose node labels
the pod's node carries. The flavor's labels constrain the placement, so that is the flavor the gang was
admitted in; and a new leader, or the preemptor's view of the cluster, finds the same usage in the stored
objects alone, with no record of the reservation to keep in step. A gang admitted but not placed yet holds
the quota it was admitted with (`QuotaHold`, in memory) for a bounded time."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from libs.api.models.core import Toleration
from libs.api.models.kueue import (
    DEFAULT_LOCAL_QUEUE,
    QUEUE_NAME_LABEL,
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
)
from libs.api.quantity import canonical_amount
from libs.core.quota import (
    AdmittedWorkload,
    ClusterQueueQuota,
    PodSetRequest,
    PreemptionReason,
    PreemptionTarget,
    QuotaDecision,
    QuotaSnapshot,
    WorkloadRequest,
    admit,
    preemption_targets,
)
from libs.core.quota.admission_fair_sharing import AdmissionFairSharing, UsageLedger, parse_status
from libs.core.quota.inputs import cluster_queue_of, cohort_of, flavor_of, local_queue_of
from libs.core.quota.model import CohortQuota, Flavor, FlavorResource, LocalQueueQuota, Mode
from libs.core.quota.ordering import goes_first

from .lifecycle import ConditionReason
from .model import PodRequest
from .objects import ApiObject

QUOTA_KINDS: Final = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")
"""Kueue's kinds, in the order a world is loaded (`inputs.WORLD_KINDS`)."""

SHAPES_KEPT: Final = 200_000
"""Pods whose shape is kept (`QuotaLedger._pod_shape`); beyond, the cache starts again."""

POD_SET: Final = "main"
"""The pod set a gang's pods make (Kueue names a Job's single pod set `main`)."""

_HUMAN_REASONS: Final = {
    PreemptionReason.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    PreemptionReason.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    PreemptionReason.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

NodeLabels = Callable[[str], Mapping[str, str] | None]


@dataclass(frozen=True, slots=True)
class QuotaVerdict:
    """What a gang's ClusterQueue answers: the decision (Fit, Preempt, NoFit) and the node labels of the
    flavors it was assigned, which its pods must be placed on."""

    cluster_queue: str
    decision: QuotaDecision
    node_selector: Mapping[str, str]
    reason: ConditionReason = ConditionReason.QUOTA_PENDING
    """`QuotaReserved`'s reason while the gang waits."""

    @property
    def message(self) -> str:
        """Why it waits, in Kueue's words (no ClusterQueue: its LocalQueue does not exist)."""
        if not self.cluster_queue:
            return f"waiting for quota: {self.decision.message}"
        return f"waiting for quota in ClusterQueue {self.cluster_queue}: {self.decision.message}"


@dataclass(frozen=True, slots=True)
class QuotaHold:
    """Quota reserved for a gang's waiting pods, from `since`: what they will use, and where they go."""

    since: float
    workload: AdmittedWorkload
    node_selector: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Holding:
    """A gang holding room: its key, PodGroup (and Workload), and the pods on nodes with their nodes."""

    key: str
    obj: ApiObject
    workload: ApiObject | None
    priority: int
    pods: tuple[tuple[ApiObject, str], ...]


class QuotaLedger:
    """Kueue's objects as the core sees them, and the quota snapshot of the gangs holding room. With
    `fair_sharing` (Kueue's `fairSharing.enable`), a gang that borrows may reclaim by its queue's
    reclaimWithinCohort and preemption follows the fair-sharing strategies."""

    def __init__(self, *, fair_sharing: bool = False, admission: AdmissionFairSharing | None = None) -> None:
        self.fair_sharing = fair_sharing
        self.usage = UsageLedger(admission) if admission is not None else None
        """Each LocalQueue's recent usage, with admission fair sharing on."""
        self.flavors: dict[str, Flavor] = {}
        self.cohorts: dict[str, CohortQuota] = {}
        self.cluster_queues: dict[str, ClusterQueueQuota] = {}
        self.local_queues: dict[str, LocalQueueQuota] = {}
        """By `namespace/name`."""
        self.version = 0
        """Changes with every quota object stored or removed."""
        self._shapes: dict[str, tuple[ApiObject, PodShape]] = {}
        self._empty: tuple[int, QuotaSnapshot] | None = None

    def put(self, obj: ApiObject) -> None:
        self.version += 1
        document = {"metadata": dict(obj.metadata), "spec": dict(obj.spec)}
        if obj.kind == "ResourceFlavor":
            self.flavors[obj.name] = flavor_of(ResourceFlavor.model_validate(document))
        elif obj.kind == "Cohort":
            self.cohorts[obj.name] = cohort_of(Cohort.model_validate(document))
        elif obj.kind == "ClusterQueue":
            self.cluster_queues[obj.name] = cluster_queue_of(ClusterQueue.model_validate(document))
        elif obj.kind == "LocalQueue":
            self.local_queues[obj.key] = local_queue_of(LocalQueue.model_validate(document))
            self._restore_usage(obj)

    def _restore_usage(self, obj: ApiObject) -> None:
        """The usage an earlier scheduler wrote in the LocalQueue's status (`fairSharing.
        admissionFairSharingStatus`), when this one does not count it yet."""
        if self.usage is None or obj.key in self.usage.entries:
            return
        status = (obj.status.get("fairSharing") or {}).get("admissionFairSharingStatus")
        if not status:
            return
        try:
            consumed, last_update = parse_status(status)
        except (ValueError, TypeError):
            return  # unreadable: the LocalQueue starts with no past usage
        self.usage.restore(obj.key, consumed, last_update)

    def local_queue_usage(self, key: str) -> float:
        """A LocalQueue's weighted recent usage (0 without admission fair sharing or for an unknown key)."""
        if self.usage is None:
            return 0.0
        queue = self.local_queues.get(key)
        return self.usage.usage(key, queue.weight if queue is not None else Decimal(1))

    def remove(self, kind: str, namespace: str, name: str) -> None:
        self.version += 1
        if kind == "ResourceFlavor":
            self.flavors.pop(name, None)
        elif kind == "Cohort":
            self.cohorts.pop(name, None)
        elif kind == "ClusterQueue":
            self.cluster_queues.pop(name, None)
        elif kind == "LocalQueue":
            self.local_queues.pop(f"{namespace}/{name}", None)
            if self.usage is not None:
                self.usage.forget(f"{namespace}/{name}")

    def cluster_queue_for(self, obj: ApiObject, workload: ApiObject | None) -> str | None:
        """The ClusterQueue a PodGroup reserves quota in: that of the LocalQueue its (or its Workload's)
        `kueue.x-k8s.io/queue-name` label names, else its namespace's `default`; None: not quota-managed."""
        queue = self.local_queue_for(obj, workload)
        return (queue.cluster_queue or None) if queue is not None else None

    def missing_local_queue(self, obj: ApiObject, workload: ApiObject | None) -> str | None:
        """The LocalQueue a PodGroup's (or its Workload's) `kueue.x-k8s.io/queue-name` label names, when
        its namespace has none of that name: Kueue holds such a workload until the LocalQueue exists. A
        gang without the label is not quota-managed when its namespace has no `default`."""
        labels = {**(workload.labels if workload is not None else {}), **obj.labels}
        named = labels.get(QUEUE_NAME_LABEL)
        return named if named and f"{obj.namespace}/{named}" not in self.local_queues else None

    def local_queue_for(self, obj: ApiObject, workload: ApiObject | None) -> LocalQueueQuota | None:
        """The LocalQueue a PodGroup is queued to (see `cluster_queue_for`), if there is one."""
        if not self.local_queues:
            return None
        labels = {**(workload.labels if workload is not None else {}), **obj.labels}
        wanted = labels.get(QUEUE_NAME_LABEL) or DEFAULT_LOCAL_QUEUE
        return self.local_queues.get(f"{obj.namespace}/{wanted}")

    def snapshot(
        self, holdings: Iterable[Holding], node_labels: NodeLabels, holds: Iterable[QuotaHold] = ()
    ) -> QuotaSnapshot:
        """Quotas, and the usage of every quota-managed gang holding room or quota held for its pods, built
        at once (the scheduler keeps its own up to date instead: `QuotaUsage`)."""
        workloads = [*self.admitted(holdings, node_labels), *(hold.workload for hold in holds)]
        return QuotaSnapshot(
            self.flavors.values(), self.cohorts.values(), self.cluster_queues.values(), workloads
        )

    def empty_snapshot(self) -> QuotaSnapshot:
        """Quotas with nothing admitted: a copy of the snapshot built once per version of the objects."""
        if self._empty is None or self._empty[0] != self.version:
            built = QuotaSnapshot(self.flavors.values(), self.cohorts.values(), self.cluster_queues.values())
            self._empty = (self.version, built)
        return self._empty[1].copy()

    def request(
        self, cluster_queue: str, gang: Holding, pending: Iterable[ApiObject], local_queue: str = ""
    ) -> WorkloadRequest:
        """What a gang's waiting pods ask of its ClusterQueue (queued through LocalQueue `local_queue`)."""
        return WorkloadRequest(
            gang.key,
            cluster_queue,
            gang.priority,
            _created(gang.obj),
            _pod_sets(pending, self._pod_shape),
            local_queue,
        )

    def _pod_shape(self, pod: ApiObject) -> PodShape:
        """The pod's shape, kept while the pod's object is the same (a gang asks again and again while it
        waits, and reading its pods' quantities each time was most of that)."""
        kept = self._shapes.get(pod.uid)
        if kept is not None and kept[0] is pod:
            return kept[1]
        if len(self._shapes) >= SHAPES_KEPT:
            self._shapes.clear()
        shape = pod_shape(pod)
        self._shapes[pod.uid] = (pod, shape)
        return shape

    def verdict(
        self, snapshot: QuotaSnapshot, cluster_queue: str, gang: Holding, pending: Iterable[ApiObject]
    ) -> QuotaVerdict:
        """Whether the gang's waiting pods fit its ClusterQueue, on top of what the gang already holds."""
        decision = admit(snapshot, self.request(cluster_queue, gang, pending), fair_sharing=self.fair_sharing)
        return QuotaVerdict(cluster_queue, decision, self._flavor_labels(decision))

    def in_line(
        self,
        snapshot: QuotaSnapshot,
        verdict: QuotaVerdict,
        request: WorkloadRequest,
        waiting: Callable[[], Iterable[WorkloadRequest]],
    ) -> QuotaVerdict:
        """The verdict of a gang that fits, unless another waiting gang goes first (its queue's
        StrictFIFO, or with fair sharing a head of its cohort whose queue would have a lower share): then
        it waits, saying for whom. `waiting` is asked only when the order could matter."""
        queue = self.cluster_queues.get(verdict.cluster_queue)
        ordered = queue is not None and (queue.strict_fifo or self.orders_by_usage(queue.name))
        if not (ordered or (self.fair_sharing and verdict.decision.borrows)):
            return verdict
        usage = self.local_queue_usage if self.usage is not None else None
        ahead = goes_first(
            snapshot,
            request,
            verdict.decision,
            waiting(),
            fair_sharing=self.fair_sharing,
            admission_usage=usage,
        )
        if ahead is None:
            return verdict
        decision = QuotaDecision(Mode.NO_FIT, {}, {}, message=ahead.message)
        return QuotaVerdict(verdict.cluster_queue, decision, {})

    def orders_by_usage(self, cluster_queue: str) -> bool:
        """Whether the ClusterQueue orders its workloads by their LocalQueues' recent usage."""
        queue = self.cluster_queues.get(cluster_queue)
        return self.usage is not None and queue is not None and queue.admission_fair_sharing

    def hold(self, verdict: QuotaVerdict, gang: Holding, now: float) -> QuotaHold:
        """The quota a gang that fits reserves for its waiting pods until they are placed."""
        created = _created(gang.obj)
        usage = dict(verdict.decision.usage)
        workload = AdmittedWorkload(gang.key, verdict.cluster_queue, gang.priority, created, created, usage)
        return QuotaHold(now, workload, verdict.node_selector)

    def targets(
        self, snapshot: QuotaSnapshot, verdict: QuotaVerdict, gang: Holding, pending: Iterable[ApiObject]
    ) -> tuple[PreemptionTarget, ...]:
        """The gangs to preempt so that the gang fits its queue (Kueue's policies; whole gangs)."""
        request = WorkloadRequest(
            gang.key,
            verdict.cluster_queue,
            gang.priority,
            _created(gang.obj),
            _pod_sets(pending, self._pod_shape),
        )
        strategies = () if self.fair_sharing else None  # () is Kueue's default strategies
        return preemption_targets(snapshot, request, verdict.decision, fair_sharing=strategies)

    def _flavor_labels(self, decision: QuotaDecision) -> dict[str, str]:
        labels: dict[str, str] = {}
        for assigned in decision.flavors.values():
            for flavor in sorted(set(assigned.values())):
                labels.update(self.flavors[flavor].node_labels if flavor in self.flavors else {})
        return labels

    def admitted(self, holdings: Iterable[Holding], node_labels: NodeLabels) -> list[AdmittedWorkload]:
        """The quota-managed gangs among `holdings`, with the usage their pods on nodes hold."""
        return [
            held
            for holding in holdings
            if (held := self._admitted(holding, node_labels)) is not None and held.usage
        ]

    def unreserved(self, holding: Holding, node_labels: NodeLabels) -> list[str]:
        """What a quota-managed gang's pods hold outside any quota of its ClusterQueue: a resource the queue
        does not cover, or a node that carries none of the flavors' labels (empty when all is reserved)."""
        queue = self.cluster_queues.get(self.cluster_queue_for(holding.obj, holding.workload) or "")
        if queue is None:
            return []
        found = []
        for pod, node in holding.pods:
            labels = node_labels(node) or {}
            for resource in sorted(pod_quota_requests(pod)):
                if self._flavor_on(queue, resource, labels) is None:
                    found.append(
                        f"pod {pod.name} holds {resource} on {node} outside ClusterQueue {queue.name}"
                    )
        return found

    def _admitted(self, holding: Holding, node_labels: NodeLabels) -> AdmittedWorkload | None:
        queue_name = self.cluster_queue_for(holding.obj, holding.workload)
        queue = self.cluster_queues.get(queue_name or "")
        if queue is None:
            return None
        usage: dict[FlavorResource, int] = {}
        for pod, node in holding.pods:
            labels = node_labels(node) or {}
            for resource, amount in pod_quota_requests(pod).items():
                flavor = self._flavor_on(queue, resource, labels)
                if flavor is not None:
                    usage[(flavor, resource)] = usage.get((flavor, resource), 0) + amount
        created = _created(holding.obj)
        return AdmittedWorkload(holding.key, queue.name, holding.priority, created, created, usage)

    def _flavor_on(self, queue: ClusterQueueQuota, resource: str, labels: Mapping[str, str]) -> str | None:
        for group in queue.resource_groups:
            if resource not in group.covered_resources:
                continue
            for name in group.flavors:
                flavor = self.flavors.get(name)
                if flavor is not None and all(labels.get(k) == v for k, v in flavor.node_labels.items()):
                    return name
        return None


class QuotaUsage:
    """The quota snapshot of the gangs holding room or quota held for their pods, kept up to date gang by
    gang rather than built again for every gang that asks. It is valid for one version of the quota
    objects."""

    def __init__(self, snapshot: QuotaSnapshot, version: int) -> None:
        self.snapshot = snapshot
        self.version = version
        self.changes = 0
        """Counts the changes of the snapshot, so that what is derived from it knows when it is stale."""
        self._entries: dict[str, tuple[AdmittedWorkload, ...]] = {}

    def put(self, key: str, entries: tuple[AdmittedWorkload, ...]) -> None:
        """What the gang `key` holds now (nothing: it holds nothing), in place of what it held."""
        if not entries and key not in self._entries:
            return
        self.changes += 1
        for workload in reversed(self._entries.pop(key, ())):
            self.snapshot.remove(workload)
        for workload in entries:
            self.snapshot.add(workload)
        if entries:
            self._entries[key] = entries


def gang_usage(held: AdmittedWorkload | None, hold: QuotaHold | None) -> tuple[AdmittedWorkload, ...]:
    """What a gang holds: what its pods on nodes use and what is held for its waiting pods (other pods), as
    one workload when both are in one ClusterQueue."""
    if hold is None:
        return () if held is None else (held,)
    if held is None:
        return (hold.workload,)
    if held.cluster_queue != hold.workload.cluster_queue:
        return (held, hold.workload)
    usage = dict(held.usage)
    for fr, amount in hold.workload.usage.items():
        usage[fr] = usage.get(fr, 0) + amount
    return (dataclasses.replace(hold.workload, usage=usage),)


def preemption_message(target: PreemptionTarget, preemptor_uid: str) -> str:
    """The victim's `DisruptionTarget` message, as Kueue words a workload's `Preempted` condition."""
    return quota_preemption_message(target.reason, preemptor_uid)


def quota_preemption_message(reason: PreemptionReason, preemptor_uid: str) -> str:
    """Kueue's `Preempted` message for a reason."""
    return f"Preempted to accommodate a workload (UID: {preemptor_uid}) due to {_HUMAN_REASONS[reason]}"


def pod_quota_requests(pod: ApiObject) -> dict[str, int]:
    """What a pod counts against quota, per resource, in canonical amounts: its containers' requests summed,
    or its largest init container's request when that is larger (init containers run one at a time, before
    the containers: the effective request, as Kueue and kube-scheduler count it)."""
    total = _summed(pod.spec.get("containers") or [])
    for container in pod.spec.get("initContainers") or []:
        for resource, amount in _summed([container]).items():
            total[resource] = max(total.get(resource, 0), amount)
    return total


def _summed(containers: Iterable[Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for container in containers:
        requests = (container.get("resources") or {}).get("requests") or {}
        for resource, quantity in requests.items():
            total[resource] = total.get(resource, 0) + canonical_amount(resource, quantity)
    return total


PodShape = tuple[
    tuple[tuple[str, int], ...], tuple[tuple[str, str], ...], tuple[tuple[tuple[str, Any], ...], ...]
]
"""What makes pods alike for quota: their requests, node selector and tolerations."""


def pod_shape(pod: ApiObject) -> PodShape:
    selector = pod.spec.get("nodeSelector") or {}
    tolerations = tuple(tuple(sorted(t.items())) for t in pod.spec.get("tolerations") or [])
    return (tuple(sorted(pod_quota_requests(pod).items())), tuple(sorted(selector.items())), tolerations)


def _pod_sets(
    pods: Iterable[ApiObject], shape_of: Callable[[ApiObject], PodShape] = pod_shape
) -> tuple[PodSetRequest, ...]:
    """Pods alike (same requests, node selector and tolerations) make one pod set: `main`, then `main-2`,
    ..."""
    shapes: dict[PodShape, list[ApiObject]] = {}
    for pod in sorted(pods, key=lambda p: p.name):
        shapes.setdefault(shape_of(pod), []).append(pod)
    return tuple(
        PodSetRequest(
            POD_SET if index == 0 else f"{POD_SET}-{index + 1}",
            len(alike),
            dict(requests),
            dict(selector),
            tuple(Toleration.model_validate(dict(t)) for t in tolerations),
        )
        for index, ((requests, selector, tolerations), alike) in enumerate(shapes.items())
    )


def _created(obj: ApiObject) -> datetime:
    return datetime.fromtimestamp(obj.created_at, UTC)


def with_node_selector(requests: list[PodRequest], labels: Mapping[str, str]) -> list[PodRequest]:
    """Pod requests placed only on nodes carrying `labels` (the flavor's), as kube-scheduler would once
    Kueue injected them into the pods' node selectors."""
    if not labels:
        return requests
    return [dataclasses.replace(r, node_selector={**r.node_selector, **labels}) for r in requests]
