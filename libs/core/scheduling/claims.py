"""DRA in the scheduling cycle: exact devices for the claims of the pods a cycle places, on the snapshot.

A node's own exclusive devices are free when the snapshot lists them free (so a device an `nvidia.com/gpu`
pod holds is never handed to a claim, nor the other way round); shares of shareable devices and devices
reached through a node selector (a rack fabric) are tracked in `usage`. A plan of a cycle takes devices
in an overlay of its own, so a failed or discarded plan has nothing to undo.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from libs.core.dra.allocator import ClaimAllocation, DeviceUsage, allocate, allocate_for_group, single_ask
from libs.core.dra.capacity import add
from libs.core.dra.claims import ClaimSpec
from libs.core.dra.devices import DeviceInfo, DeviceInventory

from .capacity import NodeState
from .model import PodShape
from .rooms import ShareRooms

if TYPE_CHECKING:
    from .snapshot import ClusterSnapshot

MAX_GROUP_OPTIONS = 64
"""PodGroup claim allocations (racks, for a rack fabric) a cycle tries before it gives up."""


class ClaimOverlay:
    """Devices one plan has taken so far, on top of the snapshot and the committed usage."""

    __slots__ = ("consumed", "named", "nodes", "taken")

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.consumed: dict[str, dict[str, int]] = {}
        self.nodes: set[str | None] = set()
        """Nodes whose own devices the plan took (None: a device reached from several nodes)."""
        self.named: dict[str, tuple[str, ...]] = {}
        """Existing ResourceClaims the plan allocated (by name), and their devices: the plan's later pods
        naming one share it."""

    def touches(self, node: str) -> bool:
        return node in self.nodes or None in self.nodes

    def pinned(self, claims: tuple[ClaimSpec, ...]) -> tuple[ClaimSpec, ...]:
        """The claims, those the plan allocated already pinned to their devices."""
        if not self.named or not any(claim.resource_claim in self.named for claim in claims):
            return claims
        return tuple(
            dataclasses.replace(
                claim, requests=(), constraints=(), allocated=self.named[claim.resource_claim]
            )
            if claim.resource_claim in self.named and not claim.allocated
            else claim
            for claim in claims
        )

    def take(self, allocations: Iterable[ClaimAllocation]) -> None:
        for allocation in allocations:
            if allocation.resource_claim and allocation.results:
                self.named[allocation.resource_claim] = tuple(
                    result.device.id for result in allocation.results
                )
            for result in allocation.results:
                self.nodes.add(result.device.node)
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


_NOTHING: frozenset[str] = frozenset()


def _taken_names(node: NodeState) -> frozenset[str] | set[str]:
    """Names of the node's devices taken in some class they belong to (a device may be in several)."""
    taken: set[str] | None = None
    free_devices = node.free_devices
    for cls, names in node.node.devices.items():
        free = free_devices.get(cls, ())
        if len(free) != len(names):
            if taken is None:
                taken = set()
            taken.update(set(names).difference(free))
    return taken if taken is not None else _NOTHING


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
        self._releases = 0
        self._failed: dict[
            tuple[str, int], tuple[tuple[ClaimSpec, ...], tuple[int, int, tuple[int, ...]]]
        ] = {}
        """Claims a node could not serve, and its state then: taking devices never makes them fit, so
        until something is released there (or the inventory changes) the search is not run again."""
        self._rooms: dict[str, ShareRooms | None] = {}
        """Per DeviceClass whose devices are all shareable: where a share of it may go."""
        self._rooms_state: tuple[int, int, int] | None = None
        self._watching: ClusterSnapshot | None = None
        self._room_devices: dict[str, dict[str, tuple[tuple[str, int], ...]]] = {}
        """Per DeviceClass of `_rooms`: each node's devices of it, with their total of the capacity."""
        self._changed_nodes: set[NodeState] = set()
        """Nodes whose free capacity changed since the share rooms last took it (the snapshot's note)."""
        self._named: dict[str, ClaimAllocation] = {}
        """Existing ResourceClaims pods name (`namespace/name`), as allocated for the first of them."""
        self._reservers: dict[str, set[str]] = {}
        """Per such claim, the pods reserving it (placed with it, not ended)."""

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
        # What the plan took elsewhere does not change what this node can give.
        pristine = overlay is None or not overlay.touches(node.name)
        key = (node.name, id(claims))  # equal claims share one tuple (shapes are interned)
        failed = self._failed.get(key)
        if failed is not None and failed[0] is claims and failed[1] == self._state(node):
            self.refused.add(node.name)
            return found
        if limit > 1 and overlay is None:
            overlay = ClaimOverlay()
        available = _NodeAvailability(node, self.usage, overlay)
        for _ in range(limit):
            asked = overlay.pinned(claims) if overlay is not None and overlay.named else claims
            allocations = allocate(asked, node.name, self.inventory, available)
            if allocations is None:
                self.refused.add(node.name)  # fewer than the resource filters let in
                if pristine and not found and asked is claims:
                    self._failed[key] = (claims, self._state(node))
                break
            found.append(allocations)
            if overlay is not None:
                overlay.take(allocations)
        return found

    def _state(self, node: NodeState) -> tuple[int, int, tuple[int, ...]]:
        """What a node's answer to claims depends on, beyond the claims (a plan does not change it)."""
        return (self._releases, self.inventory.version, tuple(map(len, node.free_devices.values())))

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

    # -- where shares fit ------------------------------------------------------------------------------

    def room_order(
        self, claims: tuple[ClaimSpec, ...], shape: PodShape, snapshot: ClusterSnapshot
    ) -> Iterator[str] | None:
        """Nodes that may hold a lone share (or a whole device) of a class whose devices are all
        shareable, by ascending room on their roomiest device, only those with enough of it and with the
        shape's cpu, memory and a pod slot free: None when the claims are not such a share. A necessary
        condition, so a node it names may still refuse."""
        ask = single_ask(claims)
        if ask is None:
            return None
        rooms = self._share_rooms(ask.device_class, snapshot)
        if rooms is None:
            return None
        requested = dict(ask.capacity)
        need = requested.get(rooms.capacity.rpartition("/")[2], requested.get(rooms.capacity, rooms.smallest))
        return rooms.at_least(
            need, shape.cpu_milli, shape.memory, self._room_measure(ask.device_class, rooms.capacity)
        )

    def _share_rooms(self, device_class: str, snapshot: ClusterSnapshot) -> ShareRooms | None:
        state = (self.inventory.version, snapshot.node_generation, id(snapshot))
        if self._rooms_state != state:
            self._rooms.clear()
            self._room_devices.clear()
            self._rooms_state = state
        if self._changed_nodes:
            for each in self._rooms.values():
                if each is not None:
                    each.note_nodes(self._changed_nodes)
            self._changed_nodes.clear()
        if device_class in self._rooms:
            return self._rooms[device_class]
        rooms = self._rooms[device_class] = self._build_rooms(device_class, snapshot)
        if rooms is not None and self._watching is not snapshot:
            # Only once a class has shareable devices: a fleet without them pays nothing per placement.
            self._watching = snapshot
            self._changed_nodes = set()
            snapshot.watch_nodes(self._changed_nodes)
        return rooms

    def _build_rooms(self, device_class: str, snapshot: ClusterSnapshot) -> ShareRooms | None:
        """The index of a class whose devices on nodes are all shareable with a first capacity in common;
        None for any other class."""
        # Devices described alike are alike in the class, in being shareable and in their capacities:
        # each description is looked at once, so a fleet of identical GPUs costs one look.
        described: dict[str, int | None] = {}  # description -> the device's total of `name` (None: not in it)
        name: str | None = None
        totals: list[int] = []
        by_node: dict[str, list[tuple[str, int]]] = {}
        nodes = snapshot.nodes_by_name
        for device in self.inventory.devices.values():
            if device.node is None:
                continue
            if device.description not in described:
                if not self.inventory.in_class(device, device_class):
                    described[device.description] = None
                    continue
                if not device.shared or not device.capacity:
                    return None
                name = min(device.capacity) if name is None else name
                if name not in device.capacity:
                    return None
                described[device.description] = device.capacity[name]
                totals.append(device.capacity[name])
            total = described[device.description]
            if total is not None and device.node in nodes:
                by_node.setdefault(device.node, []).append((device.id, total))
        if name is None:
            return None
        self._room_devices[device_class] = {node: tuple(held) for node, held in by_node.items()}
        measure = self._room_measure(device_class, name)
        rooms = {node: measure(node) for node in by_node}
        return ShareRooms(name, (min(totals), max(totals)), rooms, nodes)

    def _room_measure(self, device_class: str, capacity: str) -> Callable[[str], int]:
        """The room of `capacity` left on a node's roomiest device of the class."""
        consumed = self.usage.consumed
        devices = self._room_devices[device_class]

        def measure(node: str) -> int:
            best = 0
            for device_id, total in devices[node]:
                used = consumed.get(device_id)
                left = total - used.get(capacity, 0) if used else total
                if left > best:
                    best = left
            return best

        return measure

    def _note_rooms(self, allocations: Iterable[ClaimAllocation]) -> None:
        if self._rooms:
            for allocation in allocations:
                for result in allocation.results:
                    if result.consumed is not None and result.device.node is not None:
                        for rooms in self._rooms.values():
                            if rooms is not None:
                                rooms.note_room(result.device.node)

    # -- what is allocated ------------------------------------------------------------------------------

    def hold(self, owner: str, allocations: Sequence[ClaimAllocation]) -> None:
        """Record allocations of a pod (`owner` = its uid) or a PodGroup (its key): shares and devices not
        on a node go into `usage` (a node's own exclusive devices are the snapshot's). Claims the pod names
        are the claim's own (see `reserve`)."""
        self.release(owner)
        kept = tuple(
            _beyond_snapshot(allocation) for allocation in allocations if not allocation.resource_claim
        )
        for allocation in kept:
            self.usage.take(allocation)
        self._by_owner[owner] = kept
        self._note_rooms(kept)

    def add(self, owner: str, allocation: ClaimAllocation) -> None:
        """Hold one more allocation for an owner (a new leader reading claims one by one)."""
        kept = _beyond_snapshot(allocation)
        self.usage.take(kept)
        self._by_owner[owner] = (*self._by_owner.get(owner, ()), kept)
        self._note_rooms((kept,))

    def release(self, owner: str) -> bool:
        """Forget an owner's allocations; True when that gave back shares or devices beyond the snapshot
        (what the snapshot's own capacity hints do not see)."""
        held = self._by_owner.pop(owner, None)
        if held is None:
            return False
        for allocation in held:
            self.usage.release(allocation)
        self._note_rooms(held)
        self._releases += 1
        self._failed.clear()
        return any(allocation.results for allocation in held)

    def holds(self, owner: str) -> bool:
        return owner in self._by_owner

    def held_by(self, owner: str) -> tuple[ClaimAllocation, ...]:
        """The shares and reached devices an owner holds (none: an empty tuple)."""
        return self._by_owner.get(owner, ())

    def set_aside(self, owners: Iterable[str]) -> dict[str, tuple[ClaimAllocation, ...]]:
        """Release the allocations of these owners for a what-if (a preemptor's simulation); what was
        released, by owner, for `put_back`."""
        aside: dict[str, tuple[ClaimAllocation, ...]] = {}
        if not self._by_owner:
            return aside
        for owner in owners:
            held = self._by_owner.get(owner)
            if held is not None:
                aside[owner] = held
                self.release(owner)
        return aside

    def put_back(self, aside: Mapping[str, tuple[ClaimAllocation, ...]]) -> None:
        """Hold again what `set_aside` released."""
        for owner, held in aside.items():
            self.hold(owner, held)

    # -- existing claims pods name ----------------------------------------------------------------------

    def named_allocation(self, key: str) -> ClaimAllocation | None:
        """The allocation of an existing ResourceClaim (`namespace/name`) some pod reserves, if any."""
        return self._named.get(key)

    def reserve(self, key: str, pod_uid: str, allocation: ClaimAllocation) -> bool:
        """A pod placed with a claim it names; True when its allocation is new (this pod allocated it): its
        shares and reached devices then go into `usage` until the last pod reserving it is gone (a node's
        own exclusive devices are the caller's to keep in the snapshot)."""
        self._reservers.setdefault(key, set()).add(pod_uid)
        if key in self._named or not allocation.results:
            return False
        self._named[key] = allocation
        self.usage.take(_beyond_snapshot(allocation))
        self._note_rooms((allocation,))
        return True

    def unreserve(self, pod_uid: str) -> list[str]:
        """A pod ended or left its node: the claims it reserved that no pod reserves any more, released."""
        released: list[str] = []
        for key, reservers in list(self._reservers.items()):
            if pod_uid not in reservers:
                continue
            reservers.discard(pod_uid)
            if reservers:
                continue
            del self._reservers[key]
            allocation = self._named.pop(key, None)
            if allocation is not None:
                self.usage.release(_beyond_snapshot(allocation))
                self._note_rooms((allocation,))
                self._releases += 1
                self._failed.clear()
                released.append(key)
        return released

    def share_rooms(self, device_class: str) -> dict[str, int]:
        """The room of each node's roomiest device of a shareable class as the share room index last
        measured it (empty before a cycle asked for it)."""
        rooms = self._rooms.get(device_class)
        return rooms.rooms() if rooms is not None else {}


