"""`podway logs` and `podway agent`: a process-runtime pod's output, and a process-runtime node agent."""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from libs.messaging.errors import RpcError
from libs.runtime.pod_logs import containers, log_file, read_run

FOLLOW_POLL_S = 0.2


def cmd_logs(args: argparse.Namespace) -> int:
    """Print a pod's container output from the files its agent writes (readable on the agent's host)."""
    from libs.client.commands.objects import CliError, reader

    try:
        with reader(args) as client:
            found = client.get("Pod", args.pod, args.namespace)
    except (CliError, RpcError) as exc:
        print(exc, file=sys.stderr)
        return 1
    if not found:
        print(f'Error from server (NotFound): pods "{args.pod}" not found', file=sys.stderr)
        return 1
    runtime = (found[0].get("status") or {}).get("podwayRuntime") or {}
    if not runtime.get("logDir"):
        print(f"pod {args.pod} has no logs: it has not started on a process-runtime node", file=sys.stderr)
        return 1
    log_dir = Path(runtime["logDir"])
    names = containers(log_dir)
    container = args.container or (names[0] if len(names) == 1 else None)
    if container is None:
        print(
            f"a container name must be specified for pod {args.pod}, choose one of: {names}", file=sys.stderr
        )
        return 1
    path = log_file(log_dir, container, previous=args.previous)
    if path is None:
        which = "previous terminated" if args.previous else "any"
        print(
            f'previous terminated container "{container}" in pod "{args.pod}" not found'
            if args.previous
            else f"container {container} has no {which} log yet",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(read_run(path))
    if args.follow:
        follow(path)
    return 0


def follow(path: Path) -> None:
    """Print what is appended to `path` until interrupted (a rotation truncates it: start again at 0)."""
    offset = path.stat().st_size
    try:
        while True:
            size = path.stat().st_size
            if size < offset:
                offset = 0
            if size > offset:
                with path.open("rb") as stream:
                    stream.seek(offset)
                    sys.stdout.write(stream.read().decode(errors="replace"))
                    sys.stdout.flush()
                offset = size
            time.sleep(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        return


def cmd_agent(args: argparse.Namespace) -> int:
    """Run a node agent in this process's place (it is a service: started by its own entry point)."""
    argv = [sys.executable, "-m", "services.node_agent.main", "--runtime", args.runtime]
    for flag, value in (
        ("--node-name", args.node_name),
        ("--labels", args.labels),
        ("--devices", args.devices),
    ):
        if value is not None:
            argv += [flag, str(value)]
    for taint in args.taint or []:
        argv += ["--taint", taint]
    env = dict(os.environ)
    # An agent of its own beside the stack's: its event consumer, heartbeats and beacon are not the stack
    # agent's (instance 0), which would otherwise share its events with it.
    env.setdefault("PODWAY_INSTANCE", args.node_name or socket.gethostname().lower())
    for name, setting in (
        ("data_dir", "PODWAY_DATA_DIR"),
        ("nats_url", "PODWAY_NATS_URL"),
        ("database_url", "PODWAY_DATABASE_URL"),
    ):
        if getattr(args, name, None):
            env[setting] = str(getattr(args, name))
    if "PODWAY_NATS_URL" not in env or "PODWAY_DATABASE_URL" not in env:
        from libs.runtime.settings import PodwaySettings
        from libs.runtime.stack import running_stack

        info = running_stack(PodwaySettings(data_dir=args.data_dir or Path(".podway")))
        if info is None:
            print("podway agent: no running stack here; give --nats-url and --database-url", file=sys.stderr)
            return 1
        env.setdefault("PODWAY_NATS_URL", info.nats_url)
        env.setdefault("PODWAY_DATABASE_URL", info.database_url)
    os.execve(sys.executable, argv, env)


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    logs = sub.add_parser("logs", help="print a process-runtime pod's container output (-f follows)")
    common(logs)
    logs.add_argument("pod")
    logs.add_argument("-n", "--namespace", default="default")
    logs.add_argument("-c", "--container", default=None)
    logs.add_argument("-f", "--follow", action="store_true")
    logs.add_argument(
        "-p", "--previous", action="store_true", help="the previous run of a restarted container"
    )
    logs.set_defaults(handler=cmd_logs, reads_only=True)
    agent = sub.add_parser("agent", help="run a node agent on this host (--runtime process runs real pods)")
    common(agent)
    agent.add_argument("--runtime", choices=("simulated", "process"), default="process")
    agent.add_argument("--node-name", default=None, help="the Node's name (default: the hostname)")
    agent.add_argument(
        "--labels", type=Path, default=None, help="Node labels: YAML mapping or key=value lines"
    )
    agent.add_argument("--devices", type=Path, default=None, help="GPUs to publish when NVML finds none")
    agent.add_argument(
        "--taint",
        action="append",
        help="a Node taint, key[=value]:Effect (repeatable): only pods tolerating it land here",
    )
    agent.set_defaults(handler=cmd_agent)
