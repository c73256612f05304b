"""`podway-node-agent`: register a simulated cluster and run its pods until SIGINT/SIGTERM.

`podway-node-agent --cluster deploy/examples/cluster-small.yaml`, or a generated shape:
`podway-node-agent --zones 1 --blocks 2 --racks-per-block 4 --nodes-per-rack 8 --gpus-per-node 8`
(the same settings are read from PODWAY_CLUSTER_FILE, PODWAY_CLUSTER_ZONES, ...).
`podway-node-agent --runtime process [--node-name N] [--labels FILE] [--devices FILE] [--taint T ...]`
registers this host and runs its pods as processes (PODWAY_RUNTIME=process, PODWAY_NODE_NAME, ...).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from libs.runtime.service import run_service
from services.node_agent.app import NodeAgentService
from services.node_agent.host import parse_taint
from services.node_agent.settings import NodeAgentSettings


def parse_settings(argv: list[str] | None = None) -> NodeAgentSettings:
    parser = argparse.ArgumentParser(prog="podway-node-agent", description=__doc__)
    parser.add_argument("--cluster", type=Path, help="Node + ResourceSlice manifests (multi-document YAML)")
    for name in ("zones", "blocks", "racks-per-block", "nodes-per-rack", "gpus-per-node"):
        parser.add_argument(f"--{name}", type=int, help=f"generated cluster: {name.replace('-', ' ')}")
    parser.add_argument("--runtime", choices=("simulated", "process"), help="simulated (default) or process")
    parser.add_argument("--node-name", help="process runtime: this host's Node name (default: the hostname)")
    parser.add_argument("--labels", type=Path, help="process runtime: Node labels (YAML or key=value lines)")
    parser.add_argument("--devices", type=Path, help="process runtime: GPUs to publish when NVML finds none")
    parser.add_argument(
        "--taint",
        action="append",
        type=taint_argument,
        help="process runtime: a Node taint, key[=value]:Effect (repeatable)",
    )
    args = parser.parse_args(argv)
    overrides: dict[str, object] = {}
    for name, setting in (
        ("runtime", "runtime"),
        ("node_name", "node_name"),
        ("labels", "labels_file"),
        ("devices", "devices_file"),
        ("taint", "node_taints"),
    ):
        if getattr(args, name) is not None:
            overrides[setting] = getattr(args, name)
    if args.cluster is not None:
        overrides["cluster_file"] = args.cluster
    for name in ("zones", "blocks", "racks_per_block", "nodes_per_rack", "gpus_per_node"):
        if getattr(args, name) is not None:
            overrides[f"cluster_{name}"] = getattr(args, name)
    return NodeAgentSettings(**overrides)  # type: ignore[arg-type]


def taint_argument(text: str) -> str:
    try:
        parse_taint(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return text


def main(argv: list[str] | None = None) -> None:
    run_service("node_agent", parse_settings(argv), NodeAgentService)


if __name__ == "__main__":
    main()
