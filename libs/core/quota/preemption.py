"""Which admitted workloads to preempt so that a gang fits its quota (`pkg/scheduler/preemption`): whole
workloads only, a minimal set, the same set for the same snapshot whatever order its inputs came in.

Candidates use a (flavor, resource) the gang is short of and pass the queue's policies: in its own
ClusterQueue by `withinClusterQueue`; in other ClusterQueues of its cohort tree, only while they borrow, by
`reclaimWithinCohort`, and, when the gang itself would borrow, by `borrowWithinCohort` (lower priority, at
most `maxPriorityThreshold`). Classical preemption takes candidates out in order (other queues first, lower
priority, then the most recently admitted) until the gang fits, then puts back, last first, every one it
can do without. Fair sharing walks the cohort tree to the queue of highest dominant resource share and takes
a candidate when the strategy holds (`LessThanOrEqualToFinalShare`: the gang's queue's share after admission
is at most the target's after preemption; `LessThanInitialShare`: below the target's before).

Where Kueue leaves ties to map iteration (children of a cohort with equal shares, candidates with equal
priority and admission time), they are broken here by name."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from libs.core.quota.fair_sharing import DominantResourceShare, dominant_resource_share
from libs.core.quota.model import (
    ANY,
    DEFAULT_STRATEGIES,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    LOWER_PRIORITY,
    NEVER,
    AdmittedWorkload,
    ClusterQueueQuota,
    FairSharingStrategy,
    FlavorResource,
    Mode,
    PreemptionReason,
    PreemptionTarget,
    QuotaDecision,
    WorkloadRequest,
)
from libs.core.quota.snapshot import CLUSTER_QUEUE, Node, QuotaSnapshot

INCOMING = "\x00incoming"
"""The name the gang's own usage goes by while fair sharing simulates it."""


@dataclass
class _Context:
    snapshot: QuotaSnapshot
    request: WorkloadRequest
    queue: ClusterQueueQuota
    node: Node
    usage: dict[FlavorResource, int]
    short: frozenset[FlavorResource]
    targets: list[PreemptionTarget] = field(default_factory=list)


def preemption_targets(
    snapshot: QuotaSnapshot,
    request: WorkloadRequest,
    decision: QuotaDecision,
    *,
    fair_sharing: Sequence[FairSharingStrategy] | None = None,
) -> tuple[PreemptionTarget, ...]:
    """The workloads to preempt for `request`, whose `decision` (from admission.admit) is Preempt; empty when
    no set of candidates makes it fit. With `fair_sharing` (the strategies, in order; Kueue's default when
    empty) preemption across queues follows dominant resource shares instead of priorities. The snapshot is
    not changed."""
    if decision.mode is not Mode.PREEMPT:
        return ()
    simulation = snapshot.copy()
    queue = simulation.cluster_queues[request.cluster_queue]
    context = _Context(
        simulation,
        request,
        queue,
        simulation.cluster_queue_node(queue.name),
        dict(decision.usage),
        decision.needs_preemption,
    )
    if fair_sharing is not None:
        return tuple(_fair_preemption(context, tuple(fair_sharing) or DEFAULT_STRATEGIES))
    return tuple(_classical_preemption(context))


# Candidates.


def satisfies_policy(policy: str, preemptor: WorkloadRequest, candidate: AdmittedWorkload) -> bool:
    """Whether `policy` lets the preemptor preempt the candidate (`SatisfiesPreemptionPolicy`)."""
    if policy == LOWER_PRIORITY:
        return preemptor.priority > candidate.priority
    if policy == LOWER_OR_NEWER_EQUAL_PRIORITY:
        newer = preemptor.priority == candidate.priority and preemptor.created < candidate.created
        return preemptor.priority > candidate.priority or newer
    return policy == ANY


def _candidate_order(queue: str) -> Callable[[AdmittedWorkload], tuple[bool, tuple[int, float, str]]]:
    # CandidatesOrdering: other queues first, lower priority, most recently admitted; then the name.
    return lambda w: (w.cluster_queue == queue, w.preemption_order)


