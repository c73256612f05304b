"""A fleet of nodes with whole and shared GPUs, held as arrays: what placement policies score and the
simulator updates.

A GPU is counted in milli-GPUs (1,000 a whole device), the way DRA consumable capacity shares one device
between pods: a pod asking `gpu_milli` < 1,000 of one GPU shares it, a pod asking several GPUs takes each
whole. Absent GPUs (a node with fewer than the widest node's) hold 0 free milli-GPUs, so they fit nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

MILLI = 1000
"""Milli-GPUs in one whole GPU."""

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node: allocatable CPU (milli-cores), memory (MiB), GPU count and GPU model (empty: no GPU)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    model: str = ""


@dataclass(frozen=True, slots=True)
class PodDemand:
    """What one pod asks for: CPU, memory, `gpus` devices of `gpu_milli` each (below 1,000 only with one
    GPU: a shared GPU), and the GPU models it accepts (empty: any)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    gpu_milli: int = 0
    models: frozenset[str] = frozenset()

    @property
    def gpu_request(self) -> int:
        """Milli-GPUs asked for in total."""
        return self.gpus * self.gpu_milli

    @property
    def shared(self) -> bool:
        return self.gpus == 1 and 0 < self.gpu_milli < MILLI

    @property
    def shape(self) -> tuple[int, int, int, int, frozenset[str]]:
        return (self.cpu_milli, self.memory_mib, self.gpus, self.gpu_milli, self.models)


class Choice(NamedTuple):
    """Where a pod goes: a node (its position in the fleet) and the GPUs it takes there."""

    node: int
    gpus: tuple[int, ...]


class GpuFleet:
    """Free CPU, memory and per-GPU milli-GPUs of every node; `version[i]` grows whenever node i changes,
    so that a policy may keep per-node scores until the node they were computed for changes."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        self.nodes = tuple(nodes)
        self.names = tuple(node.name for node in nodes)
        width = max((node.gpus for node in nodes), default=0) or 1
        self.cpu_capacity: IntArray = np.array([node.cpu_milli for node in nodes], dtype=np.int64)
        self.memory_capacity: IntArray = np.array([node.memory_mib for node in nodes], dtype=np.int64)
        self.gpu_count: IntArray = np.array([node.gpus for node in nodes], dtype=np.int64)
        self.gpu_capacity: IntArray = np.where(
            np.arange(width)[None, :] < self.gpu_count[:, None], MILLI, 0
        ).astype(np.int64)
        self.models = tuple(sorted({node.model for node in nodes}))
        self.model_index: IntArray = np.array(
            [self.models.index(node.model) for node in nodes], dtype=np.int64
        )
        self.total_gpus = int(self.gpu_count.sum())
        self.version: IntArray = np.zeros(len(nodes), dtype=np.int64)
        self._model_masks: dict[frozenset[str], BoolArray] = {}
        self.reset()

    def reset(self) -> None:
        """Every node empty again."""
        self.cpu_free: IntArray = self.cpu_capacity.copy()
        self.memory_free: IntArray = self.memory_capacity.copy()
        self.gpu_free: IntArray = self.gpu_capacity.copy()
        self.version += 1
        self.allocated_gpu_milli = 0

    def __len__(self) -> int:
        return len(self.nodes)

    def accepts(self, models: frozenset[str]) -> BoolArray:
        """Nodes whose GPU model is one of `models` (every node when empty)."""
        mask = self._model_masks.get(models)
        if mask is None:
            if not models:
                mask = np.ones(len(self.nodes), dtype=np.bool_)
            else:
                allowed = np.array([model in models for model in self.models], dtype=np.bool_)
                mask = allowed[self.model_index]
            self._model_masks[models] = mask
        return mask

    def feasible(self, pod: PodDemand) -> BoolArray:
        """Nodes with room for the pod: CPU, memory, enough GPUs with its `gpu_milli` free, its model."""
        mask = (self.cpu_free >= pod.cpu_milli) & (self.memory_free >= pod.memory_mib)
        if pod.gpus:
            mask &= (self.gpu_free >= pod.gpu_milli).sum(axis=1) >= pod.gpus
            if pod.models:
                mask &= self.accepts(pod.models)
        return mask

    def place(self, pod: PodDemand, choice: Choice) -> None:
        node = choice.node
        self.cpu_free[node] -= pod.cpu_milli
        self.memory_free[node] -= pod.memory_mib
        for gpu in choice.gpus:
            self.gpu_free[node, gpu] -= pod.gpu_milli
        self.version[node] += 1
        self.allocated_gpu_milli += pod.gpu_request


def tightest_gpus(fleet: GpuFleet, node: int, pod: PodDemand) -> tuple[int, ...]:
    """The GPUs a pod takes on a node it fits: a shared GPU with the least room that holds it (lowest
    index among equals), else the first GPUs by index with its `gpu_milli` free."""
    if not pod.gpus:
        return ()
    free = fleet.gpu_free[node]
    fitting = np.flatnonzero(free >= pod.gpu_milli)
    if pod.shared:
        return (int(fitting[np.argmin(free[fitting])]),)
    return tuple(int(gpu) for gpu in fitting[: pod.gpus])
