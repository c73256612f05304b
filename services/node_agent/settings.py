"""The node agent's settings: where its cluster comes from (a file, else a generated shape)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator

from libs.cluster.generator import ClusterShape, generate_cluster
from libs.runtime.settings import PodwaySettings
from services.node_agent.host import parse_taint

REGISTERED_KINDS = ("Node", "ResourceSlice")


class NodeAgentSettings(PodwaySettings):
    """`PODWAY_CLUSTER_FILE` names a multi-document YAML of Node and ResourceSlice manifests; without it
    the cluster is generated from `PODWAY_CLUSTER_ZONES`, `_BLOCKS`, `_RACKS_PER_BLOCK`, `_NODES_PER_RACK`,
    `_GPUS_PER_NODE` and `_SHARED_GPUS_PER_NODE` (default: 64 nodes of 8 GPUs in 2 blocks of 4 racks, none
    shareable)."""

    cluster_file: Path | None = Field(default=None, description="Node + ResourceSlice manifests to register")
    cluster_zones: int = 1
    cluster_blocks: int = 2
    cluster_racks_per_block: int = 4
    cluster_nodes_per_rack: int = 8
    cluster_gpus_per_node: int = 8
    cluster_shared_gpus_per_node: int = 0
    runtime: Literal["simulated", "process"] = Field(
        default="simulated",
        description="simulated: a KWOK-like cluster; process: this host, pods as processes",
    )
    node_name: str | None = Field(default=None, description="process runtime: the Node's name (the hostname)")
    labels_file: Path | None = Field(
        default=None, description="process runtime: Node labels (YAML or key=value)"
    )
    devices_file: Path | None = Field(default=None, description="process runtime: GPUs when NVML finds none")
    node_taints: list[str] = Field(
        default_factory=list, description="process runtime: Node taints, each `key[=value]:Effect`"
    )
    reserved_cpu_m: int = Field(default=100, description="process runtime: CPU kept from pods (millicores)")
    reserved_memory_mi: int = Field(default=256, description="process runtime: memory kept from pods (MiB)")
    pods_dir: Path | None = Field(
        default=None, description="process runtime: pod directories (data_dir/pods)"
    )
    restart_backoff_seconds: float = Field(default=10.0, description="process runtime: first crash back-off")
    restart_backoff_max_seconds: float = Field(default=300.0, description="process runtime: back-off cap")
    keep_pods_on_stop: bool = Field(
        default=False,
        description="process runtime: leave pods running when the agent stops (found again later)",
    )

    @field_validator("node_taints")
    @classmethod
    def _taints_parse(cls, taints: list[str]) -> list[str]:
        for taint in taints:
            parse_taint(taint)
        return taints

    def shape(self) -> ClusterShape:
        return ClusterShape(
            zones=self.cluster_zones,
            blocks=self.cluster_blocks,
            racks_per_block=self.cluster_racks_per_block,
            nodes_per_rack=self.cluster_nodes_per_rack,
            gpus_per_node=self.cluster_gpus_per_node,
            shared_gpus_per_node=self.cluster_shared_gpus_per_node,
        )

    def resolved_pods_dir(self) -> Path:
        return (self.pods_dir or self.data_dir / "pods").resolve()

    def cluster_manifests(self) -> list[dict[str, Any]]:
        """The Nodes and ResourceSlices this agent registers, Nodes first."""
        if self.cluster_file is not None:
            docs = read_manifests(self.cluster_file)
        else:
            docs = generate_cluster(self.shape())
        chosen = [doc for doc in docs if doc.get("kind") in REGISTERED_KINDS]
        return sorted(chosen, key=lambda doc: REGISTERED_KINDS.index(doc["kind"]))


def read_manifests(path: Path) -> list[dict[str, Any]]:
    """The documents of a multi-document YAML file, parsed by libyaml (a 1,000-node cluster file is
    ~8x faster to read than with the pure-Python parser)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open() as stream:
        return [doc for doc in yaml.load_all(stream, Loader=loader) if isinstance(doc, dict)]
