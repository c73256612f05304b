"""Importers for the Alibaba openb traces (cluster-trace-gpu-v2023) and any CSV in their format, read in
place.

Nodes come from a node list (`sn,cpu_milli,memory_mib,gpu,model`), pods from a pod list
(`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,deletion_time,
scheduled_time]`). Every row is a pod whatever its phase; `gpu_spec` (models joined by `|`) constrains the
GPU model where a file has it. The two node lists number their nodes independently, so a trace names the
one it goes with and nothing joins them.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from libs.core.placement import NodeSpec, PodDemand

OPENB = "alibaba-openb-2023"
ALL_NODES = "openb_node_list_all_node.csv"
NAMED_TRACES = {
    "openb-default": ("openb_pod_list_default.csv", ALL_NODES),
    "openb-multigpu50": ("openb_pod_list_multigpu50.csv", ALL_NODES),
}


class TraceError(ValueError):
    """A trace that cannot be read, with the file and row that says why."""


@dataclass(frozen=True, slots=True)
class TracePod:
    """A pod of the trace: its demand, and its times (seconds from the trace's start) where it has them."""

    demand: PodDemand
    phase: str = ""
    qos: str = ""
    creation_time: float | None = None
    deletion_time: float | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    nodes: tuple[NodeSpec, ...]
    pods: tuple[TracePod, ...]

    @property
    def workload(self) -> list[PodDemand]:
        return [pod.demand for pod in self.pods]

    @property
    def timed(self) -> bool:
        return all(pod.creation_time is not None for pod in self.pods)


def traces_dir() -> Path:
    """`PODWAY_TRACES_DIR`, else `shared/traces` next to the repository."""
    configured = os.environ.get("PODWAY_TRACES_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / "shared" / "traces"


def load_trace(trace: str, nodes: str | Path | None = None) -> Trace:
    """A named trace (`openb-default`, `openb-multigpu50`) or the path of a pod list, with `nodes` the path
    of its node list (the openb all-node list when not given)."""
    if trace in NAMED_TRACES:
        pods_file, nodes_file = NAMED_TRACES[trace]
        base = traces_dir() / OPENB
        pods_path, nodes_path = base / pods_file, Path(nodes) if nodes else base / nodes_file
    else:
        pods_path = Path(trace)
        nodes_path = Path(nodes) if nodes else traces_dir() / OPENB / ALL_NODES
        if not pods_path.is_file():
            known = ", ".join(NAMED_TRACES)
            raise TraceError(f"{trace}: neither a named trace ({known}) nor a pod list file")
    return Trace(trace, tuple(read_nodes(nodes_path)), tuple(read_pods(pods_path)))


def read_nodes(path: Path) -> list[NodeSpec]:
    return [
        NodeSpec(
            name=row["sn"],
            cpu_milli=_int(row, "cpu_milli", path, line),
            memory_mib=_int(row, "memory_mib", path, line),
            gpus=_int(row, "gpu", path, line),
            model=(row.get("model") or "").strip(),
        )
        for line, row in _rows(path, ("sn", "cpu_milli", "memory_mib", "gpu"))
    ]


def read_pods(path: Path) -> list[TracePod]:
    pods = []
    for line, row in _rows(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")):
        gpus = _int(row, "num_gpu", path, line)
        gpu_milli = _int(row, "gpu_milli", path, line) if gpus else 0
        if (gpus and not 0 < gpu_milli <= 1000) or (gpus > 1 and gpu_milli != 1000):
            raise TraceError(
                f"{path}:{line}: gpu_milli: Invalid value: {gpu_milli}: must be 1-1000, 1000 "
                "when num_gpu is more than 1"
            )
        spec = (row.get("gpu_spec") or "").strip()
        demand = PodDemand(
            name=row["name"],
            cpu_milli=_int(row, "cpu_milli", path, line),
            memory_mib=_int(row, "memory_mib", path, line),
            gpus=gpus,
            gpu_milli=gpu_milli,
            models=frozenset(model for model in spec.split("|") if model),
        )
        pods.append(
            TracePod(
                demand,
                phase=row.get("pod_phase") or "",
                qos=row.get("qos") or "",
                creation_time=_time(row, "creation_time"),
                deletion_time=_time(row, "deletion_time"),
            )
        )
    return pods


def _rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [column for column in required if column not in (reader.fieldnames or ())]
            if missing:
                raise TraceError(f"{path}: Required value: columns {', '.join(missing)}")
            return [(line, row) for line, row in enumerate(reader, start=2)]
    except OSError as error:
        raise TraceError(f"{path}: {error.strerror or error}") from error


def _int(row: dict[str, str], column: str, path: Path, line: int) -> int:
    value = row.get(column) or "0"
    try:
        return int(float(value))
    except ValueError:
        raise TraceError(f"{path}:{line}: {column}: Invalid value: {value!r}: must be a number") from None


def _time(row: dict[str, str], column: str) -> float | None:
    value = (row.get(column) or "").strip()
    return float(value) if value else None
