"""A topology level made of the domains of the next finer one (blocks of racks), for as long as it is."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Literal

from .capacity import NodeState

_Pair = tuple[str | None, str]


class Nesting:
    """Which finer domains make up each domain of a level: every node with the level's key has the finer
    key too, and each finer domain lies in one domain of the level (or in none).

    The nodes are counted per pair of values, so that a node change that would make a new pair or take
    away the last node of one (a new rack, a rack gone, a rack seen in a second block) is told apart
    without looking at any other node. `dimensions` are those whose node indexes the level reads through
    the finer level's.
    """

    __slots__ = ("dimensions", "finer_key", "key", "pairs")

    def __init__(self, key: str, finer_key: str, pairs: Counter[_Pair]) -> None:
        self.key = key
        self.finer_key = finer_key
        self.pairs = pairs
        self.dimensions: set[str] = set()

    @classmethod
    def of(cls, key: str, finer_key: str, states: Iterable[NodeState]) -> Nesting | None:
        """The nesting of `key`'s domains in `finer_key`'s, None when the nodes do not nest so."""
        pairs: Counter[_Pair] = Counter()
        for state in states:
            pair = _pair(key, finer_key, state.labels)
            if pair is False:
                return None
            if pair is not None:
                pairs[pair] += 1
        parents: dict[str, str | None] = {}
        for value, finer in pairs:
            if parents.setdefault(finer, value) != value:
                return None
        return cls(key, finer_key, pairs)

    def parts(self) -> dict[str, list[str]]:
        """The finer values making up each value of the level, by name."""
        parts: dict[str, list[str]] = {}
        for value, finer in sorted(self.pairs, key=_finer_of):
            if value is not None:
                parts.setdefault(value, []).append(finer)
        return parts

    def keeps(self, old: Mapping[str, str] | None, new: Mapping[str, str] | None) -> bool:
        """Count a node whose labels change from `old` to `new` (None: not there before, or gone); False
        when the change makes or ends a pair, after which the counts no longer matter."""
        before = None if old is None else _pair(self.key, self.finer_key, old)
        after = None if new is None else _pair(self.key, self.finer_key, new)
        if before == after:
            return True
        if after is False or before is False:
            return False
        pairs = self.pairs
        if before is not None:
            pairs[before] -= 1
            if not pairs[before]:
                return False
        if after is not None:
            pairs[after] += 1
            if pairs[after] == 1:
                return False
        return True


def _pair(key: str, finer_key: str, labels: Mapping[str, str]) -> _Pair | Literal[False] | None:
    """A node's pair of values (None: it has neither key; False: the level's key without the finer one)."""
    finer = labels.get(finer_key)
    if finer is None:
        return False if key in labels else None
    return labels.get(key), finer


def _finer_of(pair: _Pair) -> str:
    return pair[1]
