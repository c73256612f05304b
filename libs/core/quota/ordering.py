"""Which waiting workload goes first, as Kueue's queue manager and scheduler order them.

Within a ClusterQueue: higher priority first, then earlier creation, then name (Kueue breaks the last tie
by UID, which changes from run to run; a name does not). A StrictFIFO queue admits its head or nothing:
whatever stands behind a head waits for it. A BestEffortFIFO queue (Kueue's default) lets a workload that
fits go ahead of heads that do not. With admission fair sharing (admission_fair_sharing.py) a queue orders by
its LocalQueues' recent usage first: a workload that fits waits for one of a less-used LocalQueue that fits.

Across the ClusterQueues of a cohort, with fair sharing on: a head that could be admitted now within its
queue's nominal quota goes before every loan (its queue's share stays 0, the lowest in Kueue's tournament);
of two heads that could both be admitted now by borrowing, the one whose queue would then have the lower
dominant resource share goes first (Kueue's scheduler sorts its heads so); ties go to the earlier head in
queue order, then to the queue's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from libs.core.quota.admission import admit
from libs.core.quota.fair_sharing import DominantResourceShare, dominant_resource_share
from libs.core.quota.model import PreemptionTarget, QuotaDecision, WorkloadRequest
from libs.core.quota.snapshot import QuotaSnapshot


def queue_order(request: WorkloadRequest) -> tuple[int, float, str]:
    """The sort key of a workload within its ClusterQueue."""
    return request.queue_order


def heads(waiting: Iterable[WorkloadRequest]) -> dict[str, WorkloadRequest]:
    """The first waiting workload of each ClusterQueue."""
    found: dict[str, WorkloadRequest] = {}
    for request in waiting:
        head = found.get(request.cluster_queue)
        if head is None or queue_order(request) < queue_order(head):
            found[request.cluster_queue] = request
    return found


@dataclass(frozen=True)
class GoesFirst:
    """Another waiting workload that must be admitted before this one, and why (shown while it waits)."""

    workload: str
    message: str


LocalQueueUsage = Callable[[str], float]
"""A LocalQueue's weighted recent usage, by its key (admission_fair_sharing.UsageLedger.usage)."""


def goes_first(
    snapshot: QuotaSnapshot,
    request: WorkloadRequest,
    decision: QuotaDecision,
    waiting: Iterable[WorkloadRequest],
    *,
    fair_sharing: bool,
    admission_usage: LocalQueueUsage | None = None,
) -> GoesFirst | None:
    """The workload that goes before `request` (whose `decision` admits it) by its queue's strategy, by its
    LocalQueues' recent usage (admission fair sharing, when its queue has it and `admission_usage` is given)
    or, with `fair_sharing`, by the shares of its cohort's queues; None when `request` may be admitted now."""
    waiting = [w for w in waiting if w.name != request.name]
    queue = snapshot.cluster_queues.get(request.cluster_queue)
    usage = admission_usage if queue is not None and queue.admission_fair_sharing else None
    if queue is not None and queue.strict_fifo:
        order = _in_queue_order(usage)
        ahead = [w for w in waiting if w.cluster_queue == queue.name and order(w) < order(request)]
        if ahead:
            head = min(ahead, key=order)
            return GoesFirst(
                head.name, f"StrictFIFO: {head.name} is ahead of it in ClusterQueue {queue.name}"
            )
    elif usage is not None:
        first = _less_used_first(snapshot, request, waiting, usage, fair_sharing=fair_sharing)
        if first is not None:
            return first
    if fair_sharing and decision.borrows:
        return _lower_share_first(snapshot, request, decision, waiting)
    return None


def _in_queue_order(
    usage: LocalQueueUsage | None,
) -> Callable[[WorkloadRequest], tuple[float, tuple[int, float, str]]]:
    """The order of a ClusterQueue's workloads: by their LocalQueue's usage first under admission fair
    sharing (Kueue's `queueOrderingFunc`), then `queue_order`."""
    return lambda w: (usage(w.local_queue) if usage is not None else 0.0, queue_order(w))