_IN_ONE_QUEUE_ORDER: Final = attrgetter("preemption_order")
"""`_candidate_order` among candidates that are all, or all not, of the gang's own queue."""


def _uses(workload: AdmittedWorkload, short: frozenset[FlavorResource]) -> bool:
    usage = workload.usage
    for fr in short:  # noqa: SIM110 - a loop is faster than any() on one to three pairs
        if usage.get(fr, 0) > 0:
            return True
    return False


def _own_candidates(context: _Context) -> list[AdmittedWorkload]:
    policy = context.queue.preemption.within_cluster_queue
    if policy == NEVER:
        return []
    return [
        w
        for w in context.snapshot.workloads_in(context.queue.name)
        if satisfies_policy(policy, context.request, w) and _uses(w, context.short)
    ]


def _cohort_candidates(context: _Context) -> list[AdmittedWorkload]:
    # In no particular order: the candidates are sorted by `_candidate_order`, a total order.
    snapshot, policy = context.snapshot, context.queue.preemption.reclaim_within_cohort
    if snapshot.parent[context.node] is None or policy == NEVER:
        return []
    found: list[AdmittedWorkload] = []
    # Quota is reclaimed only from queues that borrow it.
    for name in snapshot.borrowing_queues(snapshot.root_of(context.node), context.short):
        if name == context.queue.name:
            continue
        workloads = snapshot.workloads_in(name)
        if policy == ANY:
            found += [w for w in workloads if _uses(w, context.short)]
        else:
            found += [
                w
                for w in workloads
                if satisfies_policy(policy, context.request, w) and _uses(w, context.short)
            ]
    return found


def reclaimable_by_placement(
    snapshot: QuotaSnapshot, cluster_queue: str, held: Collection[FlavorResource], priority: int
) -> Iterator[AdmittedWorkload]:
    """Placement-aware reclaim: the workloads whose room a gang may take back when its ClusterQueue holds
    `held` for it within its nominal quota (the gang's own reservation counted in the snapshot) but no node
    can hold it. Quota alone cannot see that case: the cohort's quota is not all used, yet the nodes are,
    by queues that borrow. Candidates are the workloads of other queues of the cohort tree that borrow one
    of `held`, as `reclaimWithinCohort` lets the gang's queue take them (`Any`, or `LowerPriority` than
    `priority`); the victim search then picks, whole gangs only, the ones whose nodes would hold the gang.
    Only what is borrowed is taken back: a workload is a candidate when its queue would still use its
    nominal quota of each of `held` it borrows without it, so that no queue is brought below its own share
    and made to reclaim in turn; the gang's own queue stays within its nominal quota."""
    queue = snapshot.cluster_queues.get(cluster_queue)
    node = snapshot.cluster_queue_node(cluster_queue)
    if queue is None or snapshot.parent[node] is None or not held:
        return
    policy = queue.preemption.reclaim_within_cohort
    if policy not in (ANY, LOWER_PRIORITY) or not snapshot.within_nominal(node, held):
        return
    short = frozenset(held)
    for name in snapshot.borrowing_queues(snapshot.root_of(node), short):
        if name == cluster_queue:
            continue
        lender = snapshot.cluster_queue_node(name)
        used, nominal = snapshot.usage[lender], snapshot.subtree_quota[lender]
        borrowed = {fr: extra for fr in short if (extra := used.get(fr, 0) - nominal.get(fr, 0)) > 0}
        for workload in snapshot.workloads_in(name):
            if (policy == ANY or workload.priority < priority) and _only_borrowed(workload, borrowed):
                yield workload


def spared_by_quota(snapshot: QuotaSnapshot, cluster_queue: str, priority: int) -> Iterator[AdmittedWorkload]:
    """The lower-priority workloads a gang of `cluster_queue` may not preempt by priority: those of other
    ClusterQueues that borrow nothing. Kueue takes from another queue only what it borrows (reclaim, or
    borrowing within the cohort); were a borrowing gang let evict a gang holding its own queue's nominal
    quota, that gang would take the room back by placement-aware reclaim, and the two would evict each other
    for ever."""
    if cluster_queue not in snapshot.cluster_queues:
        return
    for name in sorted(snapshot.cluster_queues):
        node = snapshot.cluster_queue_node(name)
        if name == cluster_queue or not snapshot.within_nominal(node, snapshot.usage[node]):
            continue
        for workload in snapshot.workloads_in(name):
            if workload.priority < priority:
                yield workload


