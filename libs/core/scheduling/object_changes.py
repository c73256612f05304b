"""The scheduler state machine's objects: what storing or removing a Node, device, claim, Workload, PodGroup
or Pod changes, and what pods ending do; late and out-of-order events are ignored."""

from __future__ import annotations

from collections.abc import Iterable

from .book import TERMINAL
from .disruptions import Disruptions
from .inputs import ObjectRemoved
from .lifecycle import PodPhase
from .objects import ApiObject
from .quotas import QUOTA_KINDS


class ObjectChanges(Disruptions):
    """Objects stored and removed, pods finished, and the versions and tombstones that keep them in order."""

    def _stored(self, obj: ApiObject, cause: str | None) -> None:
        if self._stale(obj):
            return
        kind = obj.kind
        if kind == "Node":
            self._forget_quota_usage()  # its labels say which flavor its pods' usage is counted in
            if self.inventory.put_node(self._tainted(obj)):
                self._wake_everyone(cause)
        elif kind == "ResourceSlice":
            if self.inventory.put_slice(obj):
                self._wake_everyone(cause)
        elif kind == "DeviceClass":
            if self.inventory.put_device_class(obj):
                self._recompute_requests(self.book.pods.values())
                self._wake_everyone(cause)
        elif kind == "ResourceClaimTemplate":
            self._claim_templates[obj.key] = obj
            self._recompute_requests(self._pods_with_claims())
        elif kind == "Workload":
            keys = self.book.put_workload(obj)
            self.queue.add_workload(obj.namespace, obj.name, now=self._now)
            for key in keys:
                self._refresh(key)
        elif kind == "CompositePodGroup":
            self._wake_children(self.book.put_composite(obj))
        elif kind == "PodGroup":
            group = self.book.put_group(obj)
            group.cause = cause or group.cause
            self._recompute_requests(self.book.members(group.key))
            self._refresh(group.key)
        elif kind == "Pod":
            self._stored_pod(obj, cause)
        elif kind in QUOTA_KINDS:
            self.quotas.put(obj)
            self._quota_freed = True
        elif kind == "ResourceClaim":
            self._resource_claims[obj.key] = obj
            if self._loading:
                self._hold_allocated_claim(obj)
            else:
                self._named_claim_changed(obj.key, cause)

    def _wake_children(self, keys: Iterable[str]) -> None:
        """A composite came or went: its waiting children are tried again (their cycle reads it)."""
        for key in keys:
            self._refresh(key)
            self.queue.activate(key, self._now)

    def _stale(self, obj: ApiObject) -> bool:
        """Whether the object was removed, or is older than the version held: events of one object may
        arrive out of order (each process publishes its own commits)."""
        if obj.uid in self._tombstones:
            return True
        held = self._versions.get(obj.uid)
        if held is not None and obj.resource_version < held:
            return True
        if obj.uid:
            self._versions[obj.uid] = obj.resource_version
        return False

    def _forget_tombstones(self, now: float) -> None:
        horizon = now - self.settings.tombstone_ttl_s
        while self._tombstones:
            uid, removed_at = next(iter(self._tombstones.items()))
            if removed_at > horizon:
                break
            del self._tombstones[uid]

    def _stored_pod(self, obj: ApiObject, cause: str | None) -> None:
        pod = self.book.put_pod(obj, self._request(obj))
        owner = self.book.groups.get(pod.group_key)
        if owner is not None:
            owner.cause = cause or owner.cause
        if obj.metadata.get("deletionTimestamp") and pod.node is not None:
            self.book.mark_evicting(pod.uid)
        self._refresh(pod.group_key)

    def _removed(self, event: ObjectRemoved) -> None:
        kind, uid, cause = event.kind, event.uid, event.cause
        self._quota_freed = True
        self._versions.pop(uid, None)
        self._tombstones[uid] = self._now
        self._tombstones.move_to_end(uid)
        key = f"{event.namespace}/{event.name}"
        if kind == "Pod":
            pod = self.book.pods.get(uid)
            if pod is None:
                return
            holds_room = pod.node is not None and pod.phase not in TERMINAL
            group = self.book.groups.get(pod.group_key)
            if group is not None and group.awaiting_claims is not None and pod.uid in group.placed:
                message = "a pod of the proposed placement was deleted"
                self._outputs.append(self._release_claims_wait(group, message, cause))
            self.book.remove_pod(uid)
            if holds_room:
                self._unbind(uid, cause)
                self._maybe_disrupted(pod.group_key, cause)
                self._maybe_quota_released(pod.group_key, cause)
            self._release_idle_group_claims(pod.group_key)
            self._refresh(pod.group_key)
        elif kind == "PodGroup":
            group = self.book.groups.get(key)
            if group is None or group.uid != uid:
                return
            self._release(key)
            self._nominations.pop(key, None)
            if group.awaiting_claims is not None:
                self._forget(group, group.awaiting_claims, cause)
            self._release_group_claims(key)
            self.book.remove_group(key)
            self.queue.remove(key)
        elif kind == "Workload":
            self._forget_quota_usage()  # its labels may have named its PodGroups' queue
            self.book.workloads.pop(key, None)
            self.queue.remove_workload(event.namespace, event.name)
        elif kind == "CompositePodGroup":
            self._wake_children(self.book.remove_composite(key))
        elif kind == "Node":
            self._forget_quota_usage()
            self.health.forget(event.name)
            self._unreachable.discard(event.name)
            uids = self.inventory.remove_node(event.name)
            self._lose_node(event.name, uids, since=self._now, deleted=True, cause=cause)
        elif kind == "ResourceSlice":
            if self.inventory.remove_slice(event.name):
                self._wake_everyone(cause)
        elif kind == "DeviceClass":
            if self.inventory.remove_device_class(event.name):
                self._recompute_requests(self.book.pods.values())
                self._wake_everyone(cause)
        elif kind == "ResourceClaimTemplate" and self._claim_templates.pop(key, None) is not None:
            self._recompute_requests(self._pods_with_claims())
        elif kind == "ResourceClaim" and self._resource_claims.pop(key, None) is not None:
            self._named_claim_changed(key, cause)
        elif kind in QUOTA_KINDS:
            self.quotas.remove(kind, event.namespace, event.name)

    def _pods_finished(self, uids: Iterable[str], phase: PodPhase, cause: str | None) -> None:
        self._quota_freed = True
        broken: set[str] = set()
        touched: set[str] = set()
        for uid in uids:
            pod = self.book.pods.get(uid)
            if pod is None:
                continue
            was_evicting = pod.evicting
            if self.book.finish(uid, phase) is None:
                continue
            self._unbind(uid, cause)
            touched.add(pod.group_key)
            if phase != PodPhase.SUCCEEDED and not was_evicting:
                broken.add(pod.group_key)
        for key in sorted(broken):
            self._maybe_restart(key, cause)
            self._refresh(key)
        for key in sorted(touched):
            self._maybe_disrupted(key, cause)
            self._maybe_quota_released(key, cause)
            self._release_idle_group_claims(key)
