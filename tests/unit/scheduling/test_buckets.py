"""The count-bucketed index: tightest first, and settled when read."""

from __future__ import annotations

from libs.core.scheduling.buckets import BucketIndex
from libs.core.scheduling.capacity import NodeState
from libs.core.scheduling.model import CPU_DIMENSION
from libs.core.scheduling.topology import NodeIndex
from tests.unit.scheduling.builders import make_node


def _index(**counts: int) -> BucketIndex:
    index = BucketIndex()
    for name, count in counts.items():
        index.place(name, count)
    return index


class _Cores:
    """A node index by free whole cores over real node states, changed the way the snapshot changes them:
    a node's capacity moves and the node is only noted in the index's `stale`."""

    def __init__(self, **cores: int) -> None:
        self.nodes = {
            name: NodeState(make_node(name, gpus=0, cpu=count), {}) for name, count in cores.items()
        }
        self.index = NodeIndex(CPU_DIMENSION)
        self.index.place_all((name, count) for name, count in cores.items())

    def change(self, name: str, cores: int) -> None:
        node = self.nodes[name]
        node.free_cpu = cores * 1000
        self.index.stale.add(node)


def test_names_come_tightest_first_then_by_name() -> None:
    index = _index(c=3, a=5, b=3, d=1)

    assert list(index.at_least(2)) == ["b", "c", "a"]
    assert index.units(2, 100) == 1 + 1 + 2


def test_a_read_places_the_changed_names_first() -> None:
    cores = _Cores(a=1, b=2)
    cores.change("a", 4)

    assert list(cores.index.at_least(2)) == ["b", "a"]
    assert not cores.index.stale


def test_an_index_nobody_reads_only_notes_its_changes() -> None:
    cores = _Cores(a=1, b=2)
    cores.change("a", 3)
    cores.change("a", 0)

    assert cores.index.stale == {cores.nodes["a"]}
    assert cores.index.count_of("a") == 0
    assert not cores.index.stale


def test_units_counts_what_the_names_hold_together_and_stops_at_enough() -> None:
    index = _index(a=8, b=8, c=4, d=3)

    assert index.units(4, 100) == 2 + 2 + 1
    assert index.units(4, 3) >= 3
    assert index.units(9, 100) == 0


def test_discarded_names_leave_the_index() -> None:
    index = _index(a=1, b=1)
    index.discard("a")

    assert list(index.at_least(0)) == ["b"]
    assert len(index) == 1
