"""The DRA allocator's own rules, without I/O: which proposed allocations it commits, which it refuses, and
which claims it releases.

The scheduler proposes exact devices for the claims of a placement; the ledger commits a proposal whole or
refuses it whole: refused when one of its pods has ended, a device is no longer published, or a device is
held by another claim or has too little capacity left (a proposal made on a view that has moved on). A
pod's claims are released when the pod ends or is deleted; a PodGroup's when none of the pods it was
allocated with is still live, or the PodGroup is deleted. An existing ResourceClaim pods name (`shared`)
is allocated by the first proposal that brings devices for it, reserved for each pod proposed with it,
and released when no pod reserves it any more. Every decision is one output; the adapter writes
it (ResourceClaims, device rows, events) in one transaction.
"""

from __future__ import annotations

import dataclasses
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
    shared: bool = False
    """An existing ResourceClaim the pod names: no devices when it was allocated before."""


@dataclass(frozen=True, slots=True)
class Proposal:
    """A placement waiting for its claims: the PodGroup (or standalone pod) it is for, its pods, its claims."""

    namespace: str
    group_name: str
    group_uid: str
    pod_uids: tuple[str, ...]
    claims: tuple[ProposedClaim, ...]
    proposed_at: str = ""
    """Which placement this is (`status.proposal.proposedAt`): one seen again (an event delivered again, or
    the status a new leader reads) is answered once; a placement proposed anew is answered again."""
    cause: str | None = None
    """The `placement.proposed` event it came from, which its answer names."""


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
    reserved_for: tuple[ClaimOwner, ...] = ()
    """The pods reserving an existing ResourceClaim pods name (empty for a claim made from a template,
    which its owner alone reserves)."""
    proposed_at: str = ""
    """The placement it was committed for (see `Proposal.proposed_at`)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shared(self) -> bool:
        return bool(self.reserved_for)


@dataclass(frozen=True, slots=True)
class ClaimsCommitted:
    """Claims allocated for a proposal; `replaced` are their earlier allocations, given up."""

    proposal: Proposal
    claims: tuple[HeldClaim, ...]
    replaced: tuple[HeldClaim, ...] = ()
    kept: tuple[HeldClaim, ...] = ()
    """Claims of the proposal committed before with the same devices (a proposal seen twice)."""
    joined: tuple[HeldClaim, ...] = ()
    """Existing ResourceClaims allocated before that the proposal's pods now reserve too."""


@dataclass(frozen=True, slots=True)
class ClaimsRefused:
    proposal: Proposal
    reason: str


@dataclass(frozen=True, slots=True)
class ClaimsReleased:
    namespace: str
    group_uid: str
    claims: tuple[HeldClaim, ...]
    cause: str | None = None
    """The event that ended the reservations (pods finished, a PodGroup deleted), when one did."""


@dataclass(frozen=True, slots=True)
class ReservationsEnded:
    """Existing ResourceClaims some of whose pods ended while others still reserve them."""

    claims: tuple[HeldClaim, ...]


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """A device the database records as held by a claim (its `device_allocations` row)."""

    claim: str
    device: str
    exclusive: bool


@dataclass(frozen=True, slots=True)
class DevicesReconciled:
    """Device rows that no held claim accounts for (`(claim, device)`), to forget, and the consumed capacity
    of the shareable devices among them, to set to what the held claims consume (`(device, capacity,
    consumed)`). Such rows are left when a ResourceClaim is deleted (or made again under its name) while
    the pass that would have released it fails: the world read again no longer has that allocation, and
    the devices would stay taken for ever."""

    rows: tuple[tuple[str, str], ...]
    consumed: tuple[tuple[str, str, int], ...]


@dataclass(frozen=True, slots=True)
class ClaimsCollected:
    """ResourceClaims made for a pod or PodGroup that is gone or done, found with nothing allocated (left by
    a release that kept the object): deleted, as upstream's garbage collector deletes what an owner leaves."""

    uids: tuple[str, ...]


