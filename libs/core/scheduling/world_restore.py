"""The scheduler state machine's starting world: what a new leader loads (objects, bindings, pods leaving,
nominations, placements waiting for their claims), and bindings made by others."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .book import TERMINAL, GroupRecord
from .inputs import World
from .machine_state import NominatedRoom
from .model import CycleDecision, NodeAssignment, Placement, TopologyDomainRef
from .node_health import NodeCondition
from .object_changes import ObjectChanges
from .objects import parse_timestamp
from .snapshot import PlacementConflict


class WorldRestore(ObjectChanges):
    """The world loaded, bindings and proposals restored, and bindings heard of."""

    def load(self, world: World, *, now: float) -> None:
        """Build the world a new leader starts from: objects, bindings, pods leaving, nominations, and
        placements still waiting for their claims (recorded in `status.proposal`)."""
        self._now = now
        self._loading = True
        self._forget_quota_usage()
        self.inventory.defer()
        try:
            for record in world.node_health:
                self.health.restore(record.node, record.beats, record.condition, record.since, now=now)
                if record.condition != NodeCondition.READY:
                    self._unreachable.add(record.node)
            for obj in world.objects:
                self._stored(obj, None)
            self.inventory.flush()
            self._hold_named_claims()
            if self._claim_templates or self._resource_claims:
                self._recompute_requests(self._pods_with_claims())
            for uid, node in world.bindings.items():
                self._restore_binding(uid, node)
            for uid in world.leaving:
                self.book.mark_evicting(uid)
            for nomination in world.nominations:
                key = self.book.group_uids.get(nomination.podgroup_uid)
                if key is not None and nomination.expires_at > now:
                    self._nominations[key] = NominatedRoom(nomination.nodes, nomination.expires_at)
        finally:
            self._loading = False
        for key in sorted(self.book.groups):
            group = self.book.groups[key]
            group.cause = world.causes.get(group.uid, group.cause)
            proposal = group.obj.status.get("proposal")
            if isinstance(proposal, Mapping) and not group.standalone:
                self._restore_proposal(group, proposal)
            self._refresh(key)

    def _restore_binding(self, uid: str, node: str) -> None:
        pod = self.book.pods.get(uid)
        if pod is None or pod.phase in TERMINAL or pod.node is not None:
            return
        group = self.book.groups.get(pod.group_key)
        if group is not None:
            group.scheduled = True  # its pods hold nodes, whatever its status says
        recorded = (group.placement.get(pod.obj.name) if group else None) or {}
        same = recorded.get("node") == node and recorded.get("uid") == uid
        devices = recorded.get("devices") if same else None
        try:
            placement = self.snapshot.bind(pod.request, node, devices)  # type: ignore[arg-type]
        except (PlacementConflict, KeyError):
            self.book.place(uid, node, {}, assumed=False)
            return
        self.book.place(uid, node, placement.devices, assumed=False)
        if same:
            self._hold_recorded(uid, recorded.get("claims"))
            if group is not None and not self.claims.holds(group.key):
                placed = group.obj.status.get("placement")
                self._hold_recorded(group.key, placed.get("claims") if isinstance(placed, Mapping) else None)

    def _restore_proposal(self, group: GroupRecord, proposal: Mapping[str, Any]) -> None:
        """Assume again a placement that was waiting for its claims when the last leader stopped."""
        placements: list[Placement] = []
        for name, recorded in sorted((proposal.get("pods") or {}).items()):
            pod = self.book.pods.get(str(recorded.get("uid")))
            if pod is None or not pod.pending or pod.obj.name != name or pod.group_key != group.key:
                continue
            devices = {cls: tuple(names) for cls, names in (recorded.get("devices") or {}).items()}
            request = pod.request
            placements.append(
                Placement(
                    pod.uid, name, str(recorded.get("node")), request.cpu_milli, request.memory, devices
                )
            )
        if not placements:
            return
        placements.sort(key=lambda placement: placement.node_name)
        by_node: dict[str, list[Placement]] = {}
        for placement in placements:
            by_node.setdefault(placement.node_name, []).append(placement)
        domain = proposal.get("domain") or None
        proposed_at = parse_timestamp(proposal.get("proposedAt")) or self._now
        placed = {placement.pod_uid for placement in placements}
        decision = CycleDecision(
            group.key,
            tuple(placements),
            tuple(NodeAssignment.of(on_node) for on_node in by_node.values()),
            TopologyDomainRef(str(domain["key"]), str(domain.get("value") or "")) if domain else None,
            tuple(sorted(uid for uid in group.pending if uid not in placed)),
            None,
            proposed_at,
        )
        try:
            self.snapshot.apply(decision)
        except PlacementConflict:
            self._outputs.append(self._refused(group, decision, "the proposed placement no longer fits"))
            return
        for placement in placements:
            self.book.place(placement.pod_uid, placement.node_name, placement.devices, assumed=True)
            recorded = (proposal.get("pods") or {}).get(placement.pod_name) or {}
            self._hold_recorded(placement.pod_uid, recorded.get("claims"))
        self._hold_recorded(group.key, proposal.get("claims"))
        count = len(group.pending) + len(group.placed)
        self.queue.hold_for_claims(self.book.core_group(group), pod_count=count, pending_since=proposed_at)
        self._await_claims(group, decision, proposed_at)

    def _bound_by_others(self, uid: str, node: str, devices: Mapping[str, tuple[str, ...]]) -> None:
        pod = self.book.pods.get(uid)
        if pod is None or pod.phase in TERMINAL or pod.node is not None:
            return
        try:
            placement = self.snapshot.bind(pod.request, node, devices or None)
        except (PlacementConflict, KeyError):
            self.book.place(uid, node, {}, assumed=False)
        else:
            self.book.place(uid, node, placement.devices, assumed=False)
        self._preemptable((pod,))
        self._refresh(pod.group_key)
