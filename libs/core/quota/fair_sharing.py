"""Dominant resource share as Kueue computes it (`pkg/cache/scheduler/fair_sharing.go`): per resource, what a
node borrows (usage past its subtree quota, summed over flavors) per mille of what the tree could lend it
(its parent's potential availability, summed over flavors); the largest such ratio, divided by the node's
weight. A root, and a node borrowing nothing, have share 0; a borrowing node of weight 0 an infinite one."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import total_ordering
from typing import Final

from libs.core.quota.model import FlavorResource
from libs.core.quota.snapshot import Node, QuotaSnapshot

MAX_WEIGHTED_SHARE: Final = 2**63 - 1
"""The share Kueue reports for a zero weight that borrows (math.MaxInt64)."""


@total_ordering
@dataclass(frozen=True)
class DominantResourceShare:
    """A node's share: the unweighted ratio (per mille), the resource it comes from, the weight, and whether
    the node borrows at all. Ordered as `CompareDRS`: lower is served first and preempted last."""

    ratio: float = 0.0
    resource: str = ""
    weight: float = 1.0
    borrowing: bool = False

    @property
    def weighted(self) -> float:
        """The share Kueue reports (`weightedShare`, before rounding up)."""
        if self.ratio == 0:
            return 0.0
        return math.inf if self.weight == 0 else self.ratio / self.weight

    def order(self) -> tuple[int, float]:
        """The sort key of `CompareDRS` (lower first)."""
        return self._key()

    @property
    def weighted_share(self) -> int:
        """`weightedShare` as Kueue reports it in a ClusterQueue's or Cohort's status: the weighted share
        rounded up, and the largest int64 for a zero weight that borrows."""
        return MAX_WEIGHTED_SHARE if self._zero_weight_borrows else math.ceil(self.weighted)

    @property
    def _zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    def _key(self) -> tuple[int, float]:
        # A zero weight that borrows ranks above every other share, and among such shares by ratio.
        return (1, self.ratio) if self._zero_weight_borrows else (0, self.weighted)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DominantResourceShare):
            return NotImplemented
        return self._key() < other._key()

    def same_as(self, other: DominantResourceShare) -> bool:
        """Equal as shares (neither lower nor higher)."""
        return self._key() == other._key()


def dominant_resource_share(
    snapshot: QuotaSnapshot, node: Node, extra: Mapping[FlavorResource, int] | None = None
) -> DominantResourceShare:
    """The node's share, with `extra` usage added at the node (a workload being considered)."""
    weight = snapshot.weight(node)
    parent = snapshot.parent[node]
    if parent is None:
        return DominantResourceShare(weight=weight)
    extra = extra or {}
    borrowed: dict[str, int] = {}
    for fr, quota in snapshot.subtree_quota[node].items():
        over = extra.get(fr, 0) + snapshot.usage[node].get(fr, 0) - quota
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return DominantResourceShare(weight=weight)
    lendable = _lendable(snapshot, parent)
    best = DominantResourceShare(ratio=0.0, weight=weight, borrowing=True)
    for resource in sorted(borrowed):
        if lendable.get(resource, 0) > 0:
            ratio = borrowed[resource] * 1000.0 / lendable[resource]
            if ratio > best.ratio:
                best = DominantResourceShare(ratio, resource, weight, borrowing=True)
    return best


def _lendable(snapshot: QuotaSnapshot, node: Node) -> dict[str, int]:
    """Per resource, what the tree could give `node`, summed over the flavors the root knows."""
    lendable: dict[str, int] = {}
    for fr in sorted(snapshot.subtree_quota[snapshot.root_of(node)]):
        lendable[fr[1]] = lendable.get(fr[1], 0) + snapshot.potential_available(node, fr)
    return lendable