LedgerOutput = (
    ClaimsCommitted | ClaimsRefused | ClaimsReleased | ReservationsEnded | DevicesReconciled | ClaimsCollected
)


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
    _unreserved: dict[str, HeldClaim] = field(default_factory=dict)
    _reconciled: DevicesReconciled | None = None
    _collected: tuple[str, ...] = ()

    # -- inputs -----------------------------------------------------------------------------------------

    def propose(self, proposal: Proposal) -> None:
        self._pending.append(proposal)

    def propose_lost(self, outputs: Iterable[LedgerOutput]) -> None:
        """Decide again the proposals a pass answered but could not write (this ledger was read again since):
        their placements still wait for an answer, and a standalone pod's proposal is in no PodGroup's
        status for a new world to find. One already pending again (from a PodGroup's status) is not added."""
        pending = {proposal.group_uid for proposal in self._pending}
        for output in outputs:
            lost = output.proposal if isinstance(output, ClaimsCommitted | ClaimsRefused) else None
            if lost is not None and lost.group_uid not in pending:
                pending.add(lost.group_uid)
                self._pending.append(lost)

    def restore(self, claim: HeldClaim, live_pods: Iterable[str]) -> None:
        """Hold a claim found allocated in the database (a new leader's world)."""
        self.held[claim.key] = claim
        self.usage.take(claim.allocation)
        self._live_pods.setdefault(claim.group_uid, set()).update(live_pods)

    def reconcile(self, rows: Iterable[DeviceRow]) -> None:
        """Compare the database's device rows with the claims restored (before any is released): rows no
        held claim accounts for are forgotten in the next pass."""
        orphans: set[tuple[str, str]] = set()
        shared: set[str] = set()
        for row in rows:
            held = self.held.get(row.claim)
            if held is None or all(result.device.id != row.device for result in held.allocation.results):
                orphans.add((row.claim, row.device))
                if not row.exclusive:
                    shared.add(row.device)
        if not orphans:
            return
        consumed: list[tuple[str, str, int]] = []
        for device_id in sorted(shared):
            device = self.inventory.devices.get(device_id)
            used = self.usage.consumed.get(device_id, {})
            names = set(used) | set(device.capacity if device is not None else ())
            consumed += [(device_id, name, used.get(name, 0)) for name in sorted(names)]
        self._reconciled = DevicesReconciled(tuple(sorted(orphans)), tuple(consumed))

    def collect(self, uids: Iterable[str]) -> None:
        """Claim objects whose owner is gone or done and that hold nothing: deleted in the next pass."""
        self._collected = tuple(sorted({*self._collected, *uids}))

    def pods_ended(self, uids: Iterable[str], cause: str | None = None) -> None:
        """Pods that succeeded, failed or were deleted (told by `cause`): their claims go, and their
        PodGroup's once none of its pods is live."""
        ended = set(uids)
        if not ended:
            return
        self._ended |= ended
        released = [claim for claim in self.held.values() if claim.owner.uid in ended and not claim.shared]
        released += self._unreserve(ended)
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
        self.release(released, cause)

    def _unreserve(self, ended: set[str]) -> list[HeldClaim]:
        """Ended pods leave the shared claims they reserve; those no pod reserves any more, to release."""
        released: list[HeldClaim] = []
        for key, claim in list(self.held.items()):
            if not claim.shared or not any(pod.uid in ended for pod in claim.reserved_for):
                continue
            left = tuple(pod for pod in claim.reserved_for if pod.uid not in ended)
            if not left:
                released.append(claim)
                self._unreserved.pop(key, None)
                continue
            self.held[key] = self._unreserved[key] = dataclasses.replace(
                claim, owner=left[0], reserved_for=left
            )
        return released

    def group_deleted(self, uid: str, cause: str | None = None) -> None:
        self._live_pods.pop(uid, None)
        self.release([claim for claim in self.held.values() if claim.group_uid == uid], cause)

    def release(self, claims: Iterable[HeldClaim], cause: str | None = None) -> None:
        """Release claims now (reported in the next pass, naming `cause`)."""
        by_group: dict[tuple[str, str], list[HeldClaim]] = {}
        for claim in claims:
            if self.held.pop(claim.key, None) is None:
                continue
            self.usage.release(claim.allocation)
            by_group.setdefault((claim.namespace, claim.group_uid), []).append(claim)
        for (namespace, group_uid), released in sorted(by_group.items()):
            self._released.append(ClaimsReleased(namespace, group_uid, tuple(released), cause))

    # -- the pass ---------------------------------------------------------------------------------------

    def run_pass(self) -> list[LedgerOutput]:
        """Device rows to reconcile (first pass of a world), releases since the last pass, then each proposal
        committed or refused, in arrival order."""
        outputs: list[LedgerOutput] = [self._reconciled] if self._reconciled is not None else []
        self._reconciled = None
        if self._collected:
            outputs.append(ClaimsCollected(self._collected))
            self._collected = ()
        outputs += self._released
        self._released = []
        if self._unreserved:
            outputs.append(ReservationsEnded(tuple(self._unreserved.values())))
            self._unreserved = {}
        pending, self._pending = self._pending, []
        for proposal in pending:
            decided = self._decide(proposal)
            if decided is not None:
                outputs.append(decided)
        return outputs

    def _answered(self, proposal: Proposal) -> bool:
        """Whether every claim of this very placement is held as committed for it: its answer was written
        with the commit, so answering again would answer one request twice."""
        if not proposal.proposed_at or not proposal.claims:
            return False
        for proposed in proposal.claims:
            held = self.held.get(f"{proposal.namespace}/{proposed.name}")
            if held is None or held.proposed_at != proposal.proposed_at:
                return False
            if held.shared and all(pod.uid != proposed.owner.uid for pod in held.reserved_for):
                return False
            if not held.shared and held.owner.uid != proposed.owner.uid:
                return False
        return True

    def _decide(self, proposal: Proposal) -> ClaimsCommitted | ClaimsRefused | None:
        """Commit or refuse a proposal; None for one answered already (every claim committed for it)."""
        if self._answered(proposal):
            return None
        ended = [uid for uid in proposal.pod_uids if uid in self._ended]
        if ended:
            return ClaimsRefused(proposal, f"{len(ended)} pod(s) of the proposed placement have ended")
        claims: list[HeldClaim] = []
        replaced: list[HeldClaim] = []
        kept: list[HeldClaim] = []
        joined: dict[str, HeldClaim] = {}
        for proposed in proposal.claims:
            key = f"{proposal.namespace}/{proposed.name}"
            known = self.held.get(key)
            new = next((index for index, claim in enumerate(claims) if claim.key == key), None)
            if proposed.shared and new is not None:
                # Two pods of the proposal name one claim: the first brought its devices.
                if (reason := _join(claims[new], proposed, joined)) is not None:
                    return ClaimsRefused(proposal, reason)
                claims[new] = joined.pop(key)
                continue
            if proposed.shared and (known is not None or not proposed.devices):
                reason = _join(known, proposed, joined)
                if reason is not None:
                    return ClaimsRefused(proposal, reason)
                continue
            allocation = self._allocation(key, proposed)
            if allocation is None:
                return ClaimsRefused(
                    proposal, f"ResourceClaim {proposed.name}: a device is no longer published"
                )
            if known is not None:
                if known.owner.uid != proposed.owner.uid:
                    return ClaimsRefused(proposal, f"ResourceClaim {proposed.name} belongs to another owner")
                if _same_devices(known, allocation):
                    # Committed before with these devices, for this placement or one proposed anew.
                    kept.append(dataclasses.replace(known, proposed_at=proposal.proposed_at))
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
                    (proposed.owner,) if proposed.shared else (),
                    proposal.proposed_at,
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
        for claim in kept:
            self.held[claim.key] = claim
        for key, claim in joined.items():
            self.held[key] = claim
            self._unreserved.pop(key, None)
        self._live_pods.setdefault(proposal.group_uid, set()).update(proposal.pod_uids)
        return ClaimsCommitted(proposal, tuple(claims), tuple(replaced), tuple(kept), tuple(joined.values()))

    def _allocation(self, key: str, proposed: ProposedClaim) -> ClaimAllocation | None:
        return allocation_from_record({"devices": list(proposed.devices)}, self.inventory, key=key)

    def forget(self, claims: Iterable[HeldClaim]) -> None:
        """Drop claims the database refused after all (the adapter's commit failed)."""
        for claim in claims:
            if self.held.pop(claim.key, None) is not None:
                self.usage.release(claim.allocation)


def _join(known: HeldClaim | None, proposed: ProposedClaim, joined: dict[str, HeldClaim]) -> str | None:
    """A pod reserving an existing ResourceClaim allocated before (into `joined`); why not, if it cannot."""
    if known is None:
        return f"ResourceClaim {proposed.name} is not allocated"
    if not known.shared:
        return f"ResourceClaim {proposed.name} belongs to another owner"
    if proposed.devices and sorted(map(_device_id, proposed.devices)) != sorted(
        map(_device_id, known.devices)
    ):
        return f"ResourceClaim {proposed.name} is allocated other devices"
    claim = joined.get(known.key, known)
    if all(pod.uid != proposed.owner.uid for pod in claim.reserved_for):
        claim = dataclasses.replace(claim, reserved_for=(*claim.reserved_for, proposed.owner))
    joined[known.key] = claim
    return None


def _device_id(device: Mapping[str, Any]) -> str:
    return f"{device.get('driver')}/{device.get('pool')}/{device.get('device')}"


def _same_devices(known: HeldClaim, allocation: ClaimAllocation) -> bool:
    return sorted(result.device.id for result in known.allocation.results) == sorted(
        result.device.id for result in allocation.results
    )
