"""The count-bucketed index: tightest first, and settled when read."""

from __future__ import annotations

from libs.core.scheduling.buckets import BucketIndex


class _Counted(BucketIndex):
    """An index over a table of counts that notes changed names, as the snapshot's indexes do."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def settle(self) -> None:
        self.place_all([(name, self.counts[name]) for name in self.stale])
        self.stale.clear()

    def change(self, name: str, count: int) -> None:
        self.counts[name] = count
        self.stale.add(name)


def _index(**counts: int) -> _Counted:
    index = _Counted()
    for name, count in counts.items():
        index.place(name, count)
        index.counts[name] = count
    return index


def test_names_come_tightest_first_then_by_name() -> None:
    index = _index(c=3, a=5, b=3, d=1)

    assert list(index.at_least(2)) == ["b", "c", "a"]
    assert index.units(2, 100) == 1 + 1 + 2


def test_a_read_places_the_changed_names_first() -> None:
    index = _index(a=1, b=2)
    index.change("a", 4)

    assert list(index.at_least(2)) == ["b", "a"]
    assert not index.stale


def test_an_index_nobody_reads_only_notes_its_changes() -> None:
    index = _index(a=1, b=2)
    index.change("a", 3)
    index.change("a", 0)

    assert index.stale == {"a"}
    assert index.count_of("a") == 0
    assert not index.stale


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
