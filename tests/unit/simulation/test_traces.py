"""Reading pod and node lists in the openb format from any path."""

from __future__ import annotations

from pathlib import Path

import pytest

from libs.core.placement import PodDemand
from libs.experiments.traces import TraceError, load_trace

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4,T4\nn1,16000,65536,0,\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    "p0,4000,8192,1,500,,LS,Running,0,100,0\n"
    "p1,8000,16384,2,1000,V100M16|T4,BE,Failed,10,50,12\n"
    "p2,1000,1024,0,0,,BE,Pending,20,30,\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_pod_list_path_with_its_node_list(tmp_path: Path):
    trace = load_trace(str(write(tmp_path, "pods.csv", PODS)), write(tmp_path, "nodes.csv", NODES))
    assert [node.gpus for node in trace.nodes] == [4, 0]
    assert trace.workload == [
        PodDemand("p0", 4000, 8192, 1, 500),
        PodDemand("p1", 8000, 16384, 2, 1000, frozenset({"V100M16", "T4"})),
        PodDemand("p2", 1000, 1024),
    ]
    assert trace.timed
    assert trace.pods[1].deletion_time == 50.0
    assert trace.pods[0].qos == "LS"


def test_a_pod_list_without_times_is_not_timed(tmp_path: Path):
    pods = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n")
    assert not load_trace(str(pods), write(tmp_path, "nodes.csv", NODES)).timed


def test_errors_name_the_file_row_and_field(tmp_path: Path):
    nodes = write(tmp_path, "nodes.csv", NODES)
    bad = write(tmp_path, "bad.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,lots,1024,1,1000\n")
    with pytest.raises(TraceError, match=r"bad.csv:2: cpu_milli: Invalid value: 'lots'"):
        load_trace(str(bad), nodes)
    shared = write(tmp_path, "shared.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,2,500\n")
    with pytest.raises(TraceError, match=r"shared.csv:2: gpu_milli: Invalid value: 500"):
        load_trace(str(shared), nodes)
    missing = write(tmp_path, "missing.csv", "name,cpu_milli\np0,1\n")
    with pytest.raises(TraceError, match="Required value: columns memory_mib, num_gpu, gpu_milli"):
        load_trace(str(missing), nodes)
    with pytest.raises(TraceError, match="neither a named trace"):
        load_trace(str(tmp_path / "nowhere.csv"), nodes)
