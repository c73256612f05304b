"""Between the claim ledger and the database: the ledger a new leader loads, and a pass's outputs written in
one transaction (device rows, ResourceClaims, owners' claim statuses, events).

A committed claim is a ResourceClaim named after its owner (`<pod>-<claim>`, `<podgroup>-<claim>`), owned by
it, with the template's spec, `status.allocation` and `status.reservedFor`; the owner's
`status.resourceClaimStatuses` names it; it is deleted when released (its pod ended, or its PodGroup's pods
all did), as upstream's resourceclaim controller deletes the claims it made for a pod once the pod is done.
An existing ResourceClaim pods name (`resourceClaimName`) is the user's: its `status.allocation` is written
when the first pod allocates it, `status.reservedFor` lists every pod reserving it, and once released it
keeps its object with an empty status (nothing allocated, nothing reserving it).

The device rows are the database's guard against two holders of a device; a new leader reconciles them
with the claims it finds allocated (`ClaimLedger.reconcile`), so rows a failed pass left behind never hold
a device for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from libs.core.dra.allocator import ClaimAllocation as DeviceAllocation
from libs.core.dra.ledger import (
    ClaimLedger,
    ClaimOwner,
    ClaimsCollected,
    ClaimsCommitted,
    ClaimsRefused,
    ClaimsReleased,
    DeviceRow,
    DevicesReconciled,
    HeldClaim,
    LedgerOutput,
    Proposal,
    ProposedClaim,
    ReservationsEnded,
)
from libs.core.dra.records import allocation_from_record
from libs.core.scheduling.objects import STANDALONE_PREFIX
from libs.db.errors import ConflictError
from libs.db.ports import UnitOfWork
from libs.db.records import DeviceHold, DeviceShare, JsonObject, ObjectDraft, StoredObject
from libs.events.catalogue import EventType
from libs.events.envelope import AggregateRef, Envelope, EventPayload
from libs.events.scheduling import ClaimAllocation, ClaimsAllocated, ClaimsAllocationFailed, PodGroupRef
from libs.events.scheduling import ClaimsReleased as ClaimsReleasedEvent

log = logging.getLogger(__name__)

PRODUCER = "dra-allocator"
RESOURCE_API = "resource.k8s.io/v1"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
"""Annotation of a claim made from a template: its name in the owner's `resourceClaims` (as upstream)."""
GROUP_UID = "podway.io/podgroup-uid"
"""Annotation of a claim: the PodGroup (or standalone pod) it was allocated with."""
PROPOSED_AT = "proposedAt"
"""`status.podway.proposedAt` of a claim: the placement it was committed for (answered once)."""
FINISHED_PHASES = ("Succeeded", "Failed")


# -- loading -----------------------------------------------------------------------------------------------


