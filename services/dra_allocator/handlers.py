"""Consumed events as the claim ledger's inputs: one short mapping per event type."""

from __future__ import annotations

from libs.core.dra.ledger import ClaimLedger, ClaimOwner, Proposal, ProposedClaim
from libs.events import admission, scheduling
from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, EventPayload

SUBJECTS = [
    event.subject
    for event in (
        EventType.RESOURCESLICE_PUBLISHED,
        EventType.OBJECT_DELETED,
        EventType.PLACEMENT_PROPOSED,
        EventType.PODS_SUCCEEDED,
        EventType.PODS_FAILED,
    )
]
"""Devices published and withdrawn, placements proposed, and what ends a reservation."""


def apply_event(ledger: ClaimLedger, envelope: Envelope, payload: EventPayload) -> None:
    """Take one consumed event into the ledger; events of no concern to it are ignored."""
    cause = str(envelope.event_id)
    if isinstance(payload, admission.ResourceSlicePublished):
        ledger.inventory.put_slice(payload.name, payload.object.get("spec") or {})
    elif isinstance(payload, admission.ObjectDeleted):
        if payload.kind == "ResourceSlice":
            ledger.inventory.remove_slice(payload.name)
        elif payload.kind == "Pod":
            ledger.pods_ended([payload.uid], cause)
        elif payload.kind == "PodGroup":
            ledger.group_deleted(payload.uid, cause)
    elif isinstance(payload, scheduling.PodsSucceeded | scheduling.PodsFailed):
        ledger.pods_ended([pod.uid for pod in payload.pods], cause)
    elif isinstance(payload, scheduling.PlacementProposed):
        ledger.propose(proposal_of(payload, cause))


def proposal_of(payload: scheduling.PlacementProposed, cause: str | None = None) -> Proposal:
    """The ledger's proposal from the scheduler's event `cause` (a standalone pod's group has the pod's
    uid)."""
    group = payload.podgroup
    claims = tuple(
        ProposedClaim(
            allocation.claim,
            allocation.name,
            ClaimOwner("Pod", allocation.pod, allocation.pod_uid or "")
            if allocation.pod is not None
            else ClaimOwner("PodGroup", group.name, group.uid),
            tuple(allocation.devices),
            allocation.shared,
        )
        for allocation in payload.allocations
    )
    pods = tuple(placement.pod_uid for placement in payload.placements)
    return Proposal(group.namespace, group.name, group.uid, pods, claims, payload.proposed_at, cause)
