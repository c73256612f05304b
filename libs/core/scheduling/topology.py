"""Topology domains with incrementally kept free-capacity aggregates, and the per-key index over them."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import TYPE_CHECKING

from .buckets import BucketIndex
from .model import CPU_DIMENSION, ResourceTotals, TopologyDomainRef

if TYPE_CHECKING:
    from .capacity import NodeState
    from .nesting import Nesting


class NodeIndex(BucketIndex):
    """A domain's nodes bucketed by free count of one dimension (device class, or whole CPU cores); nodes
    whose capacity changed wait in `stale` until the index is next read."""

    __slots__ = ("dimension",)

    def __init__(self, dimension: str = "") -> None:
        super().__init__()
        self.dimension = dimension

    def settle(self) -> None:
        stale: set[NodeState] = self.stale
        dimension = self.dimension
        if dimension == CPU_DIMENSION:
            self.place_all([(node.name, node.free_cpu // 1000) for node in stale])
        else:
            self.place_all(
                [
                    (node.name, len(free))
                    for node in stale
                    if (free := node.free_devices.get(dimension)) is not None
                ]
            )
        stale.clear()


class NestedNodeIndex:
    """A domain's nodes bucketed by free count of one dimension, read from the node indexes of the finer
    domains it is made of (a block's from its racks'), in the same order a `NodeIndex` of its own walks
    them: a node whose capacity changes then moves in its finer domain's index alone."""

    __slots__ = ("dimension", "parts")

    def __init__(self, dimension: str, parts: list[NodeIndex]) -> None:
        self.dimension = dimension
        self.parts = parts

    def at_least(self, count: int) -> Iterator[str]:
        """Names with a count of at least `count`, tightest first, then by name (see `BucketIndex`)."""
        counts = sorted({value for part in self.parts for value in part.counts_from(count)})
        return chain.from_iterable(map(self._bucket, counts))

    def _bucket(self, count: int) -> list[str]:
        # The parts' buckets are each sorted: the sort merges their runs.
        return sorted(chain.from_iterable([part.bucket(count) for part in self.parts]))

    def units(self, size: int, enough: int) -> int:
        """`BucketIndex.units` over the parts together: their sum, which stops growing at `enough`."""
        total = 0
        for part in self.parts:
            total += part.units(size, enough - total)
            if total >= enough:
                break
        return total


class DomainIndex(BucketIndex):
    """A level's domains bucketed by free count of one dimension; domains whose aggregates changed wait in
    `stale` until the index is next read."""

    __slots__ = ("dimension",)

    def __init__(self, dimension: str = "") -> None:
        super().__init__()
        self.dimension = dimension

    def settle(self) -> None:
        stale: set[TopologyDomain] = self.stale
        dimension = self.dimension
        if dimension == CPU_DIMENSION:
            self.place_all([(domain.value, domain.free_cpu // 1000) for domain in stale])
        else:
            self.place_all([(domain.value, domain.free_devices.get(dimension, 0)) for domain in stale])
        stale.clear()


class TopologyDomain:
    """All nodes sharing one value of a topology key, with their summed free capacity.

    The aggregates (free cpu, memory, pod slots, devices per class, node count) move with every pod the
    snapshot assumes or releases, so a cycle prunes a domain without looking at its nodes. `node_index`
    buckets the domain's nodes by free count per dimension (device class, or free CPU cores) so the tightest
    node is found without a scan; it holds the dimensions its level indexes nodes by. The cluster as a
    whole is the one domain of the level with an empty key.

    Node indexes are brought up to date when they are read: a node whose capacity changes is only added
    to each index's stale set (`stale` lists them, so that the change costs a set insertion per index).
    """

    __slots__ = (
        "free_cpu",
        "free_devices",
        "free_memory",
        "free_pods",
        "key",
        "level",
        "node_count",
        "node_index",
        "ref",
        "stale",
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
        self.node_index: dict[str, NodeIndex | NestedNodeIndex] = {}
        self.ref = TopologyDomainRef(key, value) if key else None
        self.stale: list[set[NodeState]] = []

    def index_nodes(self, index: NodeIndex) -> None:
        """Keep `index` as the domain's node index of its dimension."""
        self.node_index[index.dimension] = index
        self.stale.append(index.stale)

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
    domain) and are kept current from then on; levels nobody packs by cost no index upkeep. Like the node
    indexes, the level's are settled when read: `stale` lists their stale sets.
    """

    __slots__ = ("domains", "index", "key", "nesting", "node_dimensions", "stale")

    def __init__(self, key: str) -> None:
        self.key = key
        self.domains: dict[str, TopologyDomain] = {}
        self.index: dict[str, DomainIndex] = {}
        self.node_dimensions: set[str] = set()
        self.stale: list[set[TopologyDomain]] = []
        self.nesting: Nesting | None = None
        """How the level's domains are made of the next finer level's, when its node indexes are read
        through that level's (`NestedNodeIndex`)."""

    def index_domains(self, index: DomainIndex) -> None:
        """Keep `index` as the level's domain index of its dimension."""
        self.index[index.dimension] = index
        self.stale.append(index.stale)