async def load_ledger(uow: UnitOfWork) -> ClaimLedger:
    """Devices, allocated claims (those whose reservations ended are released in the first pass), and the
    placements still waiting for their claims (`status.proposal` of PodGroups)."""
    ledger = ClaimLedger()
    for stored in await uow.objects.find("ResourceSlice"):
        ledger.inventory.put_slice(stored.name, stored.spec)
    live_by_group: dict[str, set[str]] = {}
    live: set[str] = set()
    for pod in await uow.objects.find("Pod"):
        if pod.status.get("phase") in FINISHED_PHASES or pod.deletion_requested_at is not None:
            continue
        live.add(pod.uid)
        group = (pod.spec.get("schedulingGroup") or {}).get("podGroupName")
        if group:
            live_by_group.setdefault(f"{pod.namespace}/{group}", set()).add(pod.uid)
    groups = await uow.objects.find("PodGroup")
    group_keys = {group.uid: f"{group.namespace}/{group.name}" for group in groups}
    ended: list[str] = []
    orphans: list[HeldClaim] = []
    leftovers: list[str] = []
    for stored in await uow.objects.find("ResourceClaim"):
        held = _held_claim(stored, ledger)
        if held is None:
            owner = _made_for(stored)
            if (owner is not None and owner not in live and owner not in group_keys) or (
                stored.deletion_requested_at is not None
            ):
                leftovers.append(stored.uid)
            continue
        if held.shared:
            ledger.restore(held, [])
            ended += [pod.uid for pod in held.reserved_for if pod.uid not in live]
            continue
        if held.owner.kind == "Pod":
            ledger.restore(held, [held.owner.uid] if held.owner.uid in live else [])
            if held.owner.uid not in live:
                ended.append(held.owner.uid)
            continue
        members = live_by_group.get(group_keys.get(held.group_uid, ""), set())
        ledger.restore(held, members)
        if not members:
            orphans.append(held)
    ledger.collect(leftovers)
    ledger.reconcile(DeviceRow(*row) for row in await uow.device_allocations.rows())
    ledger.pods_ended(ended)
    ledger.release(orphans)
    waiting = [group for group in groups if isinstance(group.status.get("proposal"), Mapping)]
    # The `placement.proposed` each waiting placement came from, for its answer to name.
    proposed = await uow.events.latest_of([g.uid for g in waiting], EventType.PLACEMENT_PROPOSED)
    for group in waiting:
        ledger.propose(_proposal_of_status(group, group.status["proposal"], proposed.get(group.uid)))
    return ledger


def _held_claim(stored: StoredObject, ledger: ClaimLedger) -> HeldClaim | None:
    allocation = (stored.status.get("allocation") or {}).get("devices") or {}
    results = allocation.get("results") or []
    owners = stored.metadata.get("ownerReferences") or []
    if not results:
        return None
    found = allocation_from_record(
        {"devices": results}, ledger.inventory, key=f"{stored.namespace}/{stored.name}"
    )
    if found is None:
        return None
    if not owners:
        return _shared_claim(stored, found, results)
    owner = owners[0]
    annotations = stored.metadata.get("annotations") or {}
    return HeldClaim(
        stored.namespace,
        stored.name,
        str(annotations.get(POD_CLAIM_NAME) or ""),
        ClaimOwner(str(owner.get("kind")), str(owner.get("name")), str(owner.get("uid"))),
        str(annotations.get(GROUP_UID) or owner.get("uid")),
        found,
        tuple(results),
        proposed_at=_proposed_at(stored),
    )


def _proposed_at(stored: StoredObject) -> str:
    return str((stored.status.get("podway") or {}).get(PROPOSED_AT) or "")


def _shared_claim(stored: StoredObject, found: DeviceAllocation, results: list[Any]) -> HeldClaim | None:
    """An existing ResourceClaim pods name, held for the pods its `status.reservedFor` lists."""
    pods = tuple(
        ClaimOwner("Pod", str(entry.get("name")), str(entry.get("uid")))
        for entry in stored.status.get("reservedFor") or []
        if entry.get("resource") == "pods"
    )
    if not pods:
        return None
    return HeldClaim(
        stored.namespace,
        stored.name,
        "",
        pods[0],
        pods[0].uid,
        found,
        tuple(results),
        pods,
        _proposed_at(stored),
    )


def _proposal_of_status(group: StoredObject, proposal: Mapping[str, Any], cause: str | None) -> Proposal:
    claims: list[ProposedClaim] = []
    pods = proposal.get("pods") or {}
    for pod_name, pod in sorted(pods.items()):
        owner = ClaimOwner("Pod", pod_name, str(pod.get("uid") or ""))
        claims += [_proposed(record, owner) for record in pod.get("claims") or []]
    owner = ClaimOwner("PodGroup", group.name, group.uid)
    claims += [_proposed(record, owner) for record in proposal.get("claims") or []]
    pod_uids = tuple(str(pod.get("uid") or "") for _, pod in sorted(pods.items()))
    proposed_at = str(proposal.get("proposedAt") or "")
    return Proposal(group.namespace, group.name, group.uid, pod_uids, tuple(claims), proposed_at, cause)