def borrowers_by_share(snapshot: QuotaSnapshot, queues: Iterable[str]) -> list[str]:
    """ClusterQueues, the highest dominant resource share first (ties by name): the order placement-aware
    reclaim takes them in."""
    return sorted(
        sorted(queues),
        key=lambda name: dominant_resource_share(snapshot, snapshot.cluster_queue_node(name)).order(),
        reverse=True,
    )


def _only_borrowed(workload: AdmittedWorkload, borrowed: Mapping[FlavorResource, int]) -> bool:
    """Whether the workload uses some of the pairs its queue borrows, and of each no more than it borrows."""
    uses = False
    for fr, amount in borrowed.items():
        taken = workload.usage.get(fr, 0)
        if taken > amount:
            return False
        uses = uses or taken > 0
    return uses


def _fits(context: _Context, *, allow_borrowing: bool) -> bool:
    snapshot = context.snapshot
    for fr, amount in context.usage.items():
        if not allow_borrowing and snapshot.borrowing(context.node, fr, amount):
            return False
        if amount > snapshot.available(context.node, fr):
            return False
    return True


def _put_back(context: _Context, *, allow_borrowing: bool) -> list[PreemptionTarget]:
    """Return every target but the last, last first, that the gang can do without; restore the snapshot."""
    targets = list(context.targets)
    for position in range(len(targets) - 2, -1, -1):
        context.snapshot.add(targets[position].workload)
        if _fits(context, allow_borrowing=allow_borrowing):
            del targets[position]
        else:
            context.snapshot.remove(targets[position].workload)
    for target in targets:
        context.snapshot.add(target.workload)
    return targets


def _restore(context: _Context) -> None:
    for target in context.targets:
        context.snapshot.add(target.workload)
    context.targets.clear()


# Classical preemption.


def _classical_preemption(context: _Context) -> list[PreemptionTarget]:
    own = sorted(_own_candidates(context), key=_IN_ONE_QUEUE_ORDER)
    others = sorted(_cohort_candidates(context), key=_IN_ONE_QUEUE_ORDER)
    for allow_borrowing, candidates in _attempts(context, own, others):
        if not allow_borrowing and _borrows_without_all_of_its_own(context, candidates):
            continue  # no set of these candidates can help: the loop below would take them all in vain
        for workload, reason in candidates:
            if workload.cluster_queue != context.queue.name and context.snapshot.within_nominal(
                context.snapshot.cluster_queue_node(workload.cluster_queue), context.short
            ):
                continue  # earlier targets ended its borrowing
            context.snapshot.remove(workload)
            context.targets.append(PreemptionTarget(workload, reason))
            if _fits(context, allow_borrowing=allow_borrowing):
                return _put_back(context, allow_borrowing=allow_borrowing)
        _restore(context)
    return []


Attempt = tuple[bool, list[tuple[AdmittedWorkload, PreemptionReason]]]


def _borrows_without_all_of_its_own(
    context: _Context, candidates: list[tuple[AdmittedWorkload, PreemptionReason]]
) -> bool:
    """Whether the gang would borrow even with every candidate of its own queue taken out. Only those change
    what its queue uses, so then no set of the candidates lets it fit without borrowing."""
    freed: dict[FlavorResource, int] = {}
    for workload, _ in candidates:
        if workload.cluster_queue == context.queue.name:
            for fr, amount in workload.usage.items():
                freed[fr] = freed.get(fr, 0) + amount
    return any(
        context.snapshot.borrowing(context.node, fr, amount - freed.get(fr, 0))
        for fr, amount in context.usage.items()
    )


