"""The cohort forest with quotas and usage, as Kueue's scheduler cache keeps it (`resource_node.go`).

Each node (ClusterQueue or Cohort) has its own quota; its subtree quota adds what its children lend it (all
of a child's subtree quota, or its lendingLimit); usage past a child's local quota (what it does not lend)
counts in the parent too. What a ClusterQueue may still use is its local room plus what its ancestors have,
each step capped by the borrowingLimit of the node borrowing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from libs.core.quota.model import (
    AdmittedWorkload,
    ClusterQueueQuota,
    CohortQuota,
    Flavor,
    FlavorResource,
    Quota,
)

CLUSTER_QUEUE = "ClusterQueue"
COHORT = "Cohort"


@dataclass(frozen=True, order=True)
class Node:
    """A ClusterQueue or a Cohort in the forest."""

    kind: str
    name: str


class QuotaSnapshot:
    """Quotas and usage of every ClusterQueue and Cohort at one moment. A cohort a ClusterQueue or Cohort
    names without a Cohort object exists with no quota of its own, as upstream. ClusterQueues in a cohort
    cycle, with a flavor that does not exist, or stopped are inactive: they admit nothing.

    Built once per decision; `add`/`remove` change usage for simulations (preemption), and `copy` gives an
    independent snapshot, so the public functions of this package never change the snapshot they are given."""

    def __init__(
        self,
        flavors: Iterable[Flavor],
        cohorts: Iterable[CohortQuota],
        cluster_queues: Iterable[ClusterQueueQuota],
        workloads: Iterable[AdmittedWorkload] = (),
    ) -> None:
        self.flavors = {flavor.name: flavor for flavor in flavors}
        self.cohorts = {cohort.name: cohort for cohort in cohorts}
        self.cluster_queues = {queue.name: queue for queue in cluster_queues}
        self.parent: dict[Node, Node | None] = {}
        self.children: dict[Node, list[Node]] = {}
        self.quotas: dict[Node, Mapping[FlavorResource, Quota]] = {}
        self.cyclic: set[Node] = set()
        self._link()
        self.inactive = self._inactive()
        self.subtree_quota: dict[Node, dict[FlavorResource, int]] = {}
        for root in self.roots():
            self._accumulate(root)
        self.usage: dict[Node, dict[FlavorResource, int]] = {node: {} for node in self.parent}
        self.workloads: dict[str, AdmittedWorkload] = {}
        for workload in sorted(workloads, key=lambda w: w.name):
            self.add(workload)

    def _link(self) -> None:
        for name in sorted(self.cohorts):
            self._add_cohort(name)
        for name, queue in sorted(self.cluster_queues.items()):
            node = Node(CLUSTER_QUEUE, name)
            self.quotas[node] = queue.quotas
            self.parent[node] = self._add_cohort(queue.cohort) if queue.cohort else None
            self.children.setdefault(node, [])
        for node, parent in self.parent.items():
            if parent is not None:
                self.children[parent].append(node)
        for siblings in self.children.values():
            siblings.sort()

    def _add_cohort(self, name: str, below: frozenset[Node] = frozenset()) -> Node:
        # `below`: the cohorts whose parent chain led here. A parent among them closes a cycle, which is
        # cut there (so that every walk ends) and recorded (so that its ClusterQueues admit nothing).
        node = Node(COHORT, name)
        if node in self.parent:
            return node
        cohort = self.cohorts.get(name, CohortQuota(name))
        self.quotas[node] = cohort.quotas
        self.parent[node] = None
        self.children.setdefault(node, [])
        if cohort.parent:
            if Node(COHORT, cohort.parent) in below | {node}:
                self.cyclic.add(node)
            else:
                self.parent[node] = self._add_cohort(cohort.parent, below | {node})
        return node

    def _inactive(self) -> dict[str, str]:
        inactive: dict[str, str] = {}
        for name, queue in sorted(self.cluster_queues.items()):
            missing = self.missing_flavors(name)
            if self.in_cycle(name):
                inactive[name] = f"ClusterQueue {name} is inactive: its cohort tree has a cycle"
            elif missing:
                inactive[name] = f"ClusterQueue {name} is inactive: flavor {missing[0]} not found"
            elif queue.stopped:
                inactive[name] = f"ClusterQueue {name} is inactive: stopped"
        return inactive

    def missing_flavors(self, cluster_queue: str) -> list[str]:
        """The flavors a ClusterQueue names that do not exist, by name."""
        queue = self.cluster_queues[cluster_queue]
        return sorted(
            {flavor for group in queue.resource_groups for flavor in group.flavors} - set(self.flavors)
        )

    def in_cycle(self, cluster_queue: str) -> bool:
        """Whether the ClusterQueue's cohort tree has a cycle."""
        return any(cohort in self.cyclic for cohort in self.path_to_root(Node(CLUSTER_QUEUE, cluster_queue)))

    def roots(self) -> list[Node]:
        """Nodes without a parent, in order."""
        return sorted(node for node, parent in self.parent.items() if parent is None)

    def _accumulate(self, node: Node) -> None:
        subtree = {fr: quota.nominal for fr, quota in self.quotas[node].items()}
        for child in self.children[node]:
            self._accumulate(child)
            for fr, amount in self.subtree_quota[child].items():
                subtree[fr] = subtree.get(fr, 0) + amount - self.local_quota(child, fr)
        self.subtree_quota[node] = subtree

    def copy(self) -> QuotaSnapshot:
        """An independent snapshot: usage and admitted workloads copied, the rest shared (never changed)."""
        clone = object.__new__(QuotaSnapshot)
        clone.__dict__.update(self.__dict__)
        clone.usage = {node: dict(usage) for node, usage in self.usage.items()}
        clone.workloads = dict(self.workloads)
        return clone

    # Walking the forest.

    def cluster_queue_node(self, name: str) -> Node:
        """The node of a ClusterQueue."""
        return Node(CLUSTER_QUEUE, name)

    def path_to_root(self, node: Node) -> Iterator[Node]:
        """The node's ancestors, nearest first."""
        parent = self.parent[node]
        while parent is not None:
            yield parent
            parent = self.parent[parent]

    def root_of(self, node: Node) -> Node:
        """The root of the node's tree."""
        return next(reversed([node, *self.path_to_root(node)]))

    def subtree_cluster_queues(self, node: Node) -> list[str]:
        """Names of the ClusterQueues below (or at) a node, in order."""
        if node.kind == CLUSTER_QUEUE:
            return [node.name]
        return [name for child in self.children[node] for name in self.subtree_cluster_queues(child)]

    # Quota arithmetic (resource_node.go).

    def local_quota(self, node: Node, fr: FlavorResource) -> int:
        """What a node keeps from its parent: its subtree quota past its lendingLimit (0 without one)."""
        quota = self.quotas[node].get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree_quota[node].get(fr, 0) - quota.lending_limit)

    def local_available(self, node: Node, fr: FlavorResource) -> int:
        """Unused quota the node keeps for itself."""
        return max(0, self.local_quota(node, fr) - self.usage[node].get(fr, 0))

    def available(self, node: Node, fr: FlavorResource) -> int:
        """What the node may still use now, borrowing included (negative when over-admitted)."""
        if self.parent[node] is None:
            return self.subtree_quota[node].get(fr, 0) - self.usage[node].get(fr, 0)
        parent = self.parent[node]
        assert parent is not None
        from_parent = self.available(parent, fr)
        limit = self._borrowing_limit(node, fr)
        if limit is not None:
            local = self.local_quota(node, fr)
            stored_in_parent = self.subtree_quota[node].get(fr, 0) - local
            used_in_parent = max(0, self.usage[node].get(fr, 0) - local)
            from_parent = min(from_parent, stored_in_parent - used_in_parent + limit)
        return self.local_available(node, fr) + from_parent

    def potential_available(self, node: Node, fr: FlavorResource) -> int:
        """What the node could use if nothing were used anywhere."""
        parent = self.parent[node]
        if parent is None:
            return self.subtree_quota[node].get(fr, 0)
        potential = self.local_quota(node, fr) + self.potential_available(parent, fr)
        limit = self._borrowing_limit(node, fr)
        if limit is not None:
            potential = min(potential, self.subtree_quota[node].get(fr, 0) + limit)
        return potential

    def _borrowing_limit(self, node: Node, fr: FlavorResource) -> int | None:
        # A quota not listed is a nominal quota of 0 with no limits.
        quota = self.quotas[node].get(fr)
        return quota.borrowing_limit if quota is not None else None

    def borrowing(self, node: Node, fr: FlavorResource, extra: int = 0) -> bool:
        """Whether the node uses (with `extra` more) past its subtree quota."""
        return self.usage[node].get(fr, 0) + extra > self.subtree_quota[node].get(fr, 0)

    def within_nominal(self, node: Node, frs: Iterable[FlavorResource]) -> bool:
        """Whether the node uses no more than its subtree quota of each of `frs`."""
        return not any(self.borrowing(node, fr) for fr in frs)

    # Usage.

    def add(self, workload: AdmittedWorkload) -> None:
        """Count an admitted workload's usage in its ClusterQueue and, past local quotas, up the tree."""
        self.workloads[workload.name] = workload
        node = self.cluster_queue_node(workload.cluster_queue)
        for fr, amount in sorted(workload.usage.items()):
            self.add_usage(node, fr, amount)

    def remove(self, workload: AdmittedWorkload) -> None:
        """Undo `add`."""
        del self.workloads[workload.name]
        node = self.cluster_queue_node(workload.cluster_queue)
        for fr, amount in sorted(workload.usage.items()):
            self._remove_usage(node, fr, amount)

    def add_usage(self, node: Node, fr: FlavorResource, amount: int) -> None:
        """Usage added at a node bubbles up past what it keeps locally."""
        local_available = self.local_available(node, fr)
        self.usage[node][fr] = self.usage[node].get(fr, 0) + amount
        parent = self.parent[node]
        if parent is not None and amount > local_available:
            self.add_usage(parent, fr, amount - local_available)

    def _remove_usage(self, node: Node, fr: FlavorResource, amount: int) -> None:
        stored_in_parent = self.usage[node].get(fr, 0) - self.local_quota(node, fr)
        self.usage[node][fr] = self.usage[node].get(fr, 0) - amount
        parent = self.parent[node]
        if stored_in_parent > 0 and parent is not None:
            self._remove_usage(parent, fr, min(amount, stored_in_parent))

    def workloads_of(self, cluster_queue: str) -> list[AdmittedWorkload]:
        """The admitted workloads of a ClusterQueue, by name."""
        return sorted(
            (w for w in self.workloads.values() if w.cluster_queue == cluster_queue), key=lambda w: w.name
        )

    def weight(self, node: Node) -> float:
        """The fair-sharing weight of a node."""
        if node.kind == CLUSTER_QUEUE:
            return float(self.cluster_queues[node.name].weight)
        cohort = self.cohorts.get(node.name)
        return float(cohort.weight) if cohort is not None else 1.0
