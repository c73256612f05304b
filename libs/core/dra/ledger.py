"""The DRA allocator's own rules, without I/O: which proposed allocations it commits, which it refuses, and
which claims it releases.

The scheduler proposes exact devices for the claims of a placement; the ledger commits a proposal whole or
refuses it whole: refused when one of its pods has ended, a device is no longer published, or a device is
held by another claim or has too little capacity left (a proposal made on a view that has moved on). A
pod's claims are released when the pod ends or is deleted; a PodGroup's when none of the pods it was
allocated with is still live, or the PodGroup is deleted. Every decision is one output; the adapter writes
it (ResourceClaims, device rows, events) in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .allocator import ClaimAllocation, DeviceUsage
from .devices import DeviceInventory
from .records import allocation_from_record


@dataclass(frozen=True, slots=True)
class ClaimOwner:
    """What a claim was made for: a Pod or a PodGroup."""

    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ProposedClaim:
    """One claim of a proposal: its ResourceClaim name, its name in the owner's `resourceClaims`, the owner,
    and its devices as recorded (`{request, driver, pool, device, consumedCapacity?}`)."""

    name: str
    ref: str
    owner: ClaimOwner
    devices: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Proposal:
    """A placement waiting for its claims: the PodGroup (or standalone pod) it is for, its pods, its claims."""

    namespace: str
    group_name: str
    group_uid: str
    pod_uids: tuple[str, ...]
    claims: tuple[ProposedClaim, ...]


@dataclass(frozen=True, slots=True)
class HeldClaim:
    """An allocated claim: where it came from, who reserves it, and its devices."""

    namespace: str
    name: str
    ref: str
    owner: ClaimOwner
    group_uid: str
    allocation: ClaimAllocation
    devices: tuple[Mapping[str, Any], ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ClaimsCommitted:
    """Claims allocated for a proposal; `replaced` are their earlier allocations, given up."""

    proposal: Proposal
    claims: tuple[HeldClaim, ...]
    replaced: tuple[HeldClaim, ...] = ()
    kept: tuple[HeldClaim, ...] = ()
    """Claims of the proposal committed before with the same devices (a proposal seen twice)."""


@dataclass(frozen=True, slots=True)
class ClaimsRefused:
    proposal: Proposal
    reason: str


@dataclass(frozen=True, slots=True)
class ClaimsReleased:
    namespace: str
    group_uid: str
    claims: tuple[HeldClaim, ...]


LedgerOutput = ClaimsCommitted | ClaimsRefused | ClaimsReleased


@dataclass
class ClaimLedger:
    """The claims the allocator holds, the devices they take, and what reserves them."""

    inventory: DeviceInventory = field(default_factory=DeviceInventory)
    usage: DeviceUsage = field(default_factory=DeviceUsage)
    held: dict[str, HeldClaim] = field(default_factory=dict)
    _pending: list[Proposal] = field(default_factory=list)
    _released: list[ClaimsReleased] = field(default_factory=list)
    _live_pods: dict[str, set[str]] = field(default_factory=dict)
    """PodGroup uid -> its live pods that its claims were allocated with."""
    _ended: set[str] = field(default_factory=set)

    # -- inputs -----------------------------------------------------------------------------------------

    def propose(self, proposal: Proposal) -> None:
        self._pending.append(proposal)

    def restore(self, claim: HeldClaim, live_pods: Iterable[str]) -> None:
        """Hold a claim found allocated in the database (a new leader's world)."""
        self.held[claim.key] = claim
        self.usage.take(claim.allocation)
        self._live_pods.setdefault(claim.group_uid, set()).update(live_pods)

    def pods_ended(self, uids: Iterable[str]) -> None:
        """Pods that succeeded, failed or were deleted: their claims go, and their PodGroup's once none of
        its pods is live."""
        ended = set(uids)
        if not ended:
            return
        self._ended |= ended
        released = [claim for claim in self.held.values() if claim.owner.uid in ended]
        for group_uid, live in list(self._live_pods.items()):
            if live & ended:
                live -= ended
                if not live:
                    del self._live_pods[group_uid]
                    released += [
                        claim
                        for claim in self.held.values()
                        if claim.group_uid == group_uid and claim.owner.kind == "PodGroup"
                    ]
        self.release(released)

    def group_deleted(self, uid: str) -> None:
        self._live_pods.pop(uid, None)
        self.release([claim for claim in self.held.values() if claim.group_uid == uid])

    def release(self, claims: Iterable[HeldClaim]) -> None:
        """Release claims now (reported in the next pass)."""
        by_group: dict[tuple[str, str], list[HeldClaim]] = {}
        for claim in claims:
            if self.held.pop(claim.key, None) is None:
                continue
            self.usage.release(claim.allocation)
            by_group.setdefault((claim.namespace, claim.group_uid), []).append(claim)
        for (namespace, group_uid), released in sorted(by_group.items()):
            self._released.append(ClaimsReleased(namespace, group_uid, tuple(released)))

    # -- the pass ---------------------------------------------------------------------------------------

    def run_pass(self) -> list[LedgerOutput]:
        """Releases since the last pass, then each proposal committed or refused, in arrival order."""
        outputs: list[LedgerOutput] = list(self._released)
        self._released = []
        pending, self._pending = self._pending, []
        for proposal in pending:
            outputs.append(self._decide(proposal))
        return outputs

    def _decide(self, proposal: Proposal) -> ClaimsCommitted | ClaimsRefused:
        ended = [uid for uid in proposal.pod_uids if uid in self._ended]
        if ended:
            return ClaimsRefused(proposal, f"{len(ended)} pod(s) of the proposed placement have ended")
        claims: list[HeldClaim] = []
        replaced: list[HeldClaim] = []
        kept: list[HeldClaim] = []
        for proposed in proposal.claims:
            key = f"{proposal.namespace}/{proposed.name}"
            allocation = self._allocation(key, proposed)
            if allocation is None:
                return ClaimsRefused(
                    proposal, f"ResourceClaim {proposed.name}: a device is no longer published"
                )
            known = self.held.get(key)
            if known is not None:
                if known.owner.uid != proposed.owner.uid:
                    return ClaimsRefused(proposal, f"ResourceClaim {proposed.name} belongs to another owner")
                if _same_devices(known, allocation):
                    kept.append(known)  # already committed (a proposal seen twice)
                    continue
                # The scheduler gave up on the placement this was committed for (its pods were never bound)
                # and proposes again for the same owner: the new devices replace the old.
                replaced.append(known)
            claims.append(
                HeldClaim(
                    proposal.namespace,
                    proposed.name,
                    proposed.ref,
                    proposed.owner,
                    proposal.group_uid,
                    allocation,
                    proposed.devices,
                )
            )
        for claim in replaced:
            self.usage.release(claim.allocation)
        conflict = self.usage.check([claim.allocation for claim in claims])
        if conflict is not None:
            for claim in replaced:
                self.usage.take(claim.allocation)
            return ClaimsRefused(proposal, conflict)
        for claim in claims:
            self.held[claim.key] = claim
            self.usage.take(claim.allocation)
        self._live_pods.setdefault(proposal.group_uid, set()).update(proposal.pod_uids)
        return ClaimsCommitted(proposal, tuple(claims), tuple(replaced), tuple(kept))

    def _allocation(self, key: str, proposed: ProposedClaim) -> ClaimAllocation | None:
        return allocation_from_record({"devices": list(proposed.devices)}, self.inventory, key=key)

    def forget(self, claims: Iterable[HeldClaim]) -> None:
        """Drop claims the database refused after all (the adapter's commit failed)."""
        for claim in claims:
            if self.held.pop(claim.key, None) is not None:
                self.usage.release(claim.allocation)


def _same_devices(known: HeldClaim, allocation: ClaimAllocation) -> bool:
    return sorted(result.device.id for result in known.allocation.results) == sorted(
        result.device.id for result in allocation.results
    )
