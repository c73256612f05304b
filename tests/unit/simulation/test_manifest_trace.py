"""Podway manifests as a trace: admitted offline as `podway apply` stores them, replayed on the virtual clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from libs.client.cli import main
from libs.cluster.generator import ClusterShape, generate_cluster
from libs.core.simulation.replay import replay_arrivals
from libs.experiments.manifests import load_manifest_trace
from libs.experiments.traces import TraceError
from tests.integration.scheduler.manifests import gang, pod

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
RACK = "topology.example.com/rack"


def write(tmp_path: Path, docs: list[dict]) -> Path:
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def cluster_docs() -> list[dict]:
    """Two racks of two nodes of 8 GPUs, and the GPU DeviceClass."""
    shape = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2, rack_fabric=False)
    gpu_class = next(doc for doc in yaml.safe_load_all((EXAMPLES / "02-dra.yaml").read_text()))
    return [gpu_class, *generate_cluster(shape)]


def test_manifests_are_admitted_and_their_pods_run_their_run_seconds(tmp_path: Path):
    docs = [
        *cluster_docs(),
        *gang("first", 2, gpus=8, topology_key=RACK, run_seconds=30),
        *gang("second", 2, gpus=8, topology_key=RACK, run_seconds=60),
        *gang("too-wide", 3, gpus=8, topology_key=RACK, run_seconds=30),
        pod("solo", gpus=2, run_seconds=10),
    ]
    cluster, arrivals = load_manifest_trace(str(write(tmp_path, docs)))
    assert sum(obj.kind == "Node" for obj in cluster) == 4
    result = replay_arrivals(cluster, arrivals)
    assert result.never_placed == 3
    racks = {result.bound[f"first-{i}"].rsplit("-", 1)[0] for i in range(2)}
    assert len(racks) == 1  # the gang's rack constraint held
    # The lone pod (queued before "second" by name) takes 2 GPUs of the other rack: the second gang waits
    # the 10 s until it finishes.
    assert sorted(result.delays) == [0.0] * 3 + [10.0, 10.0]
    assert result.allocation[-1][1] == 0  # every placed pod ran its time and finished


def test_a_refused_manifest_stops_the_replay_with_the_api_servers_words(tmp_path: Path):
    bad = pod("bad", gpus=1)
    bad["metadata"]["name"] = "Bad_Name"
    with pytest.raises(TraceError, match="Bad_Name"):
        load_manifest_trace(str(write(tmp_path, [*cluster_docs(), bad])))


def test_podway_simulate_replays_a_manifest_file(tmp_path: Path):
    trace = write(tmp_path, [*cluster_docs(), *gang("g", 2, gpus=8, topology_key=RACK, run_seconds=5)])
    out = tmp_path / "out"
    assert main(["simulate", "--trace", str(trace), "--protocol", "replay", "--out-dir", str(out), "-q"]) == 0
    figures = json.loads((out / "metrics.json").read_text())["policies"]["podway"]
    assert figures["pods"] == 2
    assert figures["pods_never_placed"] == 0
    assert main(["simulate", "--trace", str(trace), "--protocol", "inflation", "--out-dir", str(out)]) == 2


def test_a_composite_replays_as_one_gang_in_one_block(tmp_path: Path):
    shape = ClusterShape(blocks=2, racks_per_block=2, nodes_per_rack=2, rack_fabric=False)
    gpu_class = next(doc for doc in yaml.safe_load_all((EXAMPLES / "02-dra.yaml").read_text()))
    classes = list(yaml.safe_load_all((EXAMPLES / "01-priorityclasses.yaml").read_text()))
    composite = list(yaml.safe_load_all((EXAMPLES / "09-composite-job.yaml").read_text()))
    cluster, arrivals = load_manifest_trace(
        str(write(tmp_path, [*classes, gpu_class, *generate_cluster(shape), *composite]))
    )

    assert "CompositePodGroup" in {obj.kind for obj in arrivals[0].objects}
    result = replay_arrivals(cluster, arrivals)

    assert result.never_placed == 0
    nodes = {node.name: node for node in cluster if node.kind == "Node"}
    blocks = {nodes[name].labels["topology.example.com/block"] for name in result.bound.values()}
    assert len(blocks) == 1
