"""The `podway` command line: kubectl-like verbs over the stack, plus the stack's own lifecycle."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from libs.runtime.logging import configure_logging

Handler = Callable[[argparse.Namespace], int]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, default=None, help="stack data dir (default .podway)")
    parser.add_argument(
        "--nats-url",
        default=None,
        help="NATS URL, nats://USER:PASSWORD@HOST:PORT for a NATS user (or PODWAY_NATS_USER and "
        "PODWAY_NATS_PASSWORD); default: the running stack's",
    )
    parser.add_argument("--database-url", default=None, help="database URL (default: the running stack's)")


def build_parser() -> argparse.ArgumentParser:
    from libs.client import commands

    parser = argparse.ArgumentParser(prog="podway", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in commands.REGISTRARS:
        register(sub, _common)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "bench":
        from libs.client.bench_cli import main as bench_main

        return bench_main(argv[1:])
    args = build_parser().parse_args(argv)
    configure_logging("podway", getattr(args, "log_level", "WARNING"), fmt="text")
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as kubectl does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