def _attempts(
    context: _Context, own: list[AdmittedWorkload], others: list[AdmittedWorkload]
) -> list[Attempt]:
    """The runs to try, each with whether the gang may borrow and its candidates in order: a gang that
    borrows takes from other queues only what borrowWithinCohort allows; one within its nominal quota
    reclaims from any queue that borrows."""
    in_queue = [(w, PreemptionReason.IN_CLUSTER_QUEUE) for w in own]
    if not others:
        return [(True, in_queue)]
    reclaim = [(w, PreemptionReason.IN_COHORT_RECLAMATION) for w in others]
    policy = context.queue.preemption
    threshold = policy.max_priority_threshold
    while_borrowing = [
        (w, PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING)
        for w in others
        if policy.borrow_within_cohort != NEVER
        and w.priority < context.request.priority
        and (threshold is None or w.priority <= threshold)
    ]
    if policy.borrow_within_cohort == NEVER:
        under_nominal = all(
            context.snapshot.usage[context.node].get(fr, 0)
            < context.snapshot.subtree_quota[context.node].get(fr, 0)
            for fr in context.short
        )
        return [(False, reclaim + in_queue), (True, in_queue)] if under_nominal else [(True, in_queue)]
    return [(True, while_borrowing + in_queue), (False, reclaim + in_queue)]


# Fair sharing.


def _fair_preemption(
    context: _Context, strategies: tuple[FairSharingStrategy, ...]
) -> list[PreemptionTarget]:
    snapshot = context.snapshot
    candidates = sorted(
        _own_candidates(context) + _cohort_candidates(context), key=_candidate_order(context.queue.name)
    )
    if not candidates:
        return []
    incoming = AdmittedWorkload(
        INCOMING,
        context.queue.name,
        context.request.priority,
        context.request.created,
        context.request.created,
        context.usage,
    )
    snapshot.add(incoming)
    fits, retry = _first_strategy(context, incoming, candidates, strategies[0])
    if not fits and len(strategies) > 1:
        fits = _second_strategy(context, incoming, retry)
    snapshot.remove(incoming)
    if not fits:
        _restore(context)
        return []
    return _put_back(context, allow_borrowing=True)


def _fits_fair(context: _Context, incoming: AdmittedWorkload) -> bool:
    context.snapshot.remove(incoming)
    fits = _fits(context, allow_borrowing=True)
    context.snapshot.add(incoming)
    return fits


def _first_strategy(
    context: _Context,
    incoming: AdmittedWorkload,
    candidates: list[AdmittedWorkload],
    strategy: FairSharingStrategy,
) -> tuple[bool, list[AdmittedWorkload]]:
    ordering = _TargetOrdering(context, candidates)
    retry: list[AdmittedWorkload] = []
    for target in ordering:
        if target == context.node:
            _take(context, ordering.pop(target), PreemptionReason.IN_CLUSTER_QUEUE)
            if _fits_fair(context, incoming):
                return True, retry
            continue
        preemptor_new, target_old = ordering.shares(target)
        while ordering.queued(target):
            workload = ordering.pop(target)
            context.snapshot.remove(workload)
            target_new = ordering.shares(target)[1]
            context.snapshot.add(workload)
            if _strategy_holds(strategy, preemptor_new, target_old, target_new):
                _take(context, workload, PreemptionReason.IN_COHORT_FAIR_SHARING)
                if _fits_fair(context, incoming):
                    return True, retry
                break  # the shares changed: choose the target queue again
            retry.append(workload)
    return False, retry


def _second_strategy(context: _Context, incoming: AdmittedWorkload, retry: list[AdmittedWorkload]) -> bool:
    """Rule S2-b: one candidate per queue, taken when the gang's share stays below the queue's initial one."""
    ordering = _TargetOrdering(context, retry)
    for target in ordering:
        preemptor_new, target_old = ordering.shares(target)
        workload = ordering.pop(target)
        if preemptor_new < target_old:
            _take(context, workload, PreemptionReason.IN_COHORT_FAIR_SHARING)
            if _fits_fair(context, incoming):
                return True
        ordering.drop(target)
    return False