def _proposed(record: Mapping[str, Any], owner: ClaimOwner) -> ProposedClaim:
    return ProposedClaim(
        str(record.get("resourceClaimName") or ""),
        str(record.get("name") or ""),
        owner,
        tuple(record.get("devices") or ()),
        bool(record.get("shared")),
    )


# -- writing -----------------------------------------------------------------------------------------------


async def write_outputs(uow: UnitOfWork, outputs: Iterable[LedgerOutput], *, now: datetime) -> None:
    """Write a pass's outputs in the caller's unit of work (the caller commits), in a few statements
    whatever the number of claims. A device the database refuses (held, or short of capacity) raises
    ConflictError: the pass is lost and the ledger reloaded."""
    outcomes = list(outputs)
    writer = _Writer(uow, now)
    for output in outcomes:
        if isinstance(output, DevicesReconciled):  # first: releases after it give back from what it sets
            await uow.device_allocations.forget(output.rows)
            await uow.device_allocations.set_consumed(output.consumed)
        elif isinstance(output, ClaimsCollected):
            await uow.objects.delete_by_uids(output.uids)
    committed = [
        claim for output in outcomes if isinstance(output, ClaimsCommitted) for claim in output.claims
    ]
    released = [claim for output in outcomes if isinstance(output, ClaimsReleased) for claim in output.claims]
    reserved = [
        claim
        for output in outcomes
        if isinstance(output, ClaimsCommitted | ReservationsEnded)
        for claim in (
            (*output.kept, *output.joined) if isinstance(output, ClaimsCommitted) else output.claims
        )
    ]
    await writer.prefetch(committed, [*released, *reserved])
    await writer.devices(committed, released)
    for output in outcomes:
        if isinstance(output, ClaimsReleased):
            writer.released(output)
        elif isinstance(output, ReservationsEnded):
            for claim in output.claims:
                writer.claim_object(claim)
        elif isinstance(output, ClaimsCommitted):
            writer.committed(output)
        elif isinstance(output, ClaimsRefused):
            writer.emit(
                output.proposal.group_uid,
                _subject(output.proposal),
                ClaimsAllocationFailed(podgroup=_group_ref(output.proposal), reason=output.reason),
                output.proposal.cause,
            )
    await writer.flush()


