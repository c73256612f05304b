"""`podway simulate`: replay a trace through the scheduling core on a virtual clock, offline."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _seeds(text: str) -> list[int]:
    """`42..51` or `42,43`."""
    try:
        if ".." in text:
            first, last = text.split("..", 1)
            return list(range(int(first), int(last) + 1))
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds: Invalid value: {text!r}: 42..51 or 42,43") from None


def cmd_simulate(args: argparse.Namespace) -> int:
    from libs.experiments.experiments import policies_named, summary_table, write_metrics
    from libs.experiments.manifests import is_manifest_trace
    from libs.experiments.traces import TraceError, load_trace

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    out_dir: Path = args.out_dir
    if is_manifest_trace(args.trace):
        return _replay_manifests(args, out_dir, progress)
    try:
        policies = policies_named(args.policy)
        trace = load_trace(args.trace, args.nodes)
    except (ValueError, TraceError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.tenants:
        return _replay_tenants(args, trace, out_dir, progress)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.protocol == "inflation":
        from libs.experiments.experiments import inflation_metrics
        from libs.experiments.plots import plot_allocation

        metrics, _ = inflation_metrics(trace, policies, args.seeds, ratio=args.ratio, progress=progress)
        plot = plot_allocation(metrics, out_dir / "gpu_allocation.png")
    else:
        from libs.experiments.plots import plot_delay_cdf
        from libs.experiments.replay import replay_metrics

        if not trace.timed:
            print(
                f"error: {args.trace}: replay needs creation and deletion times; this trace has none",
                file=sys.stderr,
            )
            return 2
        metrics = replay_metrics(trace, policies, args.seeds, speedup=args.speedup, progress=progress)
        plot = plot_delay_cdf(metrics, out_dir / "queueing_delay_cdf.png")
    path = write_metrics(metrics, out_dir)
    print(summary_table(metrics))
    print(f"wrote {path} and {plot}")
    return 0


def _replay_tenants(
    args: argparse.Namespace, trace: Any, out_dir: Path, progress: Callable[[str], None]
) -> int:
    """The trace's jobs split over four teams sharing the fleet by quota, beside the same jobs without."""
    from libs.experiments.experiments import write_metrics
    from libs.experiments.plots import plot_tenant_shares
    from libs.experiments.tenants import summary_lines, tenant_metrics

    if args.protocol != "replay" or not trace.timed:
        print(
            f"error: {args.trace}: --tenants replays a trace with creation and deletion times "
            "(--protocol replay)",
            file=sys.stderr,
        )
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = tenant_metrics(trace, args.seeds, speedup=args.speedup, load=args.load, progress=progress)
    plot = plot_tenant_shares(metrics, out_dir / "tenant_shares.png")
    path = write_metrics(metrics, out_dir)
    print("\n".join(summary_lines(metrics)))
    print(f"wrote {path} and {plot}")
    return 0


def _replay_manifests(args: argparse.Namespace, out_dir: Path, progress: Callable[[str], None]) -> int:
    """Podway manifests (a YAML file or directory), every workload arriving at once, through the machine."""
    from libs.experiments.experiments import summary_table, write_metrics
    from libs.experiments.manifests import load_manifest_trace
    from libs.experiments.plots import plot_delay_cdf
    from libs.experiments.replay import manifest_replay_metrics
    from libs.experiments.traces import TraceError

    if args.protocol != "replay":
        print(f"error: {args.trace}: manifests replay only (--protocol replay)", file=sys.stderr)
        return 2
    try:
        cluster, arrivals = load_manifest_trace(args.trace, args.nodes)
    except TraceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = manifest_replay_metrics(args.trace, cluster, arrivals, progress=progress)
    plot = plot_delay_cdf(metrics, out_dir / "queueing_delay_cdf.png")
    path = write_metrics(metrics, out_dir)
    print(summary_table(metrics))
    print(f"wrote {path} and {plot}")
    return 0


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    parser = sub.add_parser("simulate", help="replay a trace through the scheduling core on a virtual clock")
    parser.add_argument(
        "--trace",
        default="openb-default",
        help="openb-default, openb-multigpu50, the path of a CSV in the openb pod-list format, or Podway "
        "manifests (a YAML file or directory; replay only, pods running for their podway.io/run-seconds)",
    )
    parser.add_argument("--nodes", default=None, help="node list CSV (default: the openb all-node list)")
    parser.add_argument("--protocol", choices=["inflation", "replay"], default="inflation")
    parser.add_argument(
        "--policy",
        default="all",
        help="all, or a comma-separated list of random, first-fit, best-fit, podway, fgd, fgd-cpu-ratio",
    )
    parser.add_argument("--seeds", type=_seeds, default=list(range(42, 52)), help="42..51 (default) or 42,43")
    parser.add_argument("--ratio", type=float, default=1.3, help="inflation: GPU request over capacity")
    parser.add_argument(
        "--speedup", type=float, default=None, help="replay: virtual seconds per trace second"
    )
    parser.add_argument(
        "--tenants",
        action="store_true",
        help="replay: the jobs split over four teams (weights 1:1:2:4) sharing the fleet by quota with fair "
        "sharing, beside the same jobs without quotas; writes tenant_shares.png",
    )
    parser.add_argument(
        "--load",
        type=float,
        default=2.0,
        help="--tenants: each job replayed this many times over (copies arriving with it), so that the fleet "
        "stays saturated and fair sharing decides (default 2; 1 is the trace as it is)",
    )
    parser.add_argument("--out-dir", type=Path, default=Path("out"))
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(handler=cmd_simulate)
