"""The allocation search: exact devices for a set of claims as seen from one node, honouring classes,
selectors, counts (ExactCount / All), `firstAvailable` order, `matchAttribute` / `distinctAttribute`
constraints, and consumable capacity on shareable devices.

Depth-first with backtracking, as the upstream structured allocator does: requests in order, each
alternative in order, devices in the inventory's fixed order, skipping a device as soon as it is taken,
lacks capacity or breaks a constraint, and a request as soon as too few candidates remain. A step budget
bounds pathological searches (it is reported as a failure, never as a wrong answer)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .capacity import add, consumption, fits, qualified, subtract
from .claims import ClaimSpec, DeviceAsk
from .devices import DeviceInfo, DeviceInventory

DEFAULT_BUDGET = 100_000
"""Devices tried per search before it gives up."""

_UNSET = object()
_REMEMBERED_TAKES = 4096
"""Asks and capacity tables whose consumption is remembered before the memory is cleared."""


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One device allocated for one request (or a share of it: `consumed` capacity of a shareable device)."""

    request: str
    device: DeviceInfo
    consumed: Mapping[str, int] | None = None
    device_class: str = ""


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """The devices of one claim, and the nodes that reach all of them (None: every node); for a claim the
    pod names, that ResourceClaim's name (`resource_claim`)."""

    claim: str
    results: tuple[DeviceResult, ...]
    nodes: frozenset[str] | None
    resource_claim: str = ""


class Availability(Protocol):
    """What a search asks of the allocations already made."""

    def free(self, device: DeviceInfo) -> bool:
        """Whether an exclusive device is neither held nor shared."""
        ...

    def room(self, device: DeviceInfo, amounts: Mapping[str, int]) -> bool:
        """Whether a shareable device can still give `amounts`."""
        ...


class DeviceUsage:
    """What is allocated: exclusive devices and the claim holding each, consumed capacity of shareable ones.

    `take` never checks: the search and the allocator's commit do; `check` says whether allocations
    still fit, for a proposal computed on an older view."""

    def __init__(self) -> None:
        self.holders: dict[str, str] = {}
        self.consumed: dict[str, dict[str, int]] = {}
        self.shares: dict[str, int] = {}

    def free(self, device: DeviceInfo) -> bool:
        """An exclusive device neither held nor shared."""
        return device.id not in self.holders and device.id not in self.shares

    def room(self, device: DeviceInfo, amounts: Mapping[str, int]) -> bool:
        """Whether a share consuming `amounts` still fits a shareable device."""
        return device.id not in self.holders and fits(device.capacity, self.consumed.get(device.id), amounts)

    def take(self, allocation: ClaimAllocation) -> None:
        for result in allocation.results:
            device_id = result.device.id
            if result.consumed is None:
                self.holders[device_id] = allocation.claim
            else:
                add(self.consumed.setdefault(device_id, {}), result.consumed)
                self.shares[device_id] = self.shares.get(device_id, 0) + 1

    def release(self, allocation: ClaimAllocation) -> None:
        for result in allocation.results:
            device_id = result.device.id
            if result.consumed is None:
                if self.holders.get(device_id) == allocation.claim:
                    del self.holders[device_id]
                continue
            consumed = self.consumed.get(device_id)
            if consumed is not None:
                subtract(consumed, result.consumed)
                if not consumed:
                    del self.consumed[device_id]
            left = self.shares.get(device_id, 0) - 1
            if left > 0:
                self.shares[device_id] = left
            else:
                self.shares.pop(device_id, None)

    def check(self, allocations: Sequence[ClaimAllocation]) -> str | None:
        """Why these allocations no longer fit (a device held, capacity short), or None when they do."""
        trial = self.copy()
        for allocation in allocations:
            for result in allocation.results:
                device = result.device
                if result.consumed is None:
                    if not trial.free(device):
                        holder = trial.holders.get(device.id, "shared claims")
                        return f"device {device.id} is already allocated to {holder}"
                elif not trial.room(device, result.consumed):
                    return f"device {device.id} has not enough capacity left"
            trial.take(allocation)
        return None

    def copy(self) -> DeviceUsage:
        other = DeviceUsage()
        other.holders = dict(self.holders)
        other.consumed = {key: dict(value) for key, value in self.consumed.items()}
        other.shares = dict(self.shares)
        return other