class _Writer:
    def __init__(self, uow: UnitOfWork, now: datetime) -> None:
        self.uow = uow
        self.now = now
        self._objects: dict[tuple[str, str, str], StoredObject] = {}
        self._statuses: dict[str, tuple[StoredObject, JsonObject]] = {}
        self._cleared: dict[str, StoredObject] = {}
        """Released claims pods name, whose status is emptied unless they are gone or changed meanwhile."""
        self._deleted: list[str] = []
        self._created: list[ObjectDraft] = []

    async def prefetch(self, committed: list[HeldClaim], others: list[HeldClaim]) -> None:
        """Every object the pass reads (claims, their owners, the owners' templates), in two queries."""
        keys = {("ResourceClaim", claim.namespace, claim.name) for claim in (*committed, *others)}
        keys |= {(claim.owner.kind, claim.namespace, claim.owner.name) for claim in committed}
        self._remember(await self.uow.objects.get_many(sorted(keys)))
        templates = {
            ("ResourceClaimTemplate", claim.namespace, name)
            for claim in committed
            if (name := self._template_name(claim)) is not None
        }
        self._remember(await self.uow.objects.get_many(sorted(templates)))

    def _remember(self, found: Iterable[StoredObject]) -> None:
        for stored in found:
            self._objects[(stored.kind, stored.namespace, stored.name)] = stored

    async def devices(self, committed: list[HeldClaim], released: list[HeldClaim]) -> None:
        gone = [_device_rows(claim)[1] for claim in released]
        await self.uow.device_allocations.release(
            [claim.key for claim in released], [share for shares in gone for share in shares]
        )
        rows = [_device_rows(claim) for claim in committed]
        holds = [
            (claim.key, hold)
            for claim, (claim_holds, _) in zip(committed, rows, strict=True)
            for hold in claim_holds
        ]
        await self.uow.device_allocations.hold(holds, [share for _, shares in rows for share in shares])

    def committed(self, committed: ClaimsCommitted) -> None:
        proposal = committed.proposal
        for claim in committed.claims:
            self.claim_object(claim)
            self._name_in_owner(claim)
        for claim in (*committed.kept, *committed.joined):
            self.claim_object(claim)
        allocations = [
            ClaimAllocation(
                claim=claim.name,
                name=claim.ref,
                pod=claim.owner.name if claim.owner.kind == "Pod" else None,
                pod_uid=claim.owner.uid if claim.owner.kind == "Pod" else None,
                devices=[dict(device) for device in claim.devices],
                shared=claim.shared,
            )
            for claim in (*committed.claims, *committed.kept, *committed.joined)
        ]
        self.emit(
            proposal.group_uid,
            _subject(proposal),
            ClaimsAllocated(podgroup=_group_ref(proposal), allocations=allocations),
            proposal.cause,
        )

    def released(self, released: ClaimsReleased) -> None:
        for claim in released.claims:
            stored = self._objects.get(("ResourceClaim", claim.namespace, claim.name))
            if stored is None:
                continue
            if _made_for(stored) is not None or stored.deletion_requested_at is not None:
                self._deleted.append(stored.uid)  # made for its owner, or its deletion waited for this
            elif stored.status:
                self._cleared[stored.uid] = stored
        group = next((claim.owner for claim in released.claims if claim.owner.kind == "PodGroup"), None)
        self.emit(
            released.group_uid,
            None,
            ClaimsReleasedEvent(
                claims=[claim.name for claim in released.claims],
                podgroup=PodGroupRef(namespace=released.namespace, name=group.name, uid=group.uid)
                if group is not None
                else None,
            ),
            released.cause,
        )

    def claim_object(self, claim: HeldClaim) -> None:
        """A new ResourceClaim, or the allocation and reservation of one made before (released since, or
        one pods name, which its users create)."""
        owner = claim.owner
        reserved = "podgroups" if owner.kind == "PodGroup" else "pods"
        existing = self._objects.get(("ResourceClaim", claim.namespace, claim.name))
        allocated_at = ((existing.status.get("allocation") or {}) if existing is not None else {}).get(
            "allocationTimestamp"
        )
        status: JsonObject = {
            "allocation": {
                "devices": {"results": [dict(device) for device in claim.devices]},
                "allocationTimestamp": allocated_at
                if claim.shared and allocated_at
                else self.now.isoformat(),
            },
            "reservedFor": [
                {"resource": reserved, "name": pod.name, "uid": pod.uid}
                for pod in (claim.reserved_for or (owner,))
            ],
            "podway": {PROPOSED_AT: claim.proposed_at},
        }
        if existing is not None and _made_for(existing) not in (None, owner.uid):
            self._deleted.append(existing.uid)  # made for an earlier object of the owner's name: replaced
            existing = None
        if existing is not None:
            self._statuses[existing.uid] = (existing, status)
            return
        if claim.shared:
            return  # its user deleted it: it is not made again
        api_version = "scheduling.k8s.io/v1alpha2" if owner.kind == "PodGroup" else "v1"
        self._created.append(
            ObjectDraft(
                kind="ResourceClaim",
                api_version=RESOURCE_API,
                namespace=claim.namespace,
                name=claim.name,
                spec=self._template_spec(claim),
                metadata={
                    "name": claim.name,
                    "namespace": claim.namespace,
                    "annotations": {POD_CLAIM_NAME: claim.ref, GROUP_UID: claim.group_uid},
                    "ownerReferences": [
                        {
                            "apiVersion": api_version,
                            "kind": owner.kind,
                            "name": owner.name,
                            "uid": owner.uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                status=status,
            )
        )

    def _template_name(self, claim: HeldClaim) -> str | None:
        owner = self._objects.get((claim.owner.kind, claim.namespace, claim.owner.name))
        if owner is None:
            return None
        reference = next(
            (ref for ref in owner.spec.get("resourceClaims") or [] if ref.get("name") == claim.ref), None
        )
        name = (reference or {}).get("resourceClaimTemplateName")
        return str(name) if name else None

    def _template_spec(self, claim: HeldClaim) -> JsonObject:
        """The spec of the template the owner names for this claim (empty when it is gone)."""
        name = self._template_name(claim)
        template = self._objects.get(("ResourceClaimTemplate", claim.namespace, name or ""))
        return dict((template.spec.get("spec") or {}) if template is not None else {})

    def _name_in_owner(self, claim: HeldClaim) -> None:
        """`status.resourceClaimStatuses` of the owner names the claim made for it (not one it names)."""
        owner = self._objects.get((claim.owner.kind, claim.namespace, claim.owner.name))
        if owner is None or owner.uid != claim.owner.uid or claim.shared:
            return
        current = self._statuses.get(owner.uid, (owner, owner.status))[1]
        entries = [
            entry for entry in current.get("resourceClaimStatuses") or [] if entry.get("name") != claim.ref
        ]
        entries.append({"name": claim.ref, "resourceClaimName": claim.name})
        self._statuses[owner.uid] = (owner, {**current, "resourceClaimStatuses": entries})

    def emit(
        self, correlation: str, subject: AggregateRef | None, payload: EventPayload, cause: str | None
    ) -> None:
        self.uow.emit(
            Envelope.wrap(
                payload,
                producer=PRODUCER,
                correlation_id=correlation,
                occurred_at=self.now,
                causation_id=cause,
                subject=subject,
            )
        )

    async def flush(self) -> None:
        await self.uow.objects.delete_by_uids(self._deleted)
        await self.uow.objects.create_many(self._created)
        await self.uow.objects.update_statuses(list(self._statuses.values()))
        cleared: list[tuple[StoredObject, JsonObject]] = [
            (stored, {}) for uid, stored in self._cleared.items() if uid not in self._statuses
        ]
        try:
            await self.uow.objects.update_statuses(cleared)
        except ConflictError:
            # Deleted (or changed) by its user since it was read: nothing of it to clear, and failing the
            # pass for it would lose the device rows' release with it.
            log.info("released ResourceClaims changed meanwhile; their status is left as it is")


def _made_for(claim: StoredObject) -> str | None:
    """The uid of the pod or PodGroup a claim was made for (its controller); None for a claim pods name."""
    for reference in claim.metadata.get("ownerReferences") or []:
        if reference.get("controller"):
            return str(reference.get("uid"))
    return None


def _device_rows(claim: HeldClaim) -> tuple[list[DeviceHold], list[DeviceShare]]:
    holds: list[DeviceHold] = []
    shares: list[DeviceShare] = []
    for result in claim.allocation.results:
        device = result.device
        holds.append(DeviceHold(device.id, result.request, exclusive=result.consumed is None))
        for name, amount in (result.consumed or {}).items():
            if amount:
                shares.append(DeviceShare(device.id, name, device.capacity.get(name, 0), amount))
    return holds, shares


def _group_ref(proposal: Proposal) -> PodGroupRef:
    return PodGroupRef(namespace=proposal.namespace, name=proposal.group_name, uid=proposal.group_uid)


def _subject(proposal: Proposal) -> AggregateRef:
    if proposal.group_name.startswith(STANDALONE_PREFIX):
        name = proposal.group_name.removeprefix(STANDALONE_PREFIX)
        return AggregateRef(kind="Pod", namespace=proposal.namespace, name=name, uid=proposal.group_uid)
    return AggregateRef(
        kind="PodGroup", namespace=proposal.namespace, name=proposal.group_name, uid=proposal.group_uid
    )
