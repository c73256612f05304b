"""`podway cluster generate`: a synthetic GPU fleet as Node and ResourceSlice manifests."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import yaml

from libs.cluster.generator import ClusterShape, generate_cluster


def cmd_generate(args: argparse.Namespace) -> int:
    shape = ClusterShape(
        zones=args.zones,
        blocks=args.blocks,
        racks_per_block=args.racks_per_block,
        nodes_per_rack=args.nodes_per_rack,
        gpus_per_node=args.gpus_per_node,
        cpu=args.cpu,
        memory_gi=args.memory_gi,
        gpu_model=args.gpu_model,
        rack_fabric=not args.no_fabric,
        shared_gpus_per_node=args.shared_gpus_per_node,
    )
    header = (
        f"# podway cluster generate --zones {shape.zones} --blocks {shape.blocks} "
        f"--racks-per-block {shape.racks_per_block} --nodes-per-rack {shape.nodes_per_rack} "
        f"--gpus-per-node {shape.gpus_per_node}: {shape.node_count} nodes\n"
    )
    print(header + yaml.safe_dump_all(generate_cluster(shape), sort_keys=False), end="")
    return 0


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    cluster = sub.add_parser("cluster", help="synthetic clusters")
    verbs = cluster.add_subparsers(dest="cluster_command", required=True)
    gen = verbs.add_parser("generate", help="print Node and ResourceSlice manifests for a topology")
    gen.add_argument("--zones", type=int, default=1)
    gen.add_argument("--blocks", type=int, default=2, help="blocks per zone")
    gen.add_argument("--racks-per-block", type=int, default=4)
    gen.add_argument("--nodes-per-rack", type=int, default=8)
    gen.add_argument("--gpus-per-node", type=int, default=8)
    gen.add_argument("--cpu", type=int, default=64)
    gen.add_argument("--memory-gi", type=int, default=512)
    gen.add_argument("--gpu-model", default="H200")
    gen.add_argument("--no-fabric", action="store_true", help="no rack fabric devices")
    gen.add_argument(
        "--shared-gpus-per-node", type=int, default=0, help="last GPUs of each node shareable by capacity"
    )
    gen.set_defaults(handler=cmd_generate)
