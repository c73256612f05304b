"""The scheduler state machine when things go wrong: unreachable nodes tainted, a lost node's pods failed,
and gangs restarted, placed anew once disrupted, or given up after waiting too long."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from .book import TERMINAL, PodRecord
from .claim_proposals import ClaimProposals
from .lifecycle import PodPhase, decide_gang_restart
from .node_health import UNREACHABLE_TAINT, HealthChange, NodeCondition
from .nominations import Nominations
from .objects import ApiObject
from .outputs import Disrupted, GroupRef, NodeHealthChange, NodeLost, PodKey, QuotaReleased, Restart, TimedOut
from .queue import PodGroupTimedOut

DISRUPTED_REASON = "Disrupted"
DISRUPTED_MESSAGE = (
    "every pod of the gang left its node before finishing (evicted, or its node was lost or deleted); pods "
    "created for the gang again are placed anew, outside its old domain"
)


class Disruptions(ClaimProposals, Nominations):
    """Node health and loss, and what failing pods and time-outs do to their gangs."""

    # -- nodes --------------------------------------------------------------------------------------------

    def _health_changed(self, change: HealthChange, cause: str | None) -> None:
        """A watched node became NotReady (tainted), lost (its pods fail) or Ready again (untainted)."""
        if change.condition == NodeCondition.LOST:
            state = self.snapshot.nodes_by_name.get(change.node)
            uids = tuple(sorted(state.pod_uids)) if state is not None else ()
            self._lose_node(change.node, uids, since=change.since, deleted=False, cause=cause)
            return
        self._taint(change.node, change.condition == NodeCondition.NOT_READY, cause)
        self._outputs.append(NodeHealthChange(change.node, change.condition, change.since))

    def _taint(self, node: str, unreachable: bool, cause: str | None) -> None:
        if (node in self._unreachable) == unreachable:
            return
        if unreachable:
            self._unreachable.add(node)
        else:
            self._unreachable.discard(node)
        stored = self.inventory.node(node)
        if stored is not None:
            self.inventory.put_node(self._tainted(stored))
        if not unreachable:
            self._wake_everyone(cause)

    def _tainted(self, node: ApiObject) -> ApiObject:
        """A Node as placement sees it: an unreachable one carries `node.kubernetes.io/unreachable`
        (NoSchedule), as the node lifecycle controller taints it."""
        taints = [t for t in node.spec.get("taints") or [] if t.get("key") != UNREACHABLE_TAINT]
        if node.name in self._unreachable:
            taints.append({"key": UNREACHABLE_TAINT, "effect": "NoSchedule"})
        if taints == list(node.spec.get("taints") or []):
            return node
        return dataclasses.replace(node, spec={**node.spec, "taints": taints})

    def _lose_node(
        self, node: str, uids: Iterable[str], *, since: float, deleted: bool, cause: str | None
    ) -> None:
        """The pods that held room on a node that is gone fail (as the pod garbage collector and the taint
        manager fail them), their room and claims let go, and their gangs restart per their policy."""
        lost: list[tuple[GroupRef, PodKey]] = []
        broken: set[str] = set()
        left: set[str] = set()
        for uid in uids:
            pod = self.book.pods.get(uid)
            if pod is None or pod.phase in TERMINAL:
                continue
            group = self.book.groups.get(pod.group_key)
            if group is not None and group.awaiting_claims is not None and uid in group.placed:
                message = f"node {node} of the proposed placement was lost"
                self._outputs.append(self._release_claims_wait(group, message, cause))
            if pod.node is None:
                self._unbind(uid, cause)  # only proposed there: it lets go of its claims and waits again
                continue
            if group is not None:
                lost.append((self._ref(group), _pod_key(pod)))
            was_evicting = pod.evicting
            self.book.finish(uid, PodPhase.FAILED)
            self._unbind(uid, cause)
            left.add(pod.group_key)
            if not was_evicting:
                broken.add(pod.group_key)
        self._outputs.append(NodeLost(node, tuple(lost), since, deleted, cause))
        self._wake_everyone(cause)
        for key in sorted(broken):
            self._maybe_restart(key, cause)
            self._maybe_disrupted(key, cause)
            self._refresh(key)
            self._release_idle_group_claims(key)
        for key in sorted(left):
            self._maybe_quota_released(key, cause)

    # -- gangs --------------------------------------------------------------------------------------------

    def _maybe_restart(self, key: str, cause: str | None) -> None:
        group = self.book.groups.get(key)
        if group is None or group.standalone or not group.scheduled:
            return
        members = [pod for pod in self.book.members(key) if not pod.evicting]
        restart = decide_gang_restart(self.book.core_group(group), {pod.uid: pod.phase for pod in members})
        if restart is None:
            return
        evicted: list[PodKey] = []
        for uid in restart.evict:
            pod = self.book.pods[uid]
            if pod.node is not None:
                self.book.mark_evicting(uid)
                evicted.append(_pod_key(pod))
        group.domain = None
        group.placement = {}
        self._outputs.append(Restart(self._ref(group), restart.message, tuple(evicted), cause))

    def _maybe_disrupted(self, key: str, cause: str | None) -> None:
        """A scheduled gang none of whose pods holds room any more (they ended, or were deleted from their
        nodes), not all of them done, is placed anew wherever it fits: it is not held to the domain it was
        given."""
        group = self.book.groups.get(key)
        if group is None or group.standalone or not group.scheduled or group.awaiting_claims is not None:
            return
        if group.obj.metadata.get("deletionTimestamp"):
            return  # going: it is placed nowhere again
        members = list(self.book.members(key))
        if any(pod.node is not None and pod.phase not in TERMINAL for pod in members):
            return
        if members and all(pod.phase == PodPhase.SUCCEEDED for pod in members):
            return
        group.scheduled = False
        group.domain = None
        group.placement = {}
        self._outputs.append(Disrupted(self._ref(group), DISRUPTED_REASON, DISRUPTED_MESSAGE, cause))

    def _maybe_quota_released(self, key: str, cause: str | None) -> None:
        """A quota-managed gang none of whose pods holds a node any more, and with no quota held for its
        waiting pods, holds no quota: its `QuotaReserved` turns False."""
        group = self.book.groups.get(key)
        queue = self.quota_queue(group) if group is not None else None
        if group is None or queue is None or group.quota_hold is not None:
            return
        members = list(self.book.members(key))
        if any(pod.node is not None and pod.phase not in TERMINAL for pod in members):
            return
        finished = all(pod.phase in TERMINAL for pod in members)
        self._outputs.append(QuotaReleased(self._ref(group), queue, finished, cause))

    def _time_out(self, timed_out: PodGroupTimedOut) -> TimedOut | None:
        group = self.book.groups.get(timed_out.podgroup)
        if group is None or group.uid != timed_out.podgroup_uid:
            return None
        group.timed_out = True
        self._release(group.key)
        self._nominations.pop(group.key, None)
        if group.awaiting_claims is not None:
            self._forget(group, group.awaiting_claims, None)
            group.awaiting_claims = None
        failed = [self.book.pods[uid] for uid in sorted(group.pending)]
        for pod in failed:
            self.book.finish(pod.uid, PodPhase.FAILED)
        return TimedOut(
            group=self._ref(group),
            pending_s=timed_out.pending_seconds,
            message=timed_out.message,
            pods=tuple(_pod_key(pod) for pod in failed),
            cause=group.cause,
            condition_false=not group.scheduled,
        )


def _pod_key(pod: PodRecord) -> PodKey:
    return PodKey(pod.obj.namespace, pod.obj.name, pod.uid, pod.node)
