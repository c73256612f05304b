"""Placement policies: which node (and which GPUs on it) one pod goes to, given the fleet as it is now.

Each is named in outputs exactly as here. They share the fleet's filter (CPU, memory, GPUs with room, GPU
model) and differ in the score:

- `random`: a node drawn uniformly among those that fit, and a GPU drawn among those with room (seeded).
- `first-fit`: the first node in fleet order that fits.
- `best-fit`: the paper artifact's formula, the node with the least leftover
  0.5 x (free CPU - requested) / 128,000 milli + 0.5 x (free milli-GPU - requested) / 8,000, scored as the
  artifact does (the integer 100 x (1 - leftover), rescaled to 0..100) with ties drawn at random (seeded).
- `podway`: the scheduler core's bin-packing order, walked on the core's own index (`BucketIndex`, as
  `libs/core/scheduling/packing.py` walks it): the first node that fits by ascending free count of the
  pod's primary dimension, then by name. The count is milli-GPUs for a GPU pod (the core counts whole
  devices; these pods share GPUs), whole CPU cores otherwise.
- `fgd`: fragmentation gradient descent: the node and GPU whose allocation increases the expected
  fragmentation (`fragmentation.py`) of the workload's own shape mix the least; among those within
  `FGD_TOLERANCE_MILLI` of the least, the node keeping the least free milli-GPUs, then the least free CPU,
  then fleet order.
- `fgd-cpu-ratio`: `fgd` whose gradient also counts the increase in free milli-GPUs that the node's free
  CPU could not feed at the workload's mean CPU per GPU (`unfed_gpu_milli`): a pod leaving a node's CPU
  short of its free GPUs costs what it strands, before the next pod of any shape stops fitting there.

GPUs on the chosen node: the shared GPU with the least room that holds the pod, else the first whole GPUs
(fgd chooses its shared GPU by the same gradient).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from libs.core.scheduling.buckets import BucketIndex

from .fleet import MILLI, BoolArray, Choice, GpuFleet, IntArray, PodDemand, tightest_gpus
from .fragmentation import FloatArray, ShapeMix, expected_fragmentation, unfed_gpu_milli

POLICY_NAMES = ("random", "first-fit", "best-fit", "podway", "fgd", "fgd-cpu-ratio")

DEDUPLICATE_ABOVE = 32
"""FGD scores distinct node states once when more nodes than this changed (below, sorting them costs more)."""
FGD_TOLERANCE_MILLI = 5.0
"""Gradients closer than this (milli-GPUs of expected fragmentation) count as equal, and the tightest node
among them wins (on seed 42 of openb-default: 274 GPUs left unallocated, against 289 breaking exact ties
only)."""
BEST_FIT_MAX_CPU_MILLI = 128_000
BEST_FIT_MAX_GPU_MILLI = 8_000


class PlacementPolicy(Protocol):
    name: str

    def choose(self, fleet: GpuFleet, pod: PodDemand) -> Choice | None:
        """Where the pod goes, or None when no node fits it."""
        ...


def make_policy(name: str, *, seed: int = 0, workload: Sequence[PodDemand] = ()) -> PlacementPolicy:
    """The policy of that name; `seed` draws random choices, `workload` gives the `fgd` policies their shape
    mix."""
    if name == "random":
        return RandomFit(seed)
    if name == "first-fit":
        return FirstFit()
    if name == "best-fit":
        return BestFit(seed)
    if name == "podway":
        return PodwayPacking()
    if name == "fgd":
        return FragmentationGradient(ShapeMix.of(workload))
    if name == "fgd-cpu-ratio":
        mix = ShapeMix.of(workload)
        return FragmentationGradient(mix, name=name, cpu_per_gpu=mix.cpu_per_gpu)
    raise ValueError(f"unknown placement policy {name!r}: one of {', '.join(POLICY_NAMES)}")


class RandomFit:
    name = "random"

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def choose(self, fleet: GpuFleet, pod: PodDemand) -> Choice | None:
        candidates = np.flatnonzero(fleet.feasible(pod))
        if not len(candidates):
            return None
        node = int(candidates[self._rng.integers(len(candidates))])
        if pod.shared:
            fitting = np.flatnonzero(fleet.gpu_free[node] >= pod.gpu_milli)
            return Choice(node, (int(fitting[self._rng.integers(len(fitting))]),))
        return Choice(node, tightest_gpus(fleet, node, pod))


class FirstFit:
    name = "first-fit"

    def choose(self, fleet: GpuFleet, pod: PodDemand) -> Choice | None:
        mask = fleet.feasible(pod)
        node = int(np.argmax(mask))
        if not mask[node]:
            return None
        return Choice(node, tightest_gpus(fleet, node, pod))


class BestFit:
    name = "best-fit"

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def choose(self, fleet: GpuFleet, pod: PodDemand) -> Choice | None:
        candidates = np.flatnonzero(fleet.feasible(pod))
        if not len(candidates):
            return None
        cpu_left = (fleet.cpu_free[candidates] - pod.cpu_milli) / BEST_FIT_MAX_CPU_MILLI
        gpu_left = (fleet.gpu_free[candidates].sum(axis=1) - pod.gpu_request) / BEST_FIT_MAX_GPU_MILLI
        score = ((1.0 - (0.5 * cpu_left + 0.5 * gpu_left)) * 100).astype(np.int64)
        best = candidates[score == score.max()]
        node = int(best[self._rng.integers(len(best))]) if len(best) > 1 else int(best[0])
        return Choice(node, tightest_gpus(fleet, node, pod))


class PodwayPacking:
    name = "podway"

    def __init__(self) -> None:
        self._fleet: GpuFleet | None = None
        self._by_gpu_milli = BucketIndex()
        self._by_cores = BucketIndex()
        self._position: dict[str, int] = {}
        self._indexed: IntArray = np.zeros(0, dtype=np.int64)

    def choose(self, fleet: GpuFleet, pod: PodDemand) -> Choice | None:
        mask = fleet.feasible(pod)
        if not mask.any():
            return None
        self._index(fleet)
        if pod.gpus:
            names = self._by_gpu_milli.at_least(pod.gpu_request)
        else:
            names = self._by_cores.at_least(pod.cpu_milli // 1000)
        position = self._position
        node = next(position[name] for name in names if mask[position[name]])
        return Choice(node, tightest_gpus(fleet, node, pod))

    def _index(self, fleet: GpuFleet) -> None:
        """Nodes changed since the last pod moved to their new counts (every node for a new fleet)."""
        if self._fleet is not fleet:
            self._fleet = fleet
            self._by_gpu_milli, self._by_cores = BucketIndex(), BucketIndex()
            self._position = {name: node for node, name in enumerate(fleet.names)}
            self._indexed = np.full(len(fleet), -1, dtype=np.int64)
        changed = np.flatnonzero(self._indexed != fleet.version)
        names = [fleet.names[node] for node in changed.tolist()]
        milli = fleet.gpu_free[changed].sum(axis=1).tolist()
        self._by_gpu_milli.place_all(zip(names, milli, strict=True))
        self._by_cores.place_all(zip(names, (fleet.cpu_free[changed] // 1000).tolist(), strict=True))
        self._indexed[changed] = fleet.version[changed]


class _Gradient:
    """One pod shape's fragmentation increase per node, and the shared GPU it would take, each valid while
    the node's version is `seen`."""

    def __init__(self, size: int) -> None:
        self.delta: FloatArray = np.zeros(size, dtype=np.float64)
        self.gpu: IntArray = np.full(size, -1, dtype=np.int64)
        self.seen: IntArray = np.full(size, -1, dtype=np.int64)


