"""GPU fragmentation as the USENIX ATC '23 paper "Beware of Fragmentation" measures it.

For one node and one pod shape, the fragment is the node's free milli-GPUs that a pod of that shape could
not use: all of them when the shape cannot run there at all (too little CPU or memory, too few GPUs with
room, a GPU model it does not accept, or a shape asking no GPU), else those on GPUs with less room than the
shape asks per GPU. A node's expected fragmentation weighs each shape by how much the workload asks for it.
Memory is Podway's addition (the paper checks CPU and GPUs only): on openb it strands GPUs as CPU does.

The fragment only asks whether the next pod of a shape fits, not how many will: a node whose CPU still fits
one more pod but cannot feed all its free GPUs shows no fragment yet. `unfed_gpu_milli` measures that
shortfall: the free GPUs a node's free CPU could not feed at the workload's mean CPU per GPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .fleet import MILLI, BoolArray, GpuFleet, IntArray, PodDemand

FloatArray = npt.NDArray[np.float64]

TYPICAL_COVERAGE = 1.0
"""Shapes are taken most frequent first until they cover this share of the workload's pods (the paper's
artifact takes 95%; every shape places 8-14 more GPUs on openb) and the weights normalised over them."""


@dataclass(frozen=True, slots=True)
class ShapeMix:
    """The pod shapes of a workload (CPU, memory, GPU count, milli-GPUs per GPU, accepted models) and their
    weights."""

    cpu_milli: IntArray
    memory_mib: IntArray
    gpus: IntArray
    gpu_milli: IntArray
    models: tuple[frozenset[str], ...]
    weight: FloatArray
    cpu_per_gpu: float
    """Milli-CPU the workload's GPU pods ask per milli-GPU, over all their pods (0 when none asks a GPU)."""
    levels: IntArray
    """The distinct milli-GPUs per GPU the shapes ask for: room is compared once per level, not per shape."""
    level_of: IntArray

    @classmethod
    def of(cls, pods: Iterable[PodDemand], coverage: float = TYPICAL_COVERAGE) -> ShapeMix:
        """The most frequent shapes of `pods` (ties by shape) covering `coverage` of them."""
        counts = Counter(
            (pod.cpu_milli, pod.memory_mib, pod.gpus, pod.gpu_milli, tuple(sorted(pod.models)))
            for pod in pods
        )
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        taken: list[tuple[tuple[int, int, int, int, tuple[str, ...]], int]] = []
        covered = 0
        for shape, count in ranked:
            if covered >= coverage * total:
                break
            taken.append((shape, count))
            covered += count
        # A shape weighs what its pods bring in GPUs (a whole GPU at least, so that shared and CPU-only
        # shapes still count): the aim is GPUs allocated, not pods (the paper weighs by pods).
        weight = np.array(
            [count * max(shape[2] * shape[3], MILLI) for shape, count in taken], dtype=np.float64
        )
        gpu_milli = np.array([shape[3] for shape, _ in taken], dtype=np.int64)
        gpu_demand = sum(count * shape[2] * shape[3] for shape, count in counts.items())
        cpu_demand = sum(count * shape[0] for shape, count in counts.items() if shape[2])
        levels, level_of = np.unique(gpu_milli, return_inverse=True)
        return cls(
            cpu_milli=np.array([shape[0] for shape, _ in taken], dtype=np.int64),
            memory_mib=np.array([shape[1] for shape, _ in taken], dtype=np.int64),
            gpus=np.array([shape[2] for shape, _ in taken], dtype=np.int64),
            gpu_milli=gpu_milli,
            models=tuple(frozenset(shape[4]) for shape, _ in taken),
            weight=weight / weight.sum() if len(weight) else weight,
            cpu_per_gpu=cpu_demand / gpu_demand if gpu_demand else 0.0,
            levels=levels.astype(np.int64),
            level_of=level_of.reshape(-1).astype(np.int64),
        )

    def __len__(self) -> int:
        return len(self.weight)

    def access(self, fleet: GpuFleet) -> BoolArray:
        """Which shapes each node's GPU model admits, nodes by shapes."""
        return np.stack([fleet.accepts(models) for models in self.models], axis=1)


def expected_fragmentation(
    mix: ShapeMix, cpu_free: IntArray, memory_free: IntArray, gpu_free: IntArray, access: BoolArray
) -> FloatArray:
    """Expected fragmented milli-GPUs of node states, given the workload's shapes.

    `cpu_free` holds one entry per state, `gpu_free` one row of per-GPU free milli-GPUs per state, `access`
    one row per state of the shapes its GPU model admits.
    """
    total = gpu_free.sum(axis=1)
    fits = gpu_free[:, None, :] >= mix.levels[None, :, None]
    usable = fits.sum(axis=2)[:, mix.level_of]
    stranded = (total[:, None] - (gpu_free[:, None, :] * fits).sum(axis=2))[:, mix.level_of]
    runs = (usable >= mix.gpus[None, :]) & (cpu_free[:, None] >= mix.cpu_milli[None, :])
    runs &= memory_free[:, None] >= mix.memory_mib[None, :]
    runs &= access & (mix.gpu_milli > 0)[None, :]
    per_shape = np.where(runs, stranded, total[:, None])
    result: FloatArray = per_shape @ mix.weight
    return result


def unfed_gpu_milli(gpu_free: IntArray, cpu_free: IntArray, cpu_per_gpu: float) -> FloatArray:
    """Free milli-GPUs of each node that its free CPU could not feed, were every pod to ask `cpu_per_gpu`
    milli-CPU per milli-GPU (`gpu_free` is one total per node here); 0 without a rate."""
    if cpu_per_gpu <= 0:
        return np.zeros(len(gpu_free), dtype=np.float64)
    unfed: FloatArray = np.maximum(gpu_free - cpu_free / cpu_per_gpu, 0.0)
    return unfed
