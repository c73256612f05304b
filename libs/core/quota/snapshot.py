"""The cohort forest with quotas and usage, as Kueue's scheduler cache keeps it (`resource_node.go`).

Each node (ClusterQueue or Cohort) has its own quota; its subtree quota adds what its children lend it (all
of a child's subtree quota, or its lendingLimit); usage past a child's local quota (what it does not lend)
counts in the parent too. What a ClusterQueue may still use is its local room plus what its ancestors have,
each step capped by the borrowingLimit of the node borrowing."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import NamedTuple

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


class Node(NamedTuple):
    """A ClusterQueue or a Cohort in the forest (a tuple: hashed and compared as fast as one)."""

    kind: str
    name: str


_Path = tuple[tuple["Node", int], tuple[tuple["Node", int, int, int | None], ...]]
"""A node's path for one (flavor, resource): its root with the root's quota, then each node down to it with
its subtree quota, what it keeps and its borrowing limit."""


class QuotaSnapshot:
    """Quotas and usage of every ClusterQueue and Cohort at one moment. A cohort a ClusterQueue or Cohort
    names without a Cohort object exists with no quota of its own, as upstream. ClusterQueues in a cohort
    cycle, with a flavor that does not exist, or stopped are inactive: they admit nothing.

    Built once per decision; `add`/`remove` change usage for simulations (preemption), and `copy` gives an
    independent snapshot, so the public functions of this package never change the snapshot they are given.
    A copy shares the per-node usage and per-queue workloads with its original until either side changes
    them (each side then copies what it changes first), so copying costs little however large the forest."""

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
        # Fixed once the forest is built: what each node keeps from its parent, its borrowing limits, and
        # (filled as asked) what it could use with nothing used anywhere.
        self._local: dict[Node, dict[FlavorResource, int]] = {
            node: {fr: kept for fr in quotas if (kept := self._kept(node, fr))}
            for node, quotas in self.quotas.items()
        }
        self._borrowing_limits: dict[Node, dict[FlavorResource, int]] = {
            node: {fr: q.borrowing_limit for fr, q in quotas.items() if q.borrowing_limit is not None}
            for node, quotas in self.quotas.items()
        }
        self._potential: dict[tuple[Node, FlavorResource], int] = {}
        self._roots: dict[Node, Node] = {}
        self._paths: dict[tuple[Node, FlavorResource], _Path] = {}
        self._queue_nodes = {name: Node(CLUSTER_QUEUE, name) for name in self.cluster_queues}
        self._subtree_queues: dict[Node, tuple[str, ...]] = {}
        self.usage: dict[Node, dict[FlavorResource, int]] = {node: {} for node in self.parent}
        self._by_queue: dict[str, dict[str, AdmittedWorkload]] = {}
        self._own_usage: set[Node] = set(self.usage)
        """The nodes whose usage dict no copy shares: changed in place."""
        self._own_queues: set[str] = set()
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
                subtree[fr] = subtree.get(fr, 0) + amount - self._kept(child, fr)
        self.subtree_quota[node] = subtree

    def copy(self) -> QuotaSnapshot:
        """An independent snapshot: usage and admitted workloads copied (on either side's first change of
        each), the rest shared (never changed)."""
        clone = object.__new__(QuotaSnapshot)
        clone.__dict__.update(self.__dict__)
        clone.usage = dict(self.usage)
        clone._by_queue = dict(self._by_queue)
        self._own_usage, clone._own_usage = set(), set()
        self._own_queues, clone._own_queues = set(), set()
        return clone

    def _usage_to_change(self, node: Node) -> dict[FlavorResource, int]:
        if node not in self._own_usage:
            self.usage[node] = dict(self.usage[node])
            self._own_usage.add(node)
        return self.usage[node]

    def _workloads_to_change(self, cluster_queue: str) -> dict[str, AdmittedWorkload]:
        if cluster_queue not in self._own_queues:
            self._by_queue[cluster_queue] = dict(self._by_queue.get(cluster_queue, {}))
            self._own_queues.add(cluster_queue)
        return self._by_queue[cluster_queue]

    @property
    def workloads(self) -> dict[str, AdmittedWorkload]:
        """Every admitted workload by name (a new dict: changing it changes nothing here)."""
        return {name: w for queue in self._by_queue.values() for name, w in queue.items()}

    # Walking the forest.

    def cluster_queue_node(self, name: str) -> Node:
        """The node of a ClusterQueue."""
        found = self._queue_nodes.get(name)
        return found if found is not None else Node(CLUSTER_QUEUE, name)

    def path_to_root(self, node: Node) -> Iterator[Node]:
        """The node's ancestors, nearest first."""
        parent = self.parent[node]
        while parent is not None:
            yield parent
            parent = self.parent[parent]

    def root_of(self, node: Node) -> Node:
        """The root of the node's tree."""
        found = self._roots.get(node)
        if found is None:
            found = self._roots[node] = next(reversed([node, *self.path_to_root(node)]))
        return found

    def subtree_cluster_queues(self, node: Node) -> list[str]:
        """Names of the ClusterQueues below (or at) a node, in order."""
        return list(self._queues_below(node))

    def _queues_below(self, node: Node) -> tuple[str, ...]:
        found = self._subtree_queues.get(node)
        if found is None:
            found = self._subtree_queues[node] = (
                (node.name,)
                if node.kind == CLUSTER_QUEUE
                else tuple(name for child in self.children[node] for name in self._queues_below(child))
            )
        return found

    # Quota arithmetic (resource_node.go).

    def _kept(self, node: Node, fr: FlavorResource) -> int:
        quota = self.quotas[node].get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree_quota[node].get(fr, 0) - quota.lending_limit)

    def local_quota(self, node: Node, fr: FlavorResource) -> int:
        """What a node keeps from its parent: its subtree quota past its lendingLimit (0 without one)."""
        return self._local[node].get(fr, 0)

    def local_available(self, node: Node, fr: FlavorResource) -> int:
        """Unused quota the node keeps for itself."""
        return max(0, self._local[node].get(fr, 0) - self.usage[node].get(fr, 0))

    def available(self, node: Node, fr: FlavorResource) -> int:
        """What the node may still use now, borrowing included (negative when over-admitted): what its root
        has, then, down the path to the node, at each step what that node keeps unused plus what it may
        take from its parent (capped by its borrowing limit)."""
        path = self._paths.get((node, fr)) or self._path_from_root(node, fr)
        usage = self.usage
        root, root_quota = path[0]
        available = root_quota - usage[root].get(fr, 0)
        for step, subtree, local, limit in path[1]:
            used = usage[step].get(fr, 0)
            if limit is not None:
                available = min(available, subtree - local - max(0, used - local) + limit)
            available += max(0, local - used)
        return available

    def _path_from_root(self, node: Node, fr: FlavorResource) -> _Path:
        # A quota not listed is a nominal quota of 0 with no limits.
        root, *below = reversed([node, *self.path_to_root(node)])
        path = (
            (root, self.subtree_quota[root].get(fr, 0)),
            tuple(
                (
                    step,
                    self.subtree_quota[step].get(fr, 0),
                    self._local[step].get(fr, 0),
                    self._borrowing_limits[step].get(fr),
                )
                for step in below
            ),
        )
        self._paths[(node, fr)] = path
        return path

    def potential_available(self, node: Node, fr: FlavorResource) -> int:
        """What the node could use if nothing were used anywhere."""
        found = self._potential.get((node, fr))
        if found is None:
            found = self._potential[(node, fr)] = self._potential_available(node, fr)
        return found

    def _potential_available(self, node: Node, fr: FlavorResource) -> int:
        parent = self.parent[node]
        if parent is None:
            return self.subtree_quota[node].get(fr, 0)
        potential = self.local_quota(node, fr) + self.potential_available(parent, fr)
        limit = self._borrowing_limits[node].get(fr)
        if limit is not None:
            potential = min(potential, self.subtree_quota[node].get(fr, 0) + limit)
        return potential

    def borrowing(self, node: Node, fr: FlavorResource, extra: int = 0) -> bool:
        """Whether the node uses (with `extra` more) past its subtree quota."""
        return self.usage[node].get(fr, 0) + extra > self.subtree_quota[node].get(fr, 0)

    def borrowing_queues(self, node: Node, frs: Collection[FlavorResource]) -> list[str]:
        """The ClusterQueues below (or at) a node, in order, that use more than their subtree quota of one of
        `frs`."""
        usage, subtree = self.usage, self.subtree_quota
        found = []
        for name in self._queues_below(node):
            queue = self._queue_nodes[name]
            used, quota = usage[queue], subtree[queue]
            for fr in frs:
                if used.get(fr, 0) > quota.get(fr, 0):
                    found.append(name)
                    break
        return found

    def within_nominal(self, node: Node, frs: Iterable[FlavorResource]) -> bool:
        """Whether the node uses no more than its subtree quota of each of `frs`."""
        usage, quota = self.usage[node], self.subtree_quota[node]
        for fr in frs:  # noqa: SIM110 - a loop is faster than all() on one to three pairs
            if usage.get(fr, 0) > quota.get(fr, 0):
                return False
        return True

    # Usage.

    def add(self, workload: AdmittedWorkload) -> None:
        """Count an admitted workload's usage in its ClusterQueue and, past local quotas, up the tree."""
        self._workloads_to_change(workload.cluster_queue)[workload.name] = workload
        node = self.cluster_queue_node(workload.cluster_queue)
        for fr, amount in sorted(workload.usage.items()):
            self.add_usage(node, fr, amount)

    def remove(self, workload: AdmittedWorkload) -> None:
        """Undo `add`."""
        del self._workloads_to_change(workload.cluster_queue)[workload.name]
        node = self.cluster_queue_node(workload.cluster_queue)
        for fr, amount in sorted(workload.usage.items()):
            self._remove_usage(node, fr, amount)

    def add_usage(self, node: Node, fr: FlavorResource, amount: int) -> None:
        """Usage added at a node bubbles up past what it keeps locally."""
        local_available = self.local_available(node, fr)
        usage = self._usage_to_change(node)
        usage[fr] = usage.get(fr, 0) + amount
        parent = self.parent[node]
        if parent is not None and amount > local_available:
            self.add_usage(parent, fr, amount - local_available)

    def _remove_usage(self, node: Node, fr: FlavorResource, amount: int) -> None:
        usage = self._usage_to_change(node)
        stored_in_parent = usage.get(fr, 0) - self.local_quota(node, fr)
        usage[fr] = usage.get(fr, 0) - amount
        parent = self.parent[node]
        if stored_in_parent > 0 and parent is not None:
            self._remove_usage(parent, fr, min(amount, stored_in_parent))

    def workloads_of(self, cluster_queue: str) -> list[AdmittedWorkload]:
        """The admitted workloads of a ClusterQueue, by name."""
        return sorted(self.workloads_in(cluster_queue), key=lambda w: w.name)

    def workloads_in(self, cluster_queue: str) -> Collection[AdmittedWorkload]:
        """The admitted workloads of a ClusterQueue, in no particular order (a view: read it before the
        snapshot changes)."""
        return self._by_queue.get(cluster_queue, {}).values()

    def weight(self, node: Node) -> float:
        """The fair-sharing weight of a node."""
        if node.kind == CLUSTER_QUEUE:
            return float(self.cluster_queues[node.name].weight)
        cohort = self.cohorts.get(node.name)
        return float(cohort.weight) if cohort is not None else 1.0