def _beyond_snapshot(allocation: ClaimAllocation) -> ClaimAllocation:
    results = tuple(
        result for result in allocation.results if result.consumed is not None or result.device.node is None
    )
    if len(results) == len(allocation.results):
        return allocation  # nothing is the snapshot's: held as it is, one object fewer per pod
    return ClaimAllocation(allocation.claim, results, allocation.nodes)


def exclusive_devices(
    allocations: Iterable[ClaimAllocation], node: NodeState, *, named: bool = False
) -> dict[str, tuple[str, ...]]:
    """A node's own exclusive devices in the allocations, under every class of the node that lists them,
    so that the snapshot takes them out of each of its free lists: those of the pod's own claims, or (with
    `named`) those of the existing ResourceClaims it names."""
    names: list[str] = []
    for allocation in allocations:
        if bool(allocation.resource_claim) != named:
            continue  # a claim the pod names holds its devices for every pod sharing it
        for result in allocation.results:
            if result.consumed is None and result.device.node == node.name:
                names.append(result.device.name)
    if not names:
        return {}
    devices: dict[str, tuple[str, ...]] = {}
    wanted = set(names)
    for cls, listed in node.node.devices.items():
        chosen = tuple(name for name in listed if name in wanted)
        if chosen:
            devices[cls] = chosen
    return devices
