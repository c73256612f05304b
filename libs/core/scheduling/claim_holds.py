"""The scheduler state machine's claims: what a pod's claims ask for, the allocations pods and PodGroups
hold, and the existing ResourceClaims pods name, reserved by the pods placed with them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from libs.core.dra.allocator import ClaimAllocation
from libs.core.dra.claims import ClaimSpec
from libs.core.dra.records import allocation_from_record
from libs.core.dra.requests import claim_devices, named_claim_spec, named_claims, pod_claim_specs

from .book import TERMINAL, GroupRecord, PodRecord
from .claims import exclusive_devices
from .machine_state import MachineState
from .model import CycleDecision, GangReason, PodRequest, ResourceTotals, Unschedulable
from .objects import ApiObject, pod_group_name, pod_request

CLAIM_PREFIX = "claim/"
"""Uid prefix of the stand-ins that hold, in the snapshot, the node's own exclusive devices of an existing
ResourceClaim pods share (`claim/<namespace>/<name>`), while any pod reserves it."""
CLAIM_NOT_FOUND = 'resourceclaim "{name}" not found'
CLAIM_BEING_DELETED = 'resourceclaim "{name}" is being deleted'


class ClaimHolds(MachineState):
    """Requests computed from claims, allocations held, named claims reserved, and their release."""

    # -- what pods ask ------------------------------------------------------------------------------------

    def _request(self, pod: ApiObject) -> PodRequest:
        devices: dict[str, int] = {}
        claims: tuple[ClaimSpec, ...] = ()
        if pod.spec.get("resourceClaims"):
            name = pod_group_name(pod)
            group = self.book.groups.get(f"{pod.namespace}/{name}") if name else None
            group_claims = (group.obj.spec.get("resourceClaims") or []) if group else []
            templates = self._templates()
            devices = claim_devices(
                pod.namespace,
                pod.spec.get("resourceClaims") or [],
                group_claims,
                templates,
                self.inventory.node_classes,
            )
            claims = pod_claim_specs(
                pod.namespace,
                pod.spec.get("resourceClaims") or [],
                group_claims,
                templates,
                lambda name, claim_name: self._named_claim_spec(pod.namespace, name, claim_name),
            )
        return pod_request(pod, self.inventory.catalog.extended_resources, devices, claims)

    def _templates(self) -> dict[str, Mapping[str, Any]]:
        return {key: template.spec for key, template in self._claim_templates.items()}

    def _recompute_requests(self, pods: Iterable[PodRecord]) -> None:
        """Requests of waiting pods again, after what they are computed from changed."""
        for pod in pods:
            if pod.pending:
                pod.request = self._request(pod.obj)

    def _pods_with_claims(self) -> list[PodRecord]:
        return [pod for pod in self.book.pods.values() if pod.obj.spec.get("resourceClaims")]

    # -- existing ResourceClaims pods name ----------------------------------------------------------------

    def _named_claim_spec(self, namespace: str, name: str, claim_name: str) -> ClaimSpec:
        """A claim a pod names: pinned to its devices while some pod reserves it, else its spec."""
        key = f"{namespace}/{claim_name}"
        held = self.claims.named_allocation(key)
        allocated = tuple(result.device.id for result in held.results) if held is not None else ()
        stored = self._resource_claims.get(key)
        return named_claim_spec(name, claim_name, stored.spec if stored is not None else None, allocated)

    def _pods_naming(self, key: str) -> list[PodRecord]:
        namespace, _, name = key.partition("/")
        return [
            pod
            for pod in self._pods_with_claims()
            if pod.obj.namespace == namespace
            and any(
                claim.get("resourceClaimName") == name for claim in pod.obj.spec.get("resourceClaims") or []
            )
        ]

    def _named_claim_changed(self, key: str, cause: str | None) -> None:
        """A claim pods name was applied, deleted, allocated or released: the pods waiting for it see it
        anew, and are woken."""
        waiting = [pod for pod in self._pods_naming(key) if pod.pending]
        if waiting:
            self._recompute_requests(waiting)
            self._wake_everyone(cause)

    def _missing_claim(self, group: GroupRecord) -> str | None:
        """Why a ResourceClaim a waiting pod of the group names cannot be used (it does not exist, or it is
        being deleted), in kube-scheduler's words, if one cannot."""
        if not group.has_claims:
            return None
        group_claims = [] if group.standalone else group.obj.spec.get("resourceClaims") or []
        for uid in sorted(group.pending):
            pod = self.book.pods[uid]
            for name in named_claims(pod.obj.spec.get("resourceClaims") or [], group_claims):
                claim = self._resource_claims.get(f"{pod.obj.namespace}/{name}")
                if claim is None:
                    return CLAIM_NOT_FOUND.format(name=name)
                if claim.metadata.get("deletionTimestamp"):
                    return CLAIM_BEING_DELETED.format(name=name)
        return None

    def _claim_not_found(self, group: GroupRecord, reason: str, now: float) -> CycleDecision:
        """The cycle of a group a pod of which names a ResourceClaim it cannot use: it waits, and no node is
        tried."""
        message = f"{GangReason.NODES_UNAVAILABLE.format(total=len(self.snapshot))}: {reason}."
        pending = tuple(sorted(group.pending))
        why = Unschedulable(message, {}, ResourceTotals(), group.min_count or 1, None)
        return CycleDecision(group.key, (), (), None, pending, why, now)

    def _reserve_named(self, namespace: str, owner: str, allocations: Iterable[ClaimAllocation]) -> None:
        """A pod placed with claims it names reserves them; one it allocated holds the node's own exclusive
        devices of it in the snapshot (a stand-in) until no pod reserves it."""
        for allocation in allocations:
            if not allocation.resource_claim or not owner:
                continue
            key = f"{namespace}/{allocation.resource_claim}"
            if not self.claims.reserve(key, owner, allocation):
                continue
            self._hold_claim_devices(key, allocation)
            self._named_claim_changed(key, None)

    def _unreserve(self, uid: str, cause: str | None) -> None:
        """A pod left its node: the claims it named that no pod reserves any more give their devices back."""
        for key in self.claims.unreserve(uid):
            self.snapshot.unbind(CLAIM_PREFIX + key)
            self._named_claim_changed(key, cause)

    def _hold_claim_devices(self, key: str, allocation: ClaimAllocation) -> None:
        nodes = {result.device.node for result in allocation.results if result.consumed is None}
        for node in sorted(name for name in nodes if name is not None):
            state = self.snapshot.nodes_by_name.get(node)
            devices = exclusive_devices((allocation,), state, named=True) if state is not None else {}
            if devices:
                stand_in = PodRequest(uid=CLAIM_PREFIX + key, name=key)
                self.snapshot.bind(stand_in, node, devices)

    # -- held allocations ---------------------------------------------------------------------------------

    def _hold_recorded(self, owner: str, records: object) -> None:
        """Hold again the shares and reached devices of allocations recorded in a status (or announced),
        and, for a pod, the existing ResourceClaims it names."""
        if not isinstance(records, list) or not records:
            return
        found = [allocation_from_record(record, self.inventory.devices) for record in records]
        allocations = [allocation for allocation in found if allocation is not None]
        self.claims.hold(owner, allocations)
        pod = self.book.pods.get(owner)
        if pod is not None:
            self._reserve_named(pod.obj.namespace, owner, allocations)

    def _hold_allocated_claim(self, claim: ApiObject) -> None:
        """A new leader holds the shares and reached devices of the claims allocated to live pods and
        PodGroups (a standalone pod's are recorded nowhere else)."""
        status = claim.status
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results")
        reserved = status.get("reservedFor") or []
        if not results or not reserved:
            return
        if not claim.metadata.get("ownerReferences"):
            return  # a claim pods name: held once the nodes are known (`_hold_named_claims`)
        holder = reserved[0]
        if holder.get("resource") == "podgroups":
            owner = f"{claim.namespace}/{holder.get('name')}"
            if owner not in self.book.groups:
                return
        else:
            owner = str(holder.get("uid"))
            pod = self.book.pods.get(owner)
            if pod is None or pod.phase in TERMINAL:
                return
        allocation = allocation_from_record({"devices": results}, self.inventory.devices, key=claim.key)
        if allocation is not None:
            self.claims.add(owner, allocation)

    def _hold_named_claims(self) -> None:
        """A new leader's pods reserving existing ResourceClaims they name, as the claims' statuses say."""
        for claim in self._resource_claims.values():
            status = claim.status
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results")
            if not results or claim.metadata.get("ownerReferences"):
                continue
            allocation = allocation_from_record({"devices": results}, self.inventory.devices, key=claim.key)
            if allocation is None:
                continue
            allocation = dataclasses.replace(allocation, resource_claim=claim.name)
            for holder in status.get("reservedFor") or []:
                pod = self.book.pods.get(str(holder.get("uid")))
                if pod is not None and pod.phase not in TERMINAL:
                    self._reserve_named(claim.namespace, pod.uid, (allocation,))

    # -- letting go ---------------------------------------------------------------------------------------

    def _unbind(self, uid: str, cause: str | None) -> None:
        placement = self.snapshot.unbind(uid)
        self._preemption_generation += 1
        if self.claims.release(uid):
            self._wake_all = True  # shares and reached devices are no capacity the hints know of
        self._unreserve(uid, cause)
        if placement is None:
            return
        self._freed.add(placement)
        if cause is not None:
            self._capacity_cause = cause

    def _release_group_claims(self, key: str) -> None:
        if self.claims.release(key):
            self._wake_all = True

    def _release_idle_group_claims(self, key: str) -> None:
        """A PodGroup's claims are released once none of its pods holds room any more."""
        if not self.claims.holds(key):
            return
        group = self.book.groups.get(key)
        if group is not None and group.awaiting_claims is not None:
            return
        if all(pod.node is None or pod.phase in TERMINAL for pod in self.book.members(key)):
            self._release_group_claims(key)
            if group is not None:
                group.claims = []
