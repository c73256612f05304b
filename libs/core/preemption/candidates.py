"""Running pods as preemption candidates: by node and by owner, with what each topology domain holds per
priority, so that the search ranks domains without looking at their pods."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from libs.core.scheduling.model import DEFAULT_TOPOLOGY_KEYS

from .model import RunningPod, UnitOwner

CLUSTER = ("", "")
"""The tally key of the whole cluster (no topology constraint)."""


@dataclass(slots=True)
class Held:
    """What running pods of one priority hold in one domain."""

    pods: int = 0
    cpu_milli: int = 0
    memory: int = 0
    devices: dict[str, int] = field(default_factory=dict)
    largest: dict[str, int] = field(default_factory=dict)
    """The most one of these pods has held of each resource (never lowered: a bound, not a count)."""
    latest_start: float = -math.inf
    """When the youngest of these pods started (never moved back: a bound)."""

    def add(self, pod: RunningPod, sign: int) -> None:
        placement = pod.placement
        self.pods += sign
        self.cpu_milli += sign * placement.cpu_milli
        self.memory += sign * placement.memory
        for cls, names in placement.devices.items():
            self.devices[cls] = self.devices.get(cls, 0) + sign * len(names)
        if sign > 0:
            self.latest_start = max(self.latest_start, pod.started_at)
            largest = self.largest
            largest["pods"] = 1
            largest["cpu"] = max(largest.get("cpu", 0), placement.cpu_milli)
            largest["memory"] = max(largest.get("memory", 0), placement.memory)
            for cls, names in placement.devices.items():
                largest[cls] = max(largest.get(cls, 0), len(names))


class CandidateIndex:
    """Every running pod that could be preempted, kept current by the world that owns it.

    Pods are filed by node and by owner; `held(key, value)` is what the domain's running pods hold per
    priority (kept for `keys` and the whole cluster, and for any other key from its first use on).
    """

    def __init__(self, keys: Sequence[str] = DEFAULT_TOPOLOGY_KEYS) -> None:
        self.keys: list[str] = list(keys)
        self.owners: dict[str, UnitOwner] = {}
        self.pods: dict[str, RunningPod] = {}
        self.labels: dict[str, Mapping[str, str]] = {}
        self._by_node: dict[str, set[str]] = {}
        self._by_owner: dict[str, set[str]] = {}
        self._domains: dict[str, dict[str, set[str]]] = {key: {} for key in self.keys}
        self._held: dict[tuple[str, str], dict[int, Held]] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self.bounds: dict[Hashable, tuple[Hashable, Any]] = {}
        """The victim search's per-domain bounds, with the state each was computed on (see `version`)."""

    # -- nodes ----------------------------------------------------------------------------------------

    def put_node(self, name: str, labels: Mapping[str, str]) -> None:
        """A node and its labels (a node whose labels change keeps its pods, tallied again)."""
        pods = [self.pods[uid] for uid in self._by_node.get(name, ())]
        for pod in pods:
            self.remove(pod.uid)
        self._leave_domains(name)
        self.labels[name] = labels
        self._by_node.setdefault(name, set())
        for key, domains in self._domains.items():
            value = labels.get(key)
            if value is not None:
                domains.setdefault(value, set()).add(name)
        for pod in pods:
            self.add(pod)

    def remove_node(self, name: str) -> list[RunningPod]:
        """Forget a node; its pods (lost with it) are returned."""
        lost = [pod for uid in sorted(self._by_node.get(name, ())) if (pod := self.remove(uid))]
        self._leave_domains(name)
        self.labels.pop(name, None)
        self._by_node.pop(name, None)
        return lost

    def _leave_domains(self, name: str) -> None:
        labels = self.labels.get(name) or {}
        for key, domains in self._domains.items():
            value = labels.get(key)
            if value is not None and value in domains:
                domains[value].discard(name)
                if not domains[value]:
                    del domains[value]

    def domain_values(self, key: str) -> list[str]:
        self._track(key)
        return sorted(self._domains[key])

    def nodes_in(self, key: str | None, value: str) -> Iterable[str]:
        if key is None:
            return self.labels.keys()
        self._track(key)
        return self._domains[key].get(value, ())

    # -- pods -----------------------------------------------------------------------------------------

    def put_owner(self, owner: UnitOwner) -> None:
        self.owners[owner.key] = owner

    def add(self, pod: RunningPod) -> None:
        if pod.uid in self.pods:
            self.remove(pod.uid)
        self.pods[pod.uid] = pod
        self._by_node.setdefault(pod.node, set()).add(pod.uid)
        self._by_owner.setdefault(pod.group_key, set()).add(pod.uid)
        self._tally(pod, +1)

    def remove(self, uid: str) -> RunningPod | None:
        pod = self.pods.pop(uid, None)
        if pod is None:
            return None
        self._by_node.get(pod.node, set()).discard(uid)
        members = self._by_owner.get(pod.group_key)
        if members is not None:
            members.discard(uid)
            if not members:
                del self._by_owner[pod.group_key]
                self.owners.pop(pod.group_key, None)
        self._tally(pod, -1)
        return pod

    def on_nodes(self, nodes: Iterable[str]) -> Iterator[RunningPod]:
        for node in nodes:
            for uid in self._by_node.get(node, ()):
                yield self.pods[uid]

    def of_owner(self, key: str) -> list[RunningPod]:
        return [self.pods[uid] for uid in self._by_owner.get(key, ())]

    def held(self, key: str | None, value: str) -> Mapping[int, Held]:
        """What the running pods of a domain hold, per priority, lowest first (`key` None: the whole
        cluster)."""
        if key is None:
            return self._held.get(CLUSTER, {})
        self._track(key)
        return self._held.get((key, value), {})

    def rank_below(self, ranks: Mapping[str, int], priority: int) -> list[UnitOwner]:
        """Rank the pods of the owners in `ranks` at the priority given there (below `priority`), those whose
        own priority is not lower already, so that a preemptor of `priority` may take them (placement-aware
        reclaim); returns the owners lowered, as they were, for `restore`."""
        lowered = []
        for key in sorted(ranks):
            owner = self.owners.get(key)
            if owner is not None and owner.priority >= priority:
                lowered.append(owner)
                self._reprioritise(owner, min(ranks[key], priority - 1))
        return lowered

    def restore(self, owners: Iterable[UnitOwner]) -> None:
        """Undo `rank_below`."""
        for owner in owners:
            if owner.key in self.owners:
                self._reprioritise(owner, owner.priority)

    def _reprioritise(self, owner: UnitOwner, priority: int) -> None:
        pods = self.of_owner(owner.key)
        for pod in pods:
            self.remove(pod.uid)
        self.owners[owner.key] = dataclasses.replace(owner, priority=priority)
        for pod in pods:
            self.add(dataclasses.replace(pod, priority=priority))

    # -- tallies --------------------------------------------------------------------------------------

    def _track(self, key: str) -> None:
        """Tally a key from now on (its domains from the node labels, its pods from the index)."""
        if key in self._domains:
            return
        self.keys.append(key)
        domains: dict[str, set[str]] = {}
        for name, labels in self.labels.items():
            value = labels.get(key)
            if value is not None:
                domains.setdefault(value, set()).add(name)
        self._domains[key] = domains
        for pod in self.pods.values():
            value = self.labels.get(pod.node, {}).get(key)
            if value is not None:
                self._held_at(key, value, pod.priority).add(pod, +1)
                self._versions[(key, value)] = self._versions.get((key, value), 0) + 1

    def version(self, key: str | None, value: str) -> int:
        """Counts the changes to what a domain's running pods hold."""
        return self._versions.get(CLUSTER if key is None else (key, value), 0)

    def _tally(self, pod: RunningPod, sign: int) -> None:
        versions = self._versions
        self._held_at(*CLUSTER, pod.priority).add(pod, sign)
        versions[CLUSTER] = versions.get(CLUSTER, 0) + 1
        labels = self.labels.get(pod.node) or {}
        for key in self.keys:
            value = labels.get(key)
            if value is not None:
                self._held_at(key, value, pod.priority).add(pod, sign)
                versions[(key, value)] = versions.get((key, value), 0) + 1

    def _held_at(self, key: str, value: str, priority: int) -> Held:
        levels = self._held.get((key, value))
        if levels is None:
            levels = self._held[(key, value)] = {}
        held = levels.get(priority)
        if held is None:
            levels[priority] = held = Held()
            # Kept in priority order, so the search reads the lowest first without sorting.
            self._held[(key, value)] = dict(sorted(levels.items()))
        return held