class FragmentationGradient:
    """FGD with per-node memory: a node's score for a shape is computed again only after the node changed,
    so one placement costs a vectorised pass over the nodes that changed since that shape last came.

    With `cpu_per_gpu`, the score adds the increase in the node's free GPUs its CPU could not feed at that
    rate (milli-CPU per milli-GPU), in the same milli-GPUs as the fragmentation."""

    def __init__(self, mix: ShapeMix, *, name: str = "fgd", cpu_per_gpu: float = 0.0) -> None:
        self.name = name
        self.mix = mix
        self._cpu_per_gpu = cpu_per_gpu
        self._fleet: GpuFleet | None = None
        self._access: BoolArray = np.zeros((0, 0), dtype=np.bool_)
        self._gradients: dict[tuple[int, int, int, int, frozenset[str]], _Gradient] = {}

    def choose(self, fleet: GpuFleet, pod: PodDemand) -> Choice | None:
        self._attach(fleet)
        mask = fleet.feasible(pod)
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return None
        gradient = self._gradients.get(pod.shape)
        if gradient is None:
            gradient = self._gradients[pod.shape] = _Gradient(len(fleet))
        stale = candidates[gradient.seen[candidates] != fleet.version[candidates]]
        if len(stale):
            self._score(fleet, pod, stale, gradient)
        delta = gradient.delta[candidates]
        if self._cpu_per_gpu:
            delta = delta + self._unfed_increase(fleet, pod, candidates)
        tied = candidates[delta <= delta.min() + FGD_TOLERANCE_MILLI]
        if len(tied) > 1:
            gpu_left = fleet.gpu_free[tied].sum(axis=1)
            tied = tied[np.lexsort((fleet.cpu_free[tied], gpu_left))]
        node = int(tied[0])
        if pod.shared:
            return Choice(node, (int(gradient.gpu[node]),))
        return Choice(node, tightest_gpus(fleet, node, pod))

    def _unfed_increase(self, fleet: GpuFleet, pod: PodDemand, nodes: IntArray) -> FloatArray:
        gpu, cpu, rate = fleet.gpu_free[nodes].sum(axis=1), fleet.cpu_free[nodes], self._cpu_per_gpu
        after = unfed_gpu_milli(gpu - pod.gpu_request, cpu - pod.cpu_milli, rate)
        increase: FloatArray = after - unfed_gpu_milli(gpu, cpu, rate)
        return increase

    def _attach(self, fleet: GpuFleet) -> None:
        if self._fleet is fleet:
            return
        self._fleet = fleet
        self._access = self.mix.access(fleet)
        self._gradients = {}

    def _score(self, fleet: GpuFleet, pod: PodDemand, nodes: IntArray, gradient: _Gradient) -> None:
        """The gradient of the given nodes, computed once per distinct node state (CPU, memory, model and
        the multiset of per-GPU room): most nodes of a fleet look alike, and GPUs within a node do too."""
        gpu = fleet.gpu_free[nodes]
        ordered = np.sort(gpu, axis=1)
        if len(nodes) > DEDUPLICATE_ABOVE:
            keys = np.column_stack(
                (fleet.cpu_free[nodes], fleet.memory_free[nodes], fleet.model_index[nodes], ordered)
            )
            _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
        else:
            first = inverse = np.arange(len(nodes))
        states, rows = nodes[first], ordered[first]
        cpu, memory, access = fleet.cpu_free[states], fleet.memory_free[states], self._access[states]
        before = expected_fragmentation(self.mix, cpu, memory, rows, access)
        cpu, memory = cpu - pod.cpu_milli, memory - pod.memory_mib
        if pod.shared:
            after, room = self._best_shared_gpu(rows, cpu, memory, access, pod.gpu_milli)
            # The node's first GPU with the chosen room: GPUs with equal room are interchangeable.
            gradient.gpu[nodes] = np.argmax(gpu == room[inverse][:, None], axis=1)
        else:
            taken = rows.copy()
            if pod.gpus:
                # Rows ascend, so the last `gpus` GPUs have the room (whole GPUs are alike anyway).
                taken[:, -pod.gpus :] -= pod.gpu_milli
            after = expected_fragmentation(self.mix, cpu, memory, taken, access)
        gradient.delta[nodes] = (after - before)[inverse]
        gradient.seen[nodes] = fleet.version[nodes]

    def _best_shared_gpu(
        self, gpu: IntArray, cpu: IntArray, memory: IntArray, access: BoolArray, milli: int
    ) -> tuple[FloatArray, IntArray]:
        """Per state, the least fragmentation after sharing one of its GPUs, and the room of that GPU
        (among equals, the GPU with the least room)."""
        count, width = gpu.shape
        options = np.repeat(gpu[:, None, :], width, axis=1)
        diagonal = np.arange(width)
        options[:, diagonal, diagonal] -= milli
        after = expected_fragmentation(
            self.mix,
            np.repeat(cpu, width),
            np.repeat(memory, width),
            options.reshape(count * width, width),
            np.repeat(access, width, axis=0),
        ).reshape(count, width)
        after = np.where(gpu >= milli, after, np.inf)
        order = np.lexsort((np.where(gpu >= milli, gpu, MILLI + 1), after), axis=1)
        choice = order[:, 0]
        rows = np.arange(count)
        return after[rows, choice], gpu[rows, choice]