class _OutOfBudget(Exception):
    pass


class _Search:
    """One search: the devices taken so far, the constraint values bound so far, and how to undo them."""

    def __init__(
        self,
        claims: Sequence[ClaimSpec],
        node: str | None,
        inventory: DeviceInventory,
        usage: Availability,
        budget: int,
    ) -> None:
        self.claims = claims
        self.node = node
        self.inventory = inventory
        self.usage = usage
        self.budget = budget
        self.taken: set[str] = set()
        self.sharing: dict[str, dict[str, int]] = {}
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        self.bound: list[list[object]] = [[_UNSET] * len(claim.constraints) for claim in claims]
        self.seen: list[list[set[object]]] = [[set() for _ in claim.constraints] for claim in claims]

    def claim(self, index: int) -> bool:
        if index == len(self.claims):
            return True
        return self.request(index, 0)

    def request(self, claim_index: int, request_index: int) -> bool:
        requests = self.claims[claim_index].requests
        if request_index == len(requests):
            return self.claim(claim_index + 1)
        for ask in requests[request_index].alternatives:
            candidates = self.inventory.candidates(self.node, ask.device_class, ask.selectors)
            if ask.all_devices:
                if candidates and self.take_all(claim_index, request_index, ask, candidates):
                    return True
            elif self.pick(claim_index, request_index, ask, candidates, 0, ask.count):
                return True
        return False

    def pick(
        self,
        claim_index: int,
        request_index: int,
        ask: DeviceAsk,
        candidates: tuple[DeviceInfo, ...],
        start: int,
        left: int,
    ) -> bool:
        if left == 0:
            return self.request(claim_index, request_index + 1)
        for position in range(start, len(candidates) - left + 1):
            device = candidates[position]
            undo = self.place(claim_index, ask, device)
            if undo is None:
                continue
            if self.pick(claim_index, request_index, ask, candidates, position + 1, left - 1):
                return True
            undo()
        return False

    def take_all(
        self, claim_index: int, request_index: int, ask: DeviceAsk, candidates: tuple[DeviceInfo, ...]
    ) -> bool:
        undos = []
        for device in candidates:
            undo = self.place(claim_index, ask, device)
            if undo is None:
                break
            undos.append(undo)
        else:
            if self.request(claim_index, request_index + 1):
                return True
        for undo in reversed(undos):
            undo()
        return False

    def place(self, claim_index: int, ask: DeviceAsk, device: DeviceInfo) -> Callable[[], None] | None:
        """Take the device for the ask if it is usable and keeps the constraints; the undo, or None."""
        self.budget -= 1
        if self.budget < 0:
            raise _OutOfBudget
        consumed = self.consumable(ask, device)
        if consumed is False:
            return None
        bound_changes = self.constrain(claim_index, ask, device)
        if bound_changes is None:
            return None
        result = DeviceResult(
            ask.name, device, consumed if isinstance(consumed, dict) else None, ask.device_class
        )
        self.results[claim_index].append(result)
        if result.consumed is None:
            self.taken.add(device.id)
        else:
            add(self.sharing.setdefault(device.id, {}), result.consumed)

        def undo() -> None:
            self.results[claim_index].pop()
            if result.consumed is None:
                self.taken.discard(device.id)
            else:
                subtract(self.sharing[device.id], result.consumed)
            self.revert(claim_index, bound_changes)

        return undo

    def consumable(self, ask: DeviceAsk, device: DeviceInfo) -> dict[str, int] | bool | None:
        """None for an exclusive device that is free, the consumption for a shareable one that has room,
        False when the device cannot serve the ask now."""
        if device.id in self.taken:
            return False
        requested = {qualified(name, device.driver): amount for name, amount in ask.capacity}
        if not device.shared:
            if device.id in self.sharing or not self.usage.free(device):
                return False
            if requested and consumption(device.capacity, requested) is None:
                return False
            return None
        amounts = consumption(device.capacity, requested, device.capacity_defaults)
        if amounts is None:
            return False
        pending = self.sharing.get(device.id)
        if not self.usage.room(device, _sum(pending, amounts) if pending else amounts):
            return False
        return amounts

    def constrain(
        self, claim_index: int, ask: DeviceAsk, device: DeviceInfo
    ) -> list[tuple[str, int, object]] | None:
        changes: list[tuple[str, int, object]] = []
        for position, constraint in enumerate(self.claims[claim_index].constraints):
            if not constraint.covers(ask):
                continue
            value = device.attributes.get(constraint.attribute, _UNSET)
            if value is _UNSET:
                self.revert(claim_index, changes)
                return None
            if constraint.match:
                bound = self.bound[claim_index][position]
                if bound is _UNSET:
                    self.bound[claim_index][position] = value
                    changes.append(("bound", position, value))
                elif bound != value:
                    self.revert(claim_index, changes)
                    return None
            else:
                seen = self.seen[claim_index][position]
                if value in seen:
                    self.revert(claim_index, changes)
                    return None
                seen.add(value)
                changes.append(("seen", position, value))
        return changes

    def revert(self, claim_index: int, changes: list[tuple[str, int, object]]) -> None:
        for kind, position, value in reversed(changes):
            if kind == "bound":
                self.bound[claim_index][position] = _UNSET
            else:
                self.seen[claim_index][position].discard(value)


