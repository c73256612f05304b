"""Topology domains with incrementally kept free-capacity aggregates, and the per-key index over them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .buckets import BucketIndex
from .model import CPU_DIMENSION, ResourceTotals, TopologyDomainRef

if TYPE_CHECKING:
    from .capacity import NodeState


class TopologyDomain:
    """All nodes sharing one value of a topology key, with their summed free capacity.

    The aggregates (free cpu, memory, pod slots, devices per class, node count) move with every pod the
    snapshot assumes or releases, so a cycle prunes a domain without looking at its nodes. `node_index`
    buckets the domain's nodes by free count per dimension (device class, or free CPU cores) so the tightest
    node is found without a scan; it holds the dimensions its level indexes nodes by. The cluster as a
    whole is the one domain of the level with an empty key.

    The node indexes are brought up to date when they are read: a node whose capacity changes is only
    noted in `dirty` (when the domain is `tracked`, i.e. has indexes), and `settle` places the noted nodes
    again, each once however often it changed.
    """

    __slots__ = (
        "dirty",
        "free_cpu",
        "free_devices",
        "free_memory",
        "free_pods",
        "key",
        "level",
        "node_count",
        "node_index",
        "ref",
        "tracked",
        "value",
    )

    def __init__(self, key: str, value: str, level: TopologyLevel) -> None:
        self.key = key
        self.value = value
        self.level = level
        self.node_count = 0
        self.free_cpu = 0
        self.free_memory = 0
        self.free_pods = 0
        self.free_devices: dict[str, int] = {}
        self.node_index: dict[str, BucketIndex] = {}
        self.ref = TopologyDomainRef(key, value) if key else None
        self.tracked = False
        self.dirty: set[NodeState] = set()

    def settle(self) -> None:
        """Place every node noted as changed at its current counts in the node indexes."""
        dirty = self.dirty
        if not dirty:
            return
        for dimension, index in self.node_index.items():
            if dimension == CPU_DIMENSION:
                index.place_all([(node.name, node.free_cpu // 1000) for node in dirty])
            else:
                index.place_all(
                    [
                        (node.name, len(free))
                        for node in dirty
                        if (free := node.free_devices.get(dimension)) is not None
                    ]
                )
        dirty.clear()

    def count(self, dimension: str) -> int:
        """Free amount in an index dimension: devices of a class, or whole CPU cores."""
        if dimension == CPU_DIMENSION:
            return self.free_cpu // 1000
        return self.free_devices.get(dimension, 0)

    def free(self) -> ResourceTotals:
        return ResourceTotals(self.free_pods, self.free_cpu, self.free_memory, dict(self.free_devices))

    def __repr__(self) -> str:
        return f"TopologyDomain({self.key}={self.value}, nodes={self.node_count})"


class TopologyLevel:
    """Every domain of one topology key, bucketed by free count per dimension.

    `index[dimension].at_least(n)` yields the domains that could still hold `n` of that dimension, the one
    with the least free first: the bin-packing order, found in O(log domains). Indexes exist for the
    dimensions a cycle has asked about (`index` for domains, `node_dimensions` for the nodes inside each
    domain) and are kept current from then on; levels nobody packs by cost no index upkeep. Like a domain's
    node indexes, the level's are settled when read: domains whose aggregates changed wait in `dirty`.
    """

    __slots__ = ("dirty", "domains", "index", "key", "node_dimensions")

    def __init__(self, key: str) -> None:
        self.key = key
        self.domains: dict[str, TopologyDomain] = {}
        self.index: dict[str, BucketIndex] = {}
        self.node_dimensions: set[str] = set()
        self.dirty: set[TopologyDomain] = set()

    def settle(self) -> None:
        """Place every domain noted as changed at its current counts in the level's indexes."""
        dirty = self.dirty
        if not dirty:
            return
        for dimension, index in self.index.items():
            if dimension == CPU_DIMENSION:
                index.place_all([(domain.value, domain.free_cpu // 1000) for domain in dirty])
            else:
                index.place_all([(domain.value, domain.free_devices.get(dimension, 0)) for domain in dirty])
        dirty.clear()