def _strategy_holds(
    strategy: FairSharingStrategy,
    preemptor_new: DominantResourceShare,
    target_old: DominantResourceShare,
    target_new: DominantResourceShare,
) -> bool:
    if strategy is FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return not target_new < preemptor_new
    return preemptor_new < target_old


def _take(context: _Context, workload: AdmittedWorkload, reason: PreemptionReason) -> None:
    context.snapshot.remove(workload)
    context.targets.append(PreemptionTarget(workload, reason))


class _TargetOrdering:
    """The ClusterQueues to preempt from, most unfair first (`TargetClusterQueueOrdering`): from the root,
    the child of highest share that still borrows (the gang's own queue and its ancestors are never pruned
    for not borrowing); a queue without candidates left is pruned."""

    def __init__(self, context: _Context, candidates: list[AdmittedWorkload]) -> None:
        self.context = context
        self.snapshot = context.snapshot
        self.ancestors = set(self.snapshot.path_to_root(context.node))
        self.by_queue: dict[str, list[AdmittedWorkload]] = {}
        for workload in candidates:
            self.by_queue.setdefault(workload.cluster_queue, []).append(workload)
        self.pruned: set[Node] = set()
        self.order = _candidate_order(context.queue.name)

    def __iter__(self) -> _TargetOrdering:
        return self

    def __next__(self) -> Node:
        if self.snapshot.parent[self.context.node] is None:
            if self.context.node in self.pruned or not self.queued(self.context.node):
                raise StopIteration
            return self.context.node
        root = self.snapshot.root_of(self.context.node)
        while root not in self.pruned:
            target = self._next_target(root)
            if target is not None:
                return target
        raise StopIteration

    def queued(self, node: Node) -> bool:
        return bool(self.by_queue.get(node.name))

    def pop(self, node: Node) -> AdmittedWorkload:
        return self.by_queue[node.name].pop(0)

    def drop(self, node: Node) -> None:
        self.pruned.add(node)

    def shares(self, target: Node) -> tuple[DominantResourceShare, DominantResourceShare]:
        """The shares of the gang's and the target's almost least common ancestors (the children of their
        least common ancestor on each side)."""
        lca = next(a for a in self.snapshot.path_to_root(target) if a in self.ancestors)
        return (
            dominant_resource_share(self.snapshot, self._below(self.context.node, lca)),
            dominant_resource_share(self.snapshot, self._below(target, lca)),
        )

    def _below(self, node: Node, ancestor: Node) -> Node:
        while self.snapshot.parent[node] != ancestor:
            parent = self.snapshot.parent[node]
            assert parent is not None
            node = parent
        return node

    def _next_target(self, cohort: Node) -> Node | None:
        best_queue, queue_share = self._best_queue(cohort)
        best_cohort: Node | None = None
        cohort_share = DominantResourceShare()
        for child in self.snapshot.children[cohort]:
            if child.kind == CLUSTER_QUEUE or child in self.pruned:
                continue
            share = dominant_resource_share(self.snapshot, child)
            if not share.borrowing and child not in self.ancestors:
                self.pruned.add(child)
            elif best_cohort is None or cohort_share < share:
                best_cohort, cohort_share = child, share
        if best_cohort is None and best_queue is None:
            self.pruned.add(cohort)
            return None
        if best_cohort is not None and (best_queue is None or not cohort_share < queue_share):
            return self._next_target(best_cohort)
        return best_queue

    def _best_queue(self, cohort: Node) -> tuple[Node | None, DominantResourceShare]:
        best: Node | None = None
        best_share = DominantResourceShare()
        for child in self.snapshot.children[cohort]:
            if child.kind != CLUSTER_QUEUE or child in self.pruned:
                continue
            share = dominant_resource_share(self.snapshot, child)
            if (not share.borrowing and child != self.context.node) or not self.queued(child):
                self.pruned.add(child)
            elif best is None or best_share < share:
                best, best_share = child, share
            elif best_share.same_as(share) and self.order(self.by_queue[child.name][0]) < self.order(
                self.by_queue[best.name][0]
            ):
                best = child
        return best, best_share