def allocate(
    claims: Sequence[ClaimSpec],
    node: str | None,
    inventory: DeviceInventory,
    usage: Availability,
    *,
    budget: int = DEFAULT_BUDGET,
) -> tuple[ClaimAllocation, ...] | None:
    """Devices for every claim together, from those `node` reaches and `usage` leaves free, or None.

    Claims are searched together so that two claims of one pod never get the same exclusive device.
    Each allocation names the nodes that reach all its devices (a rack fabric narrows them to the rack).
    `usage` is not changed; take the result with `usage.take`. A claim allocated already takes nothing: it
    only asks that the node reach its devices."""
    ask = single_ask(claims)
    if ask is not None:
        return _first_fit(claims[0], ask, node, inventory, usage)
    if any(claim.allocated for claim in claims):  # an allocated claim has no request: never a single ask
        return _with_allocated(claims, node, inventory, usage, budget)
    search = _Search(claims, node, inventory, usage, budget)
    try:
        if not search.claim(0):
            return None
    except _OutOfBudget:
        return None
    return tuple(
        ClaimAllocation(claim.key, tuple(results), _reaching(inventory, results), claim.resource_claim)
        for claim, results in zip(claims, search.results, strict=True)
    )


def _with_allocated(
    claims: Sequence[ClaimSpec],
    node: str | None,
    inventory: DeviceInventory,
    usage: Availability,
    budget: int,
) -> tuple[ClaimAllocation, ...] | None:
    """`allocate` when some claims are allocated already: those the node reaches, the others searched."""
    found: dict[str, ClaimAllocation] = {}
    for claim in claims:
        if claim.allocated:
            reach = allocated_reach(claim.allocated, inventory)
            if reach is not None and node not in reach:
                return None
            found[claim.key] = ClaimAllocation(claim.key, (), reach, claim.resource_claim)
    rest = [claim for claim in claims if not claim.allocated]
    searched = allocate(rest, node, inventory, usage, budget=budget) if rest else ()
    if searched is None:
        return None
    found.update((allocation.claim, allocation) for allocation in searched)
    return tuple(found[claim.key] for claim in claims)


def allocated_reach(device_ids: Iterable[str], inventory: DeviceInventory) -> frozenset[str] | None:
    """The nodes that reach every one of these devices (None: every node; none when one of them is no
    longer published)."""
    nodes: frozenset[str] | None = None
    for device_id in device_ids:
        device = inventory.device(device_id)
        if device is None:
            return frozenset()
        reach = inventory.reaching_nodes(device)
        if reach is not None:
            nodes = reach if nodes is None else nodes & reach
    return nodes


def single_ask(claims: Sequence[ClaimSpec]) -> DeviceAsk | None:
    """The one ask of a lone claim with a lone request, one alternative and no constraint: any usable
    devices do, so the first that are usable are taken without a search."""
    if len(claims) != 1:
        return None
    claim = claims[0]
    if len(claim.requests) != 1 or claim.constraints:
        return None
    alternatives = claim.requests[0].alternatives
    if len(alternatives) != 1 or alternatives[0].all_devices:
        return None
    return alternatives[0]


