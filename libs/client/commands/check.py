"""`podway check`: the invariants of a run, read from its database (the running stack's by default)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cmd_check(args: argparse.Namespace) -> int:
    from libs.client.check import run
    from libs.client.commands.stack import settings_from
    from libs.runtime.stack import running_stack

    settings = settings_from(args)
    info = running_stack(settings)
    url = settings.database_url or (info.database_url if info else settings.resolved_database_url())
    expected: frozenset[str] = frozenset()
    if args.requests:
        expected = frozenset(
            line.strip() for line in Path(args.requests).read_text().splitlines() if line.strip()
        )
    return run(url, args.output, expected)


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    check = sub.add_parser("check", help="check a run's invariants in its database (exit 1 on any violation)")
    common(check)
    check.add_argument("-o", "--output", choices=["text", "json"], default="text")
    check.add_argument(
        "--requests",
        default=None,
        help="a file of inference request ids (one per line) that must have one outcome",
    )
    check.set_defaults(handler=cmd_check)
