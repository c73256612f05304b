"""The simulated kubelet's pods: which run where, and when each finishes (a virtual timer per pod)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SimulatedPod:
    """A pod this agent runs; `podgroup` is (namespace, name, uid) of its PodGroup, if it has one."""

    uid: str
    namespace: str
    name: str
    node: str
    podgroup: tuple[str, str, str] | None
    finishes_at: float | None
    started_by: str | None = None
    """The `pods.running` that told it started, which its ending answers."""


class SimulatedPods:
    """Pods running on this agent's nodes and their finish times (seconds, on the agent's clock).

    A pod without a run time runs until it is evicted. `due(now)` hands out the pods whose time has come,
    each once; `stop` forgets a pod (evicted, or found finished).
    """

    def __init__(self) -> None:
        self._pods: dict[str, SimulatedPod] = {}
        self._timers: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def run(self, pods: Iterable[SimulatedPod]) -> None:
        for pod in pods:
            self._pods[pod.uid] = pod
            if pod.finishes_at is not None:
                heapq.heappush(self._timers, (pod.finishes_at, pod.uid))

    def pods(self) -> list[SimulatedPod]:
        return list(self._pods.values())

    def stop(self, uid: str) -> SimulatedPod | None:
        return self._pods.pop(uid, None)

    def due(self, now: float) -> list[SimulatedPod]:
        finished: list[SimulatedPod] = []
        while self._timers and self._timers[0][0] <= now:
            finishes_at, uid = heapq.heappop(self._timers)
            pod = self._pods.get(uid)
            if pod is not None and pod.finishes_at == finishes_at:
                finished.append(self._pods.pop(uid))
        return finished

    def next_finish(self) -> float | None:
        while self._timers and self._timers[0][1] not in self._pods:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None
