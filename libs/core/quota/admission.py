"""Quota reservation: whether a whole gang fits its ClusterQueue, and in which flavors
(`pkg/scheduler/flavorassigner`).

Each pod set's resources are assigned per resource group: the group's flavors are tried in the queue's
order; a flavor whose node labels or taints the pod set cannot take is skipped; a flavor holds the pod set
when every covered resource does (Fit: within what the queue may use now, borrowing included; Preempt:
within what it could use, and a preemption policy could free it; NoFit otherwise). The search stops at the
first flavor that fits without borrowing, or that needs borrowing or preemption when flavorFungibility says
to stop there; else the best flavor seen wins (Fit over Preempt, then no borrowing over borrowing), the
earliest on a tie."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from libs.api.models.core import Taint
from libs.core.quota.model import (
    NEVER,
    TRY_NEXT_FLAVOR,
    ClusterQueueQuota,
    Flavor,
    FlavorResource,
    Mode,
    PodSetRequest,
    QuotaDecision,
    ResourceGroupQuota,
    WorkloadRequest,
)
from libs.core.quota.snapshot import Node, QuotaSnapshot

_EVALUATED_EFFECTS = ("NoSchedule", "NoExecute")


def admit(snapshot: QuotaSnapshot, request: WorkloadRequest, *, fair_sharing: bool = False) -> QuotaDecision:
    """Decide whether `request` can reserve quota in its ClusterQueue: Fit (reserve it now), Preempt (it
    would fit once preemption frees quota; see preemption.preemption_targets) or NoFit, with the flavor of
    each pod set's resources, the usage it would add, whether it borrows, and Kueue's message when it does
    not fit. With `fair_sharing` a gang that borrows may also reclaim by the queue's reclaimWithinCohort, as
    under Kueue's fair sharing. The snapshot is not changed."""
    queue = snapshot.cluster_queues.get(request.cluster_queue)
    if queue is None:
        return _no_fit(f"ClusterQueue {request.cluster_queue} not found")
    if queue.name in snapshot.inactive:
        return _no_fit(snapshot.inactive[queue.name])
    node = snapshot.cluster_queue_node(queue.name)
    available = _Available(snapshot, node)
    usage: dict[FlavorResource, int] = {}
    flavors: dict[str, dict[str, str]] = {}
    needs_preemption: set[FlavorResource] = set()
    mode = Mode.FIT
    messages: list[str] = []
    for pod_set in request.pod_sets:
        pod_set_mode, assigned, reasons = _assign_pod_set(available, queue, pod_set, usage, fair_sharing)
        flavors[pod_set.name] = assigned
        mode = _worse(mode, pod_set_mode)
        for resource, flavor in assigned.items():
            fr = (flavor, resource)
            usage[fr] = usage.get(fr, 0) + _total(pod_set, resource)
            if usage[fr] > available(fr):
                needs_preemption.add(fr)
        if pod_set_mode is not Mode.FIT:
            messages.append(
                f"couldn't assign flavors to pod set {pod_set.name}: {', '.join(sorted(reasons))}"
            )
    if mode is Mode.NO_FIT:
        return _no_fit("; ".join(messages))
    borrows = any(snapshot.borrowing(node, fr, amount) for fr, amount in usage.items())
    return QuotaDecision(mode, flavors, usage, borrows, "; ".join(messages), frozenset(needs_preemption))


_RANKS: Final = {mode: mode.rank for mode in Mode}


def _worse(mode: Mode, other: Mode) -> Mode:
    """The worse of two modes (the first when they are equal)."""
    return mode if _RANKS[mode] <= _RANKS[other] else other


class _Available(dict[FlavorResource, int]):
    """What the queue may still use of each (flavor, resource), asked of the snapshot once per decision (the
    snapshot does not change while a gang is decided)."""

    def __init__(self, snapshot: QuotaSnapshot, node: Node) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.node = node

    def __call__(self, fr: FlavorResource) -> int:
        found = self.get(fr)
        if found is None:
            found = self[fr] = self.snapshot.available(self.node, fr)
        return found


def _no_fit(message: str) -> QuotaDecision:
    return QuotaDecision(Mode.NO_FIT, {}, {}, message=message)


def _total(pod_set: PodSetRequest, resource: str) -> int:
    return pod_set.requests.get(resource, 0) * pod_set.count


def _assign_pod_set(
    available: _Available,
    queue: ClusterQueueQuota,
    pod_set: PodSetRequest,
    usage: Mapping[FlavorResource, int],
    fair_sharing: bool,
) -> tuple[Mode, dict[str, str], list[str]]:
    requested = {resource: _total(pod_set, resource) for resource in sorted(pod_set.requests)}
    requested = {resource: amount for resource, amount in requested.items() if amount > 0}
    covered = {resource for group in queue.resource_groups for resource in group.covered_resources}
    reasons = [f"resource {r} unavailable in ClusterQueue" for r in requested if r not in covered]
    mode = Mode.NO_FIT if reasons else Mode.FIT
    assigned: dict[str, str] = {}
    for group in queue.resource_groups:
        group_requests = {r: a for r, a in requested.items() if r in group.covered_resources}
        if not group_requests:
            continue
        choice = _choose_flavor(available, queue, group, pod_set, group_requests, usage, fair_sharing)
        reasons += choice.reasons
        mode = _worse(mode, choice.mode)
        if choice.flavor is not None:
            assigned.update(dict.fromkeys(group_requests, choice.flavor))
    return mode, assigned, reasons


