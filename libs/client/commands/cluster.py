"""`podway cluster`: a synthetic GPU fleet as Node and ResourceSlice manifests (`generate`), and a node's host
taken away and brought back on a running stack (`node-down`, `node-up`)."""

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


def cmd_node_power(args: argparse.Namespace) -> int:
    import sys

    from libs.client.commands.objects import with_client
    from libs.messaging.errors import RpcError, RpcUnavailable

    on = args.cluster_command == "node-up"

    async def work(client: Any) -> int:
        try:
            reply = await client.node_power(args.node, on=on)
        except RpcUnavailable:
            print(
                f'Error from server (NotFound): nodes "{args.node}" not found: no node agent serves it',
                file=sys.stderr,
            )
            return 1
        if on:
            print(f"node/{reply.node} up ({reply.agent}): {reply.pods_failed} pod(s) failed with its restart")
        else:
            print(f"node/{reply.node} down ({reply.agent}): {reply.pods_stopped} pod(s) died with it")
        return 0

    try:
        return with_client(args, work)
    except RpcError as exc:
        print(exc, file=sys.stderr)
        return 1


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
    for verb, what in (
        ("node-down", "take a node's host away: its agent stops beating for it and its pods die unreported"),
        ("node-up", "bring a node's host back: it beats again; pods that died with it are reported failed"),
    ):
        power = verbs.add_parser(verb, help=what)
        common(power)
        power.add_argument("node", help="the Node's name")
        power.set_defaults(handler=cmd_node_power)
