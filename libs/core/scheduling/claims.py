"""DRA in the scheduling cycle: exact devices for the claims of the pods a cycle places, on the snapshot.

A node's own exclusive devices are free when the snapshot lists them free (so a device an `nvidia.com/gpu`
pod holds is never handed to a claim, nor the other way round); shares of shareable devices and devices
reached through a node selector (a rack fabric) are tracked in `usage`. A plan of a cycle takes devices
in an overlay of its own, so a failed or discarded plan has nothing to undo.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from libs.core.dra.allocator import ClaimAllocation, DeviceUsage, allocate, allocate_for_group
from libs.core.dra.capacity import add
from libs.core.dra.claims import ClaimSpec
from libs.core.dra.devices import DeviceInfo, DeviceInventory

from .capacity import NodeState

MAX_GROUP_OPTIONS = 64
"""PodGroup claim allocations (racks, for a rack fabric) a cycle tries before it gives up."""


class ClaimOverlay:
    """Devices one plan has taken so far, on top of the snapshot and the committed usage."""

    __slots__ = ("consumed", "taken")

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.consumed: dict[str, dict[str, int]] = {}

    def take(self, allocations: Iterable[ClaimAllocation]) -> None:
        for allocation in allocations:
            for result in allocation.results:
                if result.consumed is None:
                    self.taken.add(result.device.id)
                else:
                    add(self.consumed.setdefault(result.device.id, {}), result.consumed)


class _NodeAvailability:
    """What a search on one node may use: the snapshot's free devices, the usage, the plan's overlay."""

    __slots__ = ("node", "overlay", "taken_names", "usage")

    def __init__(self, node: NodeState, usage: DeviceUsage, overlay: ClaimOverlay | None) -> None:
        self.node = node
        self.usage = usage
        self.overlay = overlay
        self.taken_names = _taken_names(node)

    def free(self, device: DeviceInfo) -> bool:
        overlay = self.overlay
        if overlay is not None and device.id in overlay.taken:
            return False
        if device.node is None:
            return self.usage.free(device)
        return device.name not in self.taken_names

    def room(self, device: DeviceInfo, amounts: Mapping[str, int]) -> bool:
        overlay = self.overlay
        pending = overlay.consumed.get(device.id) if overlay is not None else None
        if pending:
            amounts = dict(amounts)
            add(amounts, pending)
        return self.usage.room(device, amounts)


def _taken_names(node: NodeState) -> frozenset[str]:
    """Names of the node's devices taken in some class they belong to (a device may be in several)."""
    taken: set[str] = set()
    for cls, names in node.node.devices.items():
        free = node.free_devices.get(cls, ())
        if len(free) != len(names):
            taken.update(name for name in names if name not in free)
    return frozenset(taken)


class ClaimsView:
    """The device inventory and the allocations the scheduler knows of, as the cycle consults them."""

    def __init__(self, inventory: DeviceInventory | None = None) -> None:
        self.inventory = inventory or DeviceInventory()
        self.usage = DeviceUsage()
        self.refused: set[str] = set()
        """Nodes on which the current cycle's claims found devices for fewer pods than the resource filters
        let in (for its message)."""
        self.group_refused = False
        """The current cycle's PodGroup claims could not be allocated at all."""
        self._by_owner: dict[str, tuple[ClaimAllocation, ...]] = {}

    def fit(
        self,
        claims: tuple[ClaimSpec, ...],
        node: NodeState,
        overlay: ClaimOverlay | None,
        limit: int,
    ) -> list[tuple[ClaimAllocation, ...]]:
        """Allocations for up to `limit` pods with these claims on the node, one pod after the other (each
        taken into `overlay`, which is created when None and more than one pod is wanted)."""
        found: list[tuple[ClaimAllocation, ...]] = []
        if limit > 1 and overlay is None:
            overlay = ClaimOverlay()
        available = _NodeAvailability(node, self.usage, overlay)
        for _ in range(limit):
            allocations = allocate(claims, node.name, self.inventory, available)
            if allocations is None:
                self.refused.add(node.name)  # fewer than the resource filters let in
                break
            found.append(allocations)
            if overlay is not None:
                overlay.take(allocations)
        return found

    def group_options(
        self, claims: tuple[ClaimSpec, ...], nodes: Iterable[NodeState]
    ) -> Iterator[tuple[ClaimAllocation, ...]]:
        """Allocations of a PodGroup's claims, one per distinct set of devices the nodes reach."""
        states = {node.name: node for node in nodes}

        class _Usage:
            # Group claims are searched before any pod is placed: only the committed usage counts, and a
            # node's own exclusive devices count as the snapshot says.
            @staticmethod
            def free(device: DeviceInfo) -> bool:
                if device.node is None:
                    return self.usage.free(device)
                state = states.get(device.node)
                return state is not None and device.name not in _taken_names(state)

            @staticmethod
            def room(device: DeviceInfo, amounts: Mapping[str, int]) -> bool:
                return self.usage.room(device, amounts)

        options = allocate_for_group(claims, states, self.inventory, _Usage())
        for number, option in enumerate(options):
            if number >= MAX_GROUP_OPTIONS:
                return
            yield option

    # -- what is allocated ------------------------------------------------------------------------------

    def hold(self, owner: str, allocations: Sequence[ClaimAllocation]) -> None:
        """Record allocations of a pod (`owner` = its uid) or a PodGroup (its key): shares and devices not
        on a node go into `usage` (a node's own exclusive devices are the snapshot's)."""
        self.release(owner)
        kept = tuple(_beyond_snapshot(allocation) for allocation in allocations)
        for allocation in kept:
            self.usage.take(allocation)
        self._by_owner[owner] = kept

    def release(self, owner: str) -> bool:
        """Forget an owner's allocations; True when it had some."""
        held = self._by_owner.pop(owner, None)
        if held is None:
            return False
        for allocation in held:
            self.usage.release(allocation)
        return True

    def holds(self, owner: str) -> bool:
        return owner in self._by_owner


def _beyond_snapshot(allocation: ClaimAllocation) -> ClaimAllocation:
    results = tuple(
        result for result in allocation.results if result.consumed is not None or result.device.node is None
    )
    return ClaimAllocation(allocation.claim, results, allocation.nodes)


def exclusive_devices(allocations: Iterable[ClaimAllocation], node: NodeState) -> dict[str, tuple[str, ...]]:
    """A node's own exclusive devices in the allocations, under every class of the node that lists them,
    so that the snapshot takes them out of each of its free lists."""
    names = [
        result.device.name
        for allocation in allocations
        for result in allocation.results
        if result.consumed is None and result.device.node == node.name
    ]
    if not names:
        return {}
    devices: dict[str, tuple[str, ...]] = {}
    wanted = set(names)
    for cls, listed in node.node.devices.items():
        chosen = tuple(name for name in listed if name in wanted)
        if chosen:
            devices[cls] = chosen
    return devices
