"""A count-bucketed index: names grouped by an integer count, walked from a minimum count upwards."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from itertools import chain


class BucketIndex:
    """Names (of nodes or topology domains) bucketed by an integer count such as free devices.

    `at_least(n)` walks the names whose count is at least `n` by ascending count, then by name, so the first
    name is the tightest fit. Adding, removing and moving a name cost a bisection over the non-empty counts
    plus one over its bucket; nothing scans all names.
    """

    __slots__ = ("_buckets", "_counts")

    def __init__(self) -> None:
        self._buckets: dict[int, list[str]] = {}
        self._counts: list[int] = []

    @classmethod
    def build(cls, entries: Iterable[tuple[str, int]]) -> BucketIndex:
        """An index of `(name, count)` entries, sorted once rather than inserted one by one."""
        index = cls()
        buckets = index._buckets
        for name, count in entries:
            bucket = buckets.get(count)
            if bucket is None:
                buckets[count] = [name]
            else:
                bucket.append(name)
        for bucket in buckets.values():
            bucket.sort()
        index._counts = sorted(buckets)
        return index

    def add(self, name: str, count: int) -> None:
        bucket = self._buckets.get(count)
        if bucket is None:
            self._buckets[count] = [name]
            insort(self._counts, count)
        else:
            insort(bucket, name)

    def remove(self, name: str, count: int) -> None:
        bucket = self._buckets[count]
        if len(bucket) == 1:
            del self._buckets[count]
            del self._counts[bisect_left(self._counts, count)]
        else:
            del bucket[bisect_left(bucket, name)]

    def move(self, name: str, old: int, new: int) -> None:
        if old == new:
            return
        buckets = self._buckets
        bucket = buckets[old]
        if len(bucket) == 1:
            del buckets[old]
            counts = self._counts
            del counts[bisect_left(counts, old)]
        else:
            del bucket[bisect_left(bucket, name)]
        target = buckets.get(new)
        if target is None:
            buckets[new] = [name]
            insort(self._counts, new)
        else:
            insort(target, name)

    def at_least(self, count: int) -> Iterator[str]:
        """Names with a count of at least `count`, tightest first; the index must not change meanwhile.

        Built from C iterators rather than a generator: a cycle usually stops after the first names, and
        dropping a half-consumed generator costs more than the walk itself.
        """
        counts = self._counts
        return chain.from_iterable(map(self._buckets.__getitem__, counts[bisect_left(counts, count) :]))

    def count_of(self, name: str) -> int | None:
        """The bucket holding `name` (a linear search, for tests and consistency checks)."""
        for count, bucket in self._buckets.items():
            position = bisect_left(bucket, name)
            if position < len(bucket) and bucket[position] == name:
                return count
        return None

    def __bool__(self) -> bool:
        return bool(self._counts)

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets.values())
