"""Where a lone share of a shareable device class may go: the nodes with devices of the class, each with the
room left on its roomiest device and its free cpu, memory and pod slots, kept in arrays.

A cycle placing shares asks for the nodes with enough room, cpu, memory and a pod slot, by ascending room
then name (the bin-packing order); the arrays answer in a few vector operations, so a fleet whose GPUs
still have room but whose cpu or memory is taken is not walked node by node. Every condition is
necessary only: the cycle still checks each node it is given exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain

import numpy as np
import numpy.typing as npt

from .capacity import NodeState

_Counts = npt.NDArray[np.int64]
_NONE = 2**62
"""A key above every node's: not a candidate."""
_PICKED = 4
"""Nodes picked out one by one after the first, before the rest are sorted."""
_FULL = -(2**62)
"""The free cpu recorded for a node without a free pod slot: below any request."""


class ShareRooms:
    """Nodes holding devices of one shareable class, by the room of `capacity` on their roomiest device.

    Rooms change with the shares held (`note_room`: measured again when the index is next read), free
    capacity with every placement (`note_nodes`). A node's sort key is its room times the node count plus
    its rank by name, so one comparison tests the room and the smallest key is the tightest node."""

    __slots__ = (
        "_position",
        "capacity",
        "cpu",
        "key",
        "memory",
        "names",
        "room",
        "rooms_stale",
        "smallest",
        "wide",
    )

    def __init__(
        self,
        capacity: str,
        totals: tuple[int, int],
        rooms: Mapping[str, int],
        nodes: Mapping[str, NodeState],
    ) -> None:
        self.capacity = capacity
        """The capacity rooms are counted in (the class's first, qualified)."""
        self.smallest, largest = totals
        """The smallest total of it on a device (what a whole device takes), and the largest."""
        self.names = sorted(rooms)
        self._position = {name: position for position, name in enumerate(self.names)}
        count = len(self.names)
        self.room: _Counts = np.array([rooms[name] for name in self.names], dtype=np.int64)
        self.wide = largest * count >= _NONE
        """Rooms too large for a sort key (exabytes on a huge fleet): sorted by room, then name."""
        self.key: _Counts = np.arange(count, dtype=np.int64)
        if not self.wide:
            self.key += self.room * count
        self.cpu: _Counts = np.zeros(count, dtype=np.int64)
        """Free cpu; `_FULL` on a node without a free pod slot."""
        self.memory: _Counts = np.zeros(count, dtype=np.int64)
        self.note_nodes(nodes[name] for name in self.names)
        self.rooms_stale: set[str] = set()

    def note_room(self, node: str) -> None:
        if node in self._position:
            self.rooms_stale.add(node)

    def note_nodes(self, states: Iterable[NodeState]) -> None:
        """Take the free cpu, memory and pod slots of nodes whose capacity changed."""
        position = self._position
        cpu, memory = self.cpu, self.memory
        for state in states:
            at = position.get(state.name)
            if at is not None:
                cpu[at] = state.free_cpu if state.free_pods > 0 else _FULL
                memory[at] = state.free_memory

    def at_least(self, room: int, cpu: int, memory: int, room_of: Callable[[str], int]) -> Iterator[str]:
        """Nodes with at least `room` on a device, `cpu` and `memory` free and a free pod slot, by
        ascending room then name; `room_of` measures a node whose shares changed."""
        if self.rooms_stale:
            self._settle(room_of)
        fits = self.room >= room if self.wide else self.key >= room * len(self.names)
        fits &= self.cpu >= (cpu if cpu > 0 else _FULL + 1)
        if memory > 0:
            fits &= self.memory >= memory
        if self.wide:
            positions = np.flatnonzero(fits)
            ordered = positions[np.argsort(self.room[positions], kind="stable")]
            return map(self.names.__getitem__, ordered.tolist())
        keys = np.where(fits, self.key, _NONE)
        first = int(keys.argmin())
        if keys[first] == _NONE:
            return iter(())
        return chain((self.names[first],), self._after(keys, first))

    def _after(self, keys: _Counts, first: int) -> Iterator[str]:
        # Most cycles stop at the first node and nearly all within a few more: those are picked out one
        # by one before the rest is sorted.
        names = self.names
        keys[first] = _NONE
        for _ in range(_PICKED):
            at = int(keys.argmin())
            if keys[at] == _NONE:
                return
            yield names[at]
            keys[at] = _NONE
        rest = keys[keys < _NONE]
        rest.sort()
        count = len(names)
        for key in rest.tolist():
            yield names[key % count]

    def _settle(self, room_of: Callable[[str], int]) -> None:
        position = self._position
        count = len(self.names)
        for name in self.rooms_stale:
            at = position[name]
            room = self.room[at] = room_of(name)
            if not self.wide:
                self.key[at] = room * count + at
        self.rooms_stale.clear()

    def rooms(self) -> dict[str, int]:
        """Every node and its room as last measured."""
        return dict(zip(self.names, self.room.tolist(), strict=True))
