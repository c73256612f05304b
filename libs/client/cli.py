"""The `podway` command line: kubectl-like verbs over the stack, plus the stack's own lifecycle."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

Handler = Callable[[argparse.Namespace], int]

# Every verb, the module that registers it and its one-line help. A run imports only its verb's module (each
# imports what its handlers need when they run), so `podway --help` and `podway get` start at once; a unit
# test checks this table against what the modules register.
VERBS: dict[str, tuple[str, str]] = {
    "validate": ("objects", "validate manifests offline (exit 1 when invalid)"),
    "convert": (
        "objects",
        "print manifests with their Workloads and PodGroups in another scheduling version",
    ),
    "apply": ("objects", "apply manifests from a file or a directory"),
    "submit": ("submit", "publish batch/v1 Jobs as job.submitted events (--wait follows them)"),
    "delete": ("objects", "delete objects: -f FILE or KIND NAME"),
    "get": ("objects", "list objects of a kind (-w watches, -l selects by label)"),
    "describe": ("objects", "show one object with its conditions and story"),
    "events": ("objects", "print a story from the audit log (--follow keeps printing)"),
    "top": ("observe", "GPU use by node and rack"),
    "logs": ("pods", "print a process-runtime pod's container output (-f follows)"),
    "agent": ("pods", "run a node agent on this host (--runtime process runs real pods)"),
    "report": ("observe", "write a self-contained HTML report of a run (from its events)"),
    "up": ("stack", "start the stack (embedded NATS and SQLite unless URLs are given)"),
    "down": ("stack", "stop the stack started in the data dir"),
    "demo": ("stack", "run the stack and show every capability end to end, each step checked"),
    "gc": ("stack", "prune now what the retention policy lets go (audit events, outbox and inbox rows)"),
    "migrate": (
        "stack",
        "upgrade the database and provision the NATS streams (or --downgrade REV, --revision MSG)",
    ),
    "check": ("check", "check a run's invariants in its database (exit 1 on any violation)"),
    "simulate": ("simulate", "replay a trace through the scheduling core on a virtual clock"),
    "cluster": ("cluster", "synthetic clusters"),
    "infer": ("router", "ask the LLM router (over NATS)"),
    "router": ("router", "the LLM router's status, scoreboard and feedback"),
    "emulators": ("router", "the local Bedrock and Vertex AI emulators"),
}


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, default=None, help="stack data dir (default .podway)")
    parser.add_argument(
        "--nats-url",
        default=None,
        help="NATS URL, nats://USER:PASSWORD@HOST:PORT for a NATS user (or PODWAY_NATS_USER and "
        "PODWAY_NATS_PASSWORD), or a cluster's URLs comma-separated (nats://a:4222,nats://b:4222,...); "
        "default: the running stack's",
    )
    parser.add_argument("--database-url", default=None, help="database URL (default: the running stack's)")


def _verb_of(argv: list[str]) -> str | None:
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser with `verb`'s module registered (every module when `verb` is None, none for "" or an unknown
    verb); the other verbs are placeholders that carry their help, for `podway --help`."""
    parser = argparse.ArgumentParser(prog="podway", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if verb is None:
        modules = {module for module, _ in VERBS.values()}
    else:
        modules = {VERBS[verb][0]} if verb in VERBS else set()
    for module in sorted(modules):
        importlib.import_module(f"libs.client.commands.{module}").register(sub, _common)
    for name, (_, text) in VERBS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "bench":
        from libs.client.bench_cli import main as bench_main

        return bench_main(argv[1:])
    verb = _verb_of(argv)
    parser = build_parser(verb or "")
    args, extra = parser.parse_known_args(argv)
    if extra:
        if len(extra) == 1 and not extra[0].startswith("-") and getattr(args, "name", "") is None:
            args.name = extra[0]  # `get pods -n ml NAME`: the name after the flags, as kubectl takes it
        else:
            parser.parse_args(argv)  # argparse's own error and exit
    if not getattr(args, "reads_only", False):  # read verbs log nothing: they skip loading logging
        from libs.runtime.logging import configure_logging

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
