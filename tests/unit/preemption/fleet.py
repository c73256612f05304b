"""A small fleet for victim-search tests: nodes in racks, running units bound on them, a preemptor."""

from __future__ import annotations

from collections.abc import Sequence

from libs.core.preemption import CandidateIndex, DisruptionMode, Preemptor, RunningPod, UnitOwner
from libs.core.scheduling import RACK_KEY, ClusterSnapshot, PodGroup, PodRequest
from tests.unit.scheduling.builders import make_node, make_pod


class Fleet:
    """`racks` racks of `nodes_per_rack` nodes with `gpus` GPUs each; units are bound with `run`."""

    def __init__(self, racks: int = 2, nodes_per_rack: int = 2, gpus: int = 8) -> None:
        nodes = [
            make_node(f"r{rack}-n{index}", gpus=gpus, rack=f"r{rack}", block="b0")
            for rack in range(racks)
            for index in range(nodes_per_rack)
        ]
        self.snapshot = ClusterSnapshot(nodes)
        self.index = CandidateIndex(self.snapshot.topology_keys)
        for node in nodes:
            self.index.put_node(node.name, node.labels)

    def run(
        self,
        name: str,
        nodes: Sequence[str],
        *,
        priority: int,
        gpus: int = 1,
        mode: DisruptionMode = DisruptionMode.POD_GROUP,
        min_count: int | None = None,
        started_at: float = 0.0,
        standalone: bool = False,
        indexes: Sequence[int] | None = None,
    ) -> list[str]:
        """A unit of one pod per entry of `nodes`, bound there (with these completion indexes, if given);
        returns its pod uids."""
        key = f"ml/{name}"
        owner = UnitOwner(
            key,
            "ml",
            name,
            f"uid-group-{name}",
            priority,
            DisruptionMode.POD if standalone else mode,
            len(nodes) if min_count is None else min_count,
            standalone=standalone,
        )
        self.index.put_owner(owner)
        uids = []
        for position, node in enumerate(nodes):
            request = make_pod(f"{name}-{position}", gpus=gpus, cpu=1, memory_gib=1)
            placement = self.snapshot.bind(request, node)
            index = indexes[position] if indexes is not None else None
            self.index.add(RunningPod(placement, "ml", key, priority, started_at, index))
            uids.append(request.uid)
        return uids

    def free_gpus(self) -> dict[str, int]:
        return {state.name: state.count("gpu.example.com") for state in self.snapshot.node_states()}


def preemptor(
    name: str,
    size: int,
    *,
    gpus: int = 1,
    priority: int = 1000,
    rack: bool = False,
    min_count: int | None = None,
    never: bool = False,
) -> Preemptor:
    group = PodGroup(
        "ml",
        name,
        uid=f"uid-group-{name}",
        gang_min_count=size if min_count is None else min_count,
        topology_key=RACK_KEY if rack else None,
        priority=priority,
    )
    pods: list[PodRequest] = [make_pod(f"{name}-{i}", gpus=gpus, cpu=1, memory_gib=1) for i in range(size)]
    return Preemptor(group, pods, never=never)
