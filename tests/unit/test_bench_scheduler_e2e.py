"""The scheduler-e2e benchmark's cases: what each sets, the fleet's room, and the gangs it applies."""

from __future__ import annotations

import argparse

from bench import scheduler_e2e
from libs.cluster.generator import RACK_KEY


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    scheduler_e2e.add_arguments(parser)
    args = parser.parse_args(list(argv))
    scheduler_e2e.resolve_case(args)
    return args


def test_the_default_case_spans_several_nodes_of_one_rack_and_churns() -> None:
    args = _args()

    assert (args.gang_size, args.gpus_per_pod, args.topology_key) == (16, 2, RACK_KEY)
    assert args.run_seconds > 0
    assert args.latency_run_seconds == args.run_seconds
    # 50 racks of 20 nodes; a gang of 16 pods of 2 GPUs takes four 8-GPU nodes, five gangs a rack.
    assert scheduler_e2e.gang_room(args) == 250
    assert args.throughput_gangs == 200
    assert args.apply_gangs == 250


def test_the_single_node_case_is_the_earlier_benchmark() -> None:
    args = _args("--case", "single-node")

    assert (args.gang_size, args.gpus_per_pod, args.topology_key, args.run_seconds) == (8, 1, None, 0.0)
    assert scheduler_e2e.gang_room(args) == 1000
    assert args.apply_gangs == 0


def test_options_override_the_case() -> None:
    args = _args("--gang-size", "4", "--topology-key", "none", "--run-seconds", "0", "--apply-gangs", "5")

    assert (args.gang_size, args.gpus_per_pod, args.topology_key, args.run_seconds) == (4, 2, None, 0.0)
    assert args.apply_gangs == 5


def test_a_rack_gang_carries_its_constraint_and_run_time() -> None:
    args = _args()

    group, *pods = scheduler_e2e.gang_of(args, "g", run_seconds=2.0)

    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK_KEY}]}
    assert len(pods) == 16
    assert pods[0]["metadata"]["annotations"] == {"podway.io/run-seconds": "2"}
    assert pods[0]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2"
    workload = scheduler_e2e.workload_manifest("w", 16, RACK_KEY)
    assert (
        workload["spec"]["podGroupTemplates"][0]["schedulingConstraints"]
        == group["spec"]["schedulingConstraints"]
    )
