"""Room taken out of the snapshot for a what-if and put back: the pods' placements (their node's capacity
and exclusive devices, those of their ResourceClaims included) and the claim allocations the snapshot does
not hold itself (shares of shareable devices, devices reached through a node selector)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from libs.core.dra.allocator import ClaimAllocation
from libs.core.scheduling.model import Placement
from libs.core.scheduling.snapshot import ClusterSnapshot


@dataclass(slots=True)
class TakenOut:
    """What `take_out` released, for `put_back`."""

    placements: list[Placement]
    claims: dict[str, tuple[ClaimAllocation, ...]]


def take_out(snapshot: ClusterSnapshot, pod_uids: Sequence[str], groups: Sequence[str] = ()) -> TakenOut:
    """Release pods and their claims' allocations, and the allocations of the PodGroups (keys) in
    `groups`, whose own claims are released once none of their pods holds room."""
    placements = snapshot.release_many(pod_uids)
    view = snapshot.claims
    if view is None:
        return TakenOut(placements, {})
    aside = view.set_aside(pod_uids)
    if groups:
        aside.update(view.set_aside(groups))
    return TakenOut(placements, aside)


def put_back(snapshot: ClusterSnapshot, taken: Iterable[TakenOut]) -> None:
    """Hold again what `take_out` released (all the placements at once: PlacementConflict, if any,
    before any claim is held again)."""
    taken = list(taken)
    snapshot.restore_many([placement for out in taken for placement in out.placements])
    view = snapshot.claims
    if view is not None:
        for out in taken:
            if out.claims:
                view.put_back(out.claims)
