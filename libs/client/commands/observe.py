"""`podway top nodes`: what the fleet's GPUs are doing, by node and by rack."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from libs.messaging.errors import RpcError


def cmd_top_nodes(args: argparse.Namespace) -> int:
    from libs.client.commands.objects import CliError, reader
    from libs.client.usage import fleet_usage, render_usage

    try:
        with reader(args) as client:
            nodes = client.get("Node")
            slices = client.get("ResourceSlice")
            pods = client.get("Pod", all_namespaces=True)
            claims = client.get("ResourceClaim", all_namespaces=True)
    except (CliError, RpcError) as exc:
        print(exc, file=sys.stderr)
        return 1
    usage = fleet_usage(nodes, slices, pods, claims)
    if args.output == "json":
        print(json.dumps(usage.as_json(), indent=2))
    else:
        print(render_usage(usage, by=args.by))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write the report of the run whose database is given, running or not (default: the data dir's)."""
    import asyncio
    import os
    from pathlib import Path

    from libs.client.report import write_report
    from libs.runtime.stack_info import StackInfo

    data_dir = args.data_dir or Path(os.environ.get("PODWAY_DATA_DIR") or ".podway")
    url = args.database_url or os.environ.get("PODWAY_DATABASE_URL")
    if not url:
        info = StackInfo.read(data_dir / "run")
        url = info.database_url if info else f"sqlite+aiosqlite:///{(data_dir / 'podway.db').resolve()}"
        if info is None and not (data_dir / "podway.db").exists():
            print(f"no run in {data_dir}: pass --data-dir or --database-url", file=sys.stderr)
            return 1
    report = asyncio.run(write_report(url, Path(args.out)))
    print(
        f"wrote {args.out}: {report.events} events, {len(report.groups)} PodGroups, "
        f"{sum(len(v) for v in report.traffic.values())} routed answers"
    )
    return 0


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    top = sub.add_parser("top", help="GPU use by node and rack")
    verbs = top.add_subparsers(dest="top_command", required=True, metavar="VERB")
    nodes = verbs.add_parser("nodes", help="GPUs allocated and free on each node, and per rack")
    common(nodes)
    nodes.add_argument("--by", choices=["node", "rack", "both"], default="both")
    nodes.add_argument("-o", "--output", choices=["table", "json"], default="table")
    nodes.set_defaults(handler=cmd_top_nodes, reads_only=True)

    report = sub.add_parser("report", help="write a self-contained HTML report of a run (from its events)")
    common(report)
    report.add_argument("--out", default="report.html", help="file to write (default report.html)")
    report.set_defaults(handler=cmd_report)