class _FlavorChoice:
    """The flavor chosen for one resource group of a pod set, its mode, and what was wrong elsewhere."""

    def __init__(self) -> None:
        self.flavor: str | None = None
        self.mode = Mode.NO_FIT
        self.borrows = False
        self.reasons: list[str] = []

    def prefers(self, mode: Mode, borrows: bool) -> bool:
        # BorrowingOverPreemption, Kueue's default preference: the mode first, then not borrowing.
        if self.flavor is None:
            return True
        return (mode.rank, not borrows) > (self.mode.rank, not self.borrows)


def _choose_flavor(
    available: _Available,
    queue: ClusterQueueQuota,
    group: ResourceGroupQuota,
    pod_set: PodSetRequest,
    requests: Mapping[str, int],
    usage: Mapping[FlavorResource, int],
    fair_sharing: bool,
) -> _FlavorChoice:
    choice = _FlavorChoice()
    snapshot, node = available.snapshot, available.node
    for name in group.flavors:
        mismatch = _mismatch(snapshot.flavors[name], pod_set)
        if mismatch:
            choice.reasons.append(mismatch)
            continue
        mode, borrows = Mode.FIT, False
        for resource, amount in requests.items():
            fr = (name, resource)
            resource_mode, reason = _fits(available, queue, fr, usage.get(fr, 0), amount, fair_sharing)
            choice.reasons += [reason] if reason else []
            mode = _worse(mode, resource_mode)
            borrows = borrows or snapshot.borrowing(node, fr, usage.get(fr, 0) + amount)
            if mode is Mode.NO_FIT:
                break
        if mode is Mode.NO_FIT:
            continue
        if choice.prefers(mode, borrows):
            choice.flavor, choice.mode, choice.borrows = name, mode, borrows
        if not _try_next_flavor(queue, mode, borrows):
            choice.flavor, choice.mode, choice.borrows = name, mode, borrows
            break
    return choice


def _try_next_flavor(queue: ClusterQueueQuota, mode: Mode, borrows: bool) -> bool:
    if mode is Mode.PREEMPT and queue.fungibility.when_can_preempt == TRY_NEXT_FLAVOR:
        return True
    return borrows and queue.fungibility.when_can_borrow == TRY_NEXT_FLAVOR


def _fits(
    available_now: _Available,
    queue: ClusterQueueQuota,
    fr: FlavorResource,
    assumed: int,
    amount: int,
    fair_sharing: bool,
) -> tuple[Mode, str]:
    snapshot, node = available_now.snapshot, available_now.node
    flavor, resource = fr
    wanted = assumed + amount
    maximum = snapshot.potential_available(node, fr)
    if wanted > maximum:
        return Mode.NO_FIT, (
            f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
            f"({shown(resource, assumed)}) + current podset request ({shown(resource, amount)}) > maximum "
            f"capacity ({shown(resource, maximum)})"
        )
    available = available_now(fr)
    if wanted <= available:
        return Mode.FIT, ""
    reason = (
        f"insufficient unused quota for {resource} in flavor {flavor}, "
        f"{shown(resource, wanted - available)} more needed"
    )
    may_help = _preemption_may_help(snapshot, queue, node, fr, wanted, fair_sharing)
    return (Mode.PREEMPT if may_help else Mode.NO_FIT), reason


def _preemption_may_help(
    snapshot: QuotaSnapshot,
    queue: ClusterQueueQuota,
    node: Node,
    fr: FlavorResource,
    wanted: int,
    fair_sharing: bool,
) -> bool:
    """Kueue's gate before it simulates preemption: within the nominal quota, a policy to preempt in the
    queue or reclaim from the cohort; past it, borrowWithinCohort (or, under fair sharing, reclaimWithinCohort)."""
    policies = queue.preemption
    if wanted <= snapshot.subtree_quota[node].get(fr, 0):
        return policies.within_cluster_queue != NEVER or policies.reclaim_within_cohort != NEVER
    return policies.borrow_within_cohort != NEVER or (
        fair_sharing and policies.reclaim_within_cohort != NEVER
    )


def _mismatch(flavor: Flavor, pod_set: PodSetRequest) -> str:
    """Why the pod set cannot run on the flavor's nodes ("" when it can): a node selector on one of the
    flavor's label keys with another value, or a NoSchedule/NoExecute taint nothing tolerates."""
    selector = pod_set.node_selector
    if selector and any(
        key in selector and selector[key] != value for key, value in flavor.node_labels.items()
    ):
        return f"flavor {flavor.name} doesn't match node affinity"
    if not flavor.node_taints:
        return ""
    tolerations = (*pod_set.tolerations, *flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.effect in _EVALUATED_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return f"untolerated taint {_taint_text(taint)} in flavor {flavor.name}"
    return ""


def _taint_text(taint: Taint) -> str:
    # corev1.Taint.ToString: `key=value:effect`, or `key:effect` without a value.
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def shown(resource: str, amount: int) -> str:
    """A canonical amount as a quantity: millicores back to cores (`500m`, `2`), other resources as they are."""
    if resource != "cpu":
        return str(amount)
    return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