def _first_fit(
    claim: ClaimSpec, ask: DeviceAsk, node: str | None, inventory: DeviceInventory, usage: Availability
) -> tuple[ClaimAllocation, ...] | None:
    results: list[DeviceResult] = []
    need = ask.count
    # Devices described alike share their capacity tables (see `device_info`), so what the ask takes of
    # one is what it takes of the next: worked out again only when the tables change.
    capacity: object = None
    defaults: object = None
    amounts: dict[str, int] | bool | None = False
    for device in inventory.candidates(node, ask.device_class, ask.selectors):
        if device.capacity is not capacity or device.capacity_defaults is not defaults:
            capacity, defaults = device.capacity, device.capacity_defaults
            amounts = _remembered_takes(inventory, ask, device)
        if amounts is False:
            continue
        if isinstance(amounts, dict):
            if not usage.room(device, amounts):
                continue
            results.append(DeviceResult(ask.name, device, amounts, ask.device_class))
        else:
            if not usage.free(device):
                continue
            results.append(DeviceResult(ask.name, device, None, ask.device_class))
        if len(results) == need:
            reach = _reaching(inventory, results)
            return (ClaimAllocation(claim.key, tuple(results), reach, claim.resource_claim),)
    return None


def _remembered_takes(
    inventory: DeviceInventory, ask: DeviceAsk, device: DeviceInfo
) -> dict[str, int] | bool | None:
    """`_takes`, remembered per ask and capacity tables (asks are interned with the pod shapes); the
    remembered entry holds the objects its key names, so their ids are not reused meanwhile."""
    remembered = inventory.takes
    key = (id(ask), id(device.capacity), id(device.capacity_defaults))
    known = remembered.get(key)
    if known is not None and known[0] is ask:
        return known[1]
    if len(remembered) >= _REMEMBERED_TAKES:
        remembered.clear()
    amounts = _takes(ask, device)
    remembered[key] = (ask, amounts, device.capacity, device.capacity_defaults)
    return amounts


def _takes(ask: DeviceAsk, device: DeviceInfo) -> dict[str, int] | bool | None:
    """What one allocation for the ask consumes of a shareable device, None for an exclusive device, False
    when the device can never serve the ask (it lacks or is short of a requested capacity)."""
    requested = (
        {qualified(name, device.driver): amount for name, amount in ask.capacity} if ask.capacity else {}
    )
    if device.shared:
        amounts = consumption(device.capacity, requested, device.capacity_defaults)
        return False if amounts is None else amounts
    if requested and consumption(device.capacity, requested) is None:
        return False
    return None


def allocate_for_group(
    claims: Sequence[ClaimSpec],
    nodes: Iterable[str],
    inventory: DeviceInventory,
    usage: Availability,
) -> Iterator[tuple[ClaimAllocation, ...]]:
    """Allocations of a PodGroup's own claims, one per distinct set of devices the nodes reach (a rack
    fabric: one per rack), in the nodes' order; each allocation's `nodes` is where the gang may go."""
    tried: set[tuple[str, ...]] = set()
    for node in nodes:
        reach = tuple(device.id for device in inventory.reachable(node) if device.node is None)
        if reach in tried:
            continue
        tried.add(reach)
        found = allocate(claims, node, inventory, usage)
        if found is None:
            continue
        if any(result.device.node is not None for item in found for result in item.results):
            tried.discard(reach)  # a node's own device: other nodes of the same reach are other options
        yield found


def _reaching(inventory: DeviceInventory, results: Sequence[DeviceResult]) -> frozenset[str] | None:
    nodes: frozenset[str] | None = None
    first = results[0].device.node if results else None
    if first is not None and (len(results) == 1 or all(result.device.node == first for result in results)):
        return inventory.only(first)
    for result in results:
        reach = inventory.reaching_nodes(result.device)
        if reach is not None:
            nodes = reach if nodes is None else nodes & reach
    return nodes


def _sum(base: Mapping[str, int] | None, extra: Mapping[str, int]) -> dict[str, int]:
    total = dict(base or {})
    add(total, extra)
    return total
