"""The CompositePodGroup cycle: place child PodGroups together, all or nothing over `minGroupCount` of them,
inside one domain of the composite's topology key.

Each child is placed by its own PodGroup cycle (its gang, its topology constraint, its claims), taken inside
the composite's domain; the children placed in a domain are assumed on the snapshot so the next child sees
what they took. When fewer than the children the composite still needs fit in a domain, the domain's
assumptions are forgotten and the next domain is tried. The snapshot is left as it was found: the caller
applies the decisions of a placed composite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .cycle import schedule_podgroup
from .model import (
    CycleDecision,
    GangReason,
    PodGroup,
    PodRequest,
    ResourceTotals,
    TopologyDomainRef,
    Unschedulable,
)
from .snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class CompositeGroup:
    """A CompositePodGroup as its cycle needs it. `min_group_count` is None for a basic composite (each child
    on its own); `domain` is the domain chosen when it was first placed, which later children join."""

    namespace: str
    name: str
    min_group_count: int | None = None
    topology_key: str | None = None
    domain: TopologyDomainRef | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ChildGroup:
    """One pending child PodGroup: its core view, its waiting pods, and how many of its pods are bound."""

    group: PodGroup
    pods: Sequence[PodRequest]
    bound_pods: int = 0


@dataclass(frozen=True, slots=True)
class CompositeDecision:
    """One decision per child, in the children's order; `domain` is where the composite was placed (None when
    it has no topology key or nothing was placed)."""

    decisions: tuple[CycleDecision, ...]
    domain: TopologyDomainRef | None
    placed_groups: int


def schedule_composite(
    snapshot: ClusterSnapshot,
    composite: CompositeGroup,
    children: Sequence[ChildGroup],
    *,
    needed: int,
    now: float,
) -> CompositeDecision:
    """Place the pending children so that at least `needed` of them are placed together, or none is.

    Domains of the composite's key are tried in order of free capacity of the children's primary dimension,
    tightest first (ties by name), so big domains stay whole; a placed composite's domain is the only one
    tried. Children are placed largest first (by pods, then name), so a small child does not take the room a
    large one needs. The first domain holding `needed` children wins; a child that does not fit there waits
    with its own reason. With `needed` of zero or less every child is tried on its own, inside the domain."""
    order = sorted(range(len(children)), key=lambda i: (-len(children[i].pods), children[i].group.name))
    if needed <= 0:
        decisions = _place_in(snapshot, children, order, composite.domain, now, 0)
        placed = sum(1 for decision in decisions if decision is not None and decision.placed)
        return CompositeDecision(_in_order(decisions), composite.domain, placed)
    most: tuple[int, list[CycleDecision | None]] = (-1, [])
    for domain in _domains(snapshot, composite, children, needed):
        decisions = _place_in(snapshot, children, order, domain, now, needed)
        placed = sum(1 for decision in decisions if decision is not None and decision.placed)
        if placed >= needed:
            return CompositeDecision(_in_order(decisions), domain, placed)
        if placed > most[0]:
            most = (placed, decisions)
    return _unplaced(composite, children, needed, most, now)


def _domains(
    snapshot: ClusterSnapshot, composite: CompositeGroup, children: Sequence[ChildGroup], needed: int
) -> list[TopologyDomainRef | None]:
    """The domains to try, tightest first, leaving out those whose free count of the children's primary
    dimension cannot hold the `needed` smallest children."""
    if composite.domain is not None:
        return [composite.domain]
    key = composite.topology_key
    if key is None:
        return [None]
    dimension = _primary(children)
    floor = sum(sorted(_asked(child, dimension) for child in children)[:needed])
    level = snapshot.level(key)
    held = [domain for domain in level.domains.values() if domain.count(dimension) >= floor]
    held.sort(key=lambda domain: (domain.count(dimension), domain.value))
    return [TopologyDomainRef(key, domain.value) for domain in held]


def _asked(child: ChildGroup, dimension: str) -> int:
    """What the child's pods ask of the dimension, in the units a domain counts it (whole CPU cores)."""
    total = 0
    for pod in child.pods:
        shape = pod.shape
        if shape.primary == dimension:
            total += shape.primary_request
    return total


def _primary(children: Sequence[ChildGroup]) -> str:
    """The dimension the children ask most of: the primary of their largest pod shape."""
    shapes = [pod.shape for child in children for pod in child.pods]
    if not shapes:
        return ""
    return max(shapes, key=lambda shape: shape.primary_request).primary


def _place_in(
    snapshot: ClusterSnapshot,
    children: Sequence[ChildGroup],
    order: Sequence[int],
    domain: TopologyDomainRef | None,
    now: float,
    needed: int,
) -> list[CycleDecision | None]:
    """Every child's decision inside the domain, by child position (None for a child not tried once the
    domain can no longer hold `needed` of them); the snapshot is left unchanged."""
    decisions: list[CycleDecision | None] = [None] * len(children)
    assumed: list[CycleDecision] = []
    try:
        for tried, position in enumerate(order):
            if len(assumed) + len(order) - tried < needed:
                break
            child = children[position]
            group = child.group if domain is None else replace(child.group, within=domain)
            decision = schedule_podgroup(snapshot, group, child.pods, now=now, bound_pods=child.bound_pods)
            decisions[position] = decision
            if decision.placed:
                snapshot.apply(decision)
                assumed.append(decision)
    finally:
        for decision in reversed(assumed):
            snapshot.forget(decision)
    return decisions


def _in_order(decisions: list[CycleDecision | None]) -> tuple[CycleDecision, ...]:
    assert all(decision is not None for decision in decisions)
    return tuple(decision for decision in decisions if decision is not None)


def _unplaced(
    composite: CompositeGroup,
    children: Sequence[ChildGroup],
    needed: int,
    most: tuple[int, list[CycleDecision | None]],
    now: float,
) -> CompositeDecision:
    """Every child unplaced, each saying why the composite could not be placed (and, after that, why the
    child itself did not fit where the composite came closest)."""
    placed, closest = most
    if composite.topology_key is not None and composite.domain is None:
        reason = GangReason.COMPOSITE_NO_DOMAIN.format(
            composite=composite.name, key=composite.topology_key, count=needed
        )
    else:
        reason = GangReason.COMPOSITE_BELOW_MIN.format(
            composite=composite.name, placed=max(placed, 0), count=needed
        )
    decisions = []
    for position, child in enumerate(children):
        own = closest[position] if position < len(closest) else None
        decisions.append(_refused(child, own, reason, now))
    return CompositeDecision(tuple(decisions), None, 0)


def _refused(child: ChildGroup, own: CycleDecision | None, reason: str, now: float) -> CycleDecision:
    """The child's decision with nothing placed, the composite's reason first and then the child's own."""
    if own is None or own.placed or own.unschedulable is None:
        # It fitted where the composite came closest (or was never tried): only the composite's reason holds.
        return nothing_placed(child.group, child.pods, reason, now)
    why = own.unschedulable
    return replace(own, unschedulable=replace(why, message=f"{reason}; {why.message}"))


def nothing_placed(group: PodGroup, pods: Sequence[PodRequest], message: str, now: float) -> CycleDecision:
    """A decision placing none of the group's pods, for a reason outside the group itself."""
    uids = tuple(sorted(pod.uid for pod in pods))
    why = Unschedulable(message, {}, ResourceTotals(len(pods)), group.gang_min_count or 1, group.topology_key)
    return CycleDecision(group.key, (), (), None, uids, why, now)
