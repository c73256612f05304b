"""A count-bucketed index: names grouped by an integer count, walked from a minimum count upwards."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, Self


class BucketIndex:
    """Names (of nodes or topology domains) bucketed by an integer count such as free devices.

    `at_least(n)` walks the names whose count is at least `n` by ascending count, then by name, so the first
    name is the tightest fit. Placing and removing a name cost a bisection over the non-empty counts plus
    one over its bucket; nothing scans all names.

    An index may be settled when read: whoever changes what it indexes only notes the changed item in
    `stale`, and a subclass's `settle` places the noted items again before every read. The snapshot's
    indexes work so: a node whose capacity changes ten times between two reads moves in an index once,
    and an index nobody reads costs one set insertion per change.
    """

    __slots__ = ("_buckets", "_counts", "_where", "stale")

    def __init__(self) -> None:
        self._buckets: dict[int, list[str]] = {}
        self._counts: list[int] = []
        self._where: dict[str, int] = {}
        self.stale: set[Any] = set()

    @classmethod
    def build(cls, entries: Iterable[tuple[str, int]]) -> Self:
        """An index of `(name, count)` entries, sorted once rather than inserted one by one."""
        index = cls()
        buckets = index._buckets
        where = index._where
        for name, count in entries:
            where[name] = count
            bucket = buckets.get(count)
            if bucket is None:
                buckets[count] = [name]
            else:
                bucket.append(name)
        for bucket in buckets.values():
            bucket.sort()
        index._counts = sorted(buckets)
        return index

    def place(self, name: str, count: int) -> None:
        """Put a name in the bucket of `count`, adding it or moving it from where it was."""
        self.place_all(((name, count),))

    def settle(self) -> None:
        """Place the items noted in `stale` again (indexes whose items are noted override this)."""
        self.stale.clear()

    def place_all(self, entries: Iterable[tuple[str, int]]) -> None:
        """`place` for each `(name, count)`: one loop, as `settle` places many names at once."""
        where = self._where
        buckets = self._buckets
        counts = self._counts
        for name, count in entries:
            old = where.get(name)
            if old == count:
                continue
            if old is not None:
                bucket = buckets[old]
                if len(bucket) == 1:
                    del buckets[old]
                    del counts[bisect_left(counts, old)]
                else:
                    del bucket[bisect_left(bucket, name)]
            where[name] = count
            target = buckets.get(count)
            if target is None:
                buckets[count] = [name]
                insort(counts, count)
            else:
                insort(target, name)

    def discard(self, name: str) -> None:
        """Take a name out of the index, if it is there."""
        old = self._where.pop(name, None)
        if old is None:
            return
        bucket = self._buckets[old]
        if len(bucket) == 1:
            del self._buckets[old]
            del self._counts[bisect_left(self._counts, old)]
        else:
            del bucket[bisect_left(bucket, name)]

    # The index knows where each name is: `remove` and `move` need no old count (kept for callers).
    def add(self, name: str, count: int) -> None:
        self.place(name, count)

    def remove(self, name: str, count: int) -> None:
        self.discard(name)

    def move(self, name: str, old: int, new: int) -> None:
        self.place(name, new)

    def at_least(self, count: int) -> Iterator[str]:
        """Names with a count of at least `count`, tightest first; the index must not change meanwhile.

        Built from C iterators rather than a generator: a cycle usually stops after the first names, and
        dropping a half-consumed generator costs more than the walk itself.
        """
        if self.stale:
            self.settle()
        counts = self._counts
        return chain.from_iterable(map(self._buckets.__getitem__, counts[bisect_left(counts, count) :]))

    def units(self, size: int, enough: int) -> int:
        """How many items of `size` the names hold together, each holding `count // size` of them; the sum
        stops growing once it reaches `enough`. An upper bound a domain is pruned on before its nodes are
        walked."""
        if self.stale:
            self.settle()
        counts = self._counts
        buckets = self._buckets
        total = 0
        for count in reversed(counts):
            if count < size:
                break
            total += len(buckets[count]) * (count // size)
            if total >= enough:
                break
        return total

    def counts_from(self, count: int) -> list[int]:
        """The counts of at least `count` that hold names, ascending (see `bucket`)."""
        if self.stale:
            self.settle()
        counts = self._counts
        return counts[bisect_left(counts, count) :]

    def bucket(self, count: int) -> Sequence[str]:
        """The names of exactly `count`, by name; read after `counts_from`, which settles the index."""
        return self._buckets.get(count, ())

    def count_of(self, name: str) -> int | None:
        """The bucket holding `name`, None if it is not indexed."""
        if self.stale:
            self.settle()
        return self._where.get(name)

    def __bool__(self) -> bool:
        return bool(self._where)

    def __len__(self) -> int:
        return len(self._where)
