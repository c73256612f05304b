"""Node health, as the node lifecycle controller keeps it: a node whose agent stops beating is NotReady after a
grace period, and lost after the eviction timeout (its pods then fail, `NodeLost`); beats again make it Ready.

Beats are observed, not trusted: a node counts as heard when its beat count changes, at the observer's time,
so the agent's and the scheduler's clocks never need to agree (as kube-controller-manager reads node leases).
A node whose agent never beat is not watched: it was registered by hand (a test, a user's manifest).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
"""The taint a NotReady node carries (NoSchedule: nothing new is placed there)."""


class NodeCondition(StrEnum):
    """A watched node's Ready condition, as the reason of `Ready`: True (Ready) or Unknown."""

    READY = "KubeletReady"
    NOT_READY = "NodeStatusUnknown"
    LOST = "NodeLost"


NOT_READY_MESSAGE = "Kubelet stopped posting node status."
LOST_MESSAGE = (
    "Kubelet stopped posting node status; the pods on it failed past the eviction timeout (NodeLost)."
)


@dataclass(frozen=True, slots=True)
class NodeHealthSettings:
    monitor_grace_s: float = 40.0
    """kube-controller-manager's `--node-monitor-grace-period`: unheard this long, a node is NotReady."""
    eviction_s: float = 300.0
    """NotReady this long (a pod's default toleration of `node.kubernetes.io/unreachable`), its pods fail."""


@dataclass(frozen=True, slots=True)
class HealthChange:
    """A node became NotReady, lost, or Ready again (`since`: when it became so, for the condition)."""

    node: str
    condition: NodeCondition
    since: float


@dataclass(slots=True)
class _Watched:
    beats: int
    heard_at: float
    condition: NodeCondition = NodeCondition.READY
    since: float = 0.0
    stamp: int = 0
    """Bumped with each change, so that a deadline pushed before it is recognised as stale."""


@dataclass
class NodeHealth:
    """The watched nodes: `heard` takes beat counts, `due` the transitions time alone brings."""

    settings: NodeHealthSettings = field(default_factory=NodeHealthSettings)
    _nodes: dict[str, _Watched] = field(default_factory=dict)
    _deadlines: list[tuple[float, str, int]] = field(default_factory=list)

    def restore(self, node: str, beats: int, condition: NodeCondition, since: float, *, now: float) -> None:
        """What a new leader reads: the beat count and the condition written. A node it finds Ready is heard
        now (a fresh grace, as the node lifecycle controller gives after a restart)."""
        ready = condition == NodeCondition.READY
        self._watch(node, _Watched(beats, now, condition, now if ready else since))

    def heard(self, beats: Mapping[str, int], *, now: float) -> list[HealthChange]:
        """Beat counts read now; a node not Ready whose count moved is Ready again (returned)."""
        back: list[HealthChange] = []
        for node, count in sorted(beats.items()):
            watched = self._nodes.get(node)
            if watched is None:
                self._watch(node, _Watched(count, now, since=now))
                continue
            if count == watched.beats:
                continue
            watched.beats, watched.heard_at = count, now
            if watched.condition != NodeCondition.READY:
                watched.condition, watched.since = NodeCondition.READY, now
                back.append(HealthChange(node, NodeCondition.READY, now))
            self._watch(node, watched)
        return back

    def due(self, now: float) -> list[HealthChange]:
        """Nodes unheard past the grace (NotReady), and NotReady past the eviction timeout (lost)."""
        changes: list[HealthChange] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, node, stamp = heapq.heappop(self._deadlines)
            watched = self._nodes.get(node)
            if watched is None or watched.stamp != stamp:
                continue
            if watched.condition == NodeCondition.READY:
                watched.condition = NodeCondition.NOT_READY
                watched.since = watched.heard_at + self.settings.monitor_grace_s
            elif watched.condition == NodeCondition.NOT_READY:
                watched.condition = NodeCondition.LOST
                watched.since += self.settings.eviction_s
            changes.append(HealthChange(node, watched.condition, watched.since))
            self._watch(node, watched)
        return changes

    def next_deadline(self) -> float | None:
        """When `due` next has something to say."""
        while self._deadlines:
            deadline, node, stamp = self._deadlines[0]
            watched = self._nodes.get(node)
            if watched is not None and watched.stamp == stamp:
                return deadline
            heapq.heappop(self._deadlines)
        return None

    def beats(self, node: str) -> int | None:
        """The last beat count heard from a watched node."""
        watched = self._nodes.get(node)
        return watched.beats if watched is not None else None

    def condition(self, node: str) -> NodeCondition:
        watched = self._nodes.get(node)
        return watched.condition if watched is not None else NodeCondition.READY

    def forget(self, node: str) -> None:
        self._nodes.pop(node, None)

    def _watch(self, node: str, watched: _Watched) -> None:
        """(Re)arm the node's next deadline: the grace while Ready, the eviction while NotReady."""
        watched.stamp += 1
        self._nodes[node] = watched
        if watched.condition == NodeCondition.READY:
            deadline = watched.heard_at + self.settings.monitor_grace_s
        elif watched.condition == NodeCondition.NOT_READY:
            deadline = watched.since + self.settings.eviction_s
        else:
            return
        heapq.heappush(self._deadlines, (deadline, node, watched.stamp))