def _less_used_first(
    snapshot: QuotaSnapshot,
    request: WorkloadRequest,
    waiting: list[WorkloadRequest],
    usage: LocalQueueUsage,
    *,
    fair_sharing: bool,
) -> GoesFirst | None:
    """A workload of the same ClusterQueue from a LocalQueue that used less lately and that fits now: under
    admission fair sharing it is admitted first (a BestEffortFIFO queue still lets a workload go ahead of
    those that do not fit)."""
    mine = usage(request.local_queue)
    rivals = sorted(
        (
            w
            for w in waiting
            if w.cluster_queue == request.cluster_queue
            and w.local_queue != request.local_queue
            and usage(w.local_queue) < mine
        ),
        key=_in_queue_order(usage),
    )
    for rival in rivals:
        if admit(snapshot, rival, fair_sharing=fair_sharing).fits:
            return GoesFirst(
                rival.name,
                f"admission fair sharing: LocalQueue {rival.local_queue} used less of ClusterQueue "
                f"{request.cluster_queue} lately ({usage(rival.local_queue):.4g} against {mine:.4g} for "
                f"{request.local_queue}), so {rival.name} goes first",
            )
    return None


def _lower_share_first(
    snapshot: QuotaSnapshot,
    request: WorkloadRequest,
    decision: QuotaDecision,
    waiting: list[WorkloadRequest],
) -> GoesFirst | None:
    node = snapshot.cluster_queue_node(request.cluster_queue)
    root = snapshot.root_of(node)
    mine = _key(dominant_resource_share(snapshot, node, decision.usage), request)
    rivals = heads(w for w in waiting if w.cluster_queue != request.cluster_queue)
    best: tuple[_Rank, WorkloadRequest] | None = None
    for name in sorted(rivals):
        head = rivals[name]
        if name not in snapshot.cluster_queues:
            continue
        other = snapshot.cluster_queue_node(name)
        if snapshot.root_of(other) != root:
            continue
        answer = admit(snapshot, head, fair_sharing=True)
        if not answer.fits:
            continue  # a head that cannot be admitted now does not hold the loan back
        if not answer.borrows:
            # Its queue's share stays 0: it wins Kueue's tournament against every loan.
            return GoesFirst(
                head.name,
                f"{head.name} is admitted within the nominal quota of ClusterQueue {head.cluster_queue} first",
            )
        key = _key(dominant_resource_share(snapshot, other, answer.usage), head)
        if key < mine and (best is None or key < best[0]):
            best = (key, head)
    if best is None:
        return None
    head = best[1]
    return GoesFirst(
        head.name,
        f"ClusterQueue {head.cluster_queue} would have a lower share of the cohort after admitting "
        f"{head.name}, which goes first",
    )


def admitted_after(
    snapshot: QuotaSnapshot,
    request: WorkloadRequest,
    targets: Iterable[PreemptionTarget],
    waiting: Iterable[WorkloadRequest],
    *,
    fair_sharing: bool,
) -> bool:
    """Whether `request` is admitted once `targets` are preempted: it fits its queue then, and no other
    waiting workload goes before it (StrictFIFO, or a head of its cohort that would take the freed quota
    with a lower share). Preempting for a gang that would still wait only frees quota for others, and the
    gang asks again: victims evicted in a loop. The snapshot is not changed."""
    simulation = snapshot.copy()
    for target in targets:
        simulation.remove(target.workload)
    decision = admit(simulation, request, fair_sharing=fair_sharing)
    if not decision.fits:
        return False
    return goes_first(simulation, request, decision, waiting, fair_sharing=fair_sharing) is None


_Rank = tuple[tuple[int, float], tuple[int, float, str], str]


def _key(share: DominantResourceShare, request: WorkloadRequest) -> _Rank:
    return (share.order(), queue_order(request), request.cluster_queue)
