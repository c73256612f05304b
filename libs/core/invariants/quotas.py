"""Quotas: no ClusterQueue holds more than its nominal quota plus what it may borrow, and every gang a queue
manages that holds nodes holds them within its queue's quota (docs/quotas.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from libs.core.quota import QuotaSnapshot
from libs.core.quota.snapshot import Node as QuotaNode
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.quotas import Holding, QuotaLedger
from libs.core.scheduling.stored_quotas import stored_gangs

from .records import Violation


def quota_holdings(
    objects: Iterable[ApiObject], holds: Mapping[str, str]
) -> tuple[QuotaLedger, list[Holding], dict[str, Mapping[str, str]]]:
    """Kueue's objects, each PodGroup whose pods hold nodes (with those pods), and the nodes' labels."""
    gangs = stored_gangs(objects, holds)
    return gangs.ledger, gangs.holding, gangs.node_labels


def queues_within_their_limits(
    ledger: QuotaLedger, holdings: Iterable[Holding], labels: Mapping[str, Mapping[str, str]]
) -> list[Violation]:
    """What each ClusterQueue's gangs hold on nodes is at most its nominal quota plus its borrowing limit
    (without a limit: what its cohort tree has)."""
    admitted = ledger.admitted(holdings, labels.get)
    snapshot = QuotaSnapshot(ledger.flavors.values(), ledger.cohorts.values(), ledger.cluster_queues.values())
    used: dict[tuple[str, str, str], int] = {}
    for workload in admitted:
        for (flavor, resource), amount in workload.usage.items():
            key = (workload.cluster_queue, flavor, resource)
            used[key] = used.get(key, 0) + amount
    found = []
    for (queue_name, flavor, resource), amount in sorted(used.items()):
        limit = _limit(snapshot, queue_name, (flavor, resource))
        if amount > limit:
            detail = f"{resource} in flavor {flavor}: {amount} held, at most {limit} allowed"
            found.append(Violation("queue-within-quota", queue_name, detail))
    return found


def _limit(snapshot: QuotaSnapshot, queue_name: str, fr: tuple[str, str]) -> int:
    queue = snapshot.cluster_queues[queue_name]
    quota = queue.quotas.get(fr)
    nominal = quota.nominal if quota is not None else 0
    if queue.cohort is None:
        return nominal
    if quota is not None and quota.borrowing_limit is not None:
        return nominal + quota.borrowing_limit
    root: QuotaNode = snapshot.root_of(snapshot.cluster_queue_node(queue_name))
    return snapshot.subtree_quota[root].get(fr, 0)


def gangs_hold_their_quota(
    ledger: QuotaLedger, holdings: Iterable[Holding], labels: Mapping[str, Mapping[str, str]]
) -> list[Violation]:
    """A quota-managed gang holding nodes holds them within its ClusterQueue's quota: each resource its
    pods hold is one the queue covers, on nodes of one of its flavors."""
    return [
        Violation("gang-holds-its-quota", holding.key, detail)
        for holding in holdings
        for detail in ledger.unreserved(holding, labels.get)
    ]
