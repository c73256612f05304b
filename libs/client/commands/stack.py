"""`podway up`, `podway down`, `podway migrate`: the stack's lifecycle."""

from __future__ import annotations

import argparse
import functools
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from libs.runtime.listener import AddressUnavailable
from libs.runtime.settings import PodwaySettings, redact_credentials
from libs.runtime.stack import (
    DEFAULT_SERVICES,
    Stack,
    router_process_count,
    running_stack,
    stop_running_stack,
)


def settings_from(args: argparse.Namespace) -> PodwaySettings:
    overrides: dict[str, Any] = {}
    for name in (
        "data_dir",
        "nats_url",
        "database_url",
        "router_policy",
        "router_http_address",
        "router_processes",
    ):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return PodwaySettings(**overrides)


def prepare_stack(database_url: str, nats_url: str, *, replicas: int | None = None) -> None:
    """Migrate the database and provision the streams (on `replicas` servers each) before any service starts."""
    import asyncio

    from libs.db.migrate import upgrade
    from libs.messaging.broker import provision_streams

    async def run() -> None:
        await upgrade(database_url)
        await provision_streams(nats_url, replicas=replicas)

    asyncio.run(run())


def provision_streams_now(nats_url: str, *, replicas: int | None = None) -> None:
    """Create the streams that are missing (the supervisor's periodic check)."""
    import asyncio

    from libs.messaging.broker import provision_streams

    asyncio.run(provision_streams(nats_url, replicas=replicas))


def cmd_up(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if running_stack(settings):
        print(f"a stack is already running in {settings.data_dir}", file=sys.stderr)
        return 1
    if settings.database_url is not None:
        from libs.db.engine import parse_database_url

        try:
            parse_database_url(settings.database_url)
        except ValueError as error:
            print(f"podway up: {error}", file=sys.stderr)
            return 2
    try:
        api_env = api_server_env(args.api_tokens)
    except ValueError as error:
        print(f"podway up: --api-tokens: {error}", file=sys.stderr)
        return 2
    if args.detach:
        return _up_detached(args, settings)
    services = tuple(args.services.split(",")) if args.services else (*DEFAULT_SERVICES, "llm_router")
    extra = []
    if "llm_router" in services and settings.router_policy is None:
        # No policy given: the router serves the deployed policy on the local Bedrock and Vertex emulators.
        from libs.demo.router import prepare_router_demo

        plan = prepare_router_demo(settings.data_dir.resolve())
        settings = settings.model_copy(update={"router_policy": plan.policy_path})
        extra.append(plan.emulators_spec)
    stack = Stack(
        settings,
        services=services,
        prepare=functools.partial(prepare_stack, replicas=args.replicas),
        provision=functools.partial(provision_streams_now, replicas=args.replicas),
        extra_specs=extra,
        service_env={"node_agent": {"PODWAY_RUNTIME": args.agents}, "api_server": api_env},
    )
    stopping = {"now": False}

    def request_stop(*_: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        info = stack.start()
    except AddressUnavailable as exc:
        print(f"podway up: {exc}", file=sys.stderr)
        return 1
    if not stack.wait_ready():
        print(f"services did not become healthy; see {settings.data_dir / 'logs'}", file=sys.stderr)
    print(
        redact_credentials(
            f"podway up: nats {info.nats_url}, database {info.database_url}, services {list(info.services)}"
        )
    )
    if info.router_url:
        print(
            f"router: OpenAI-compatible front at {info.router_url}/v1 ({router_process_count(settings)} processes)"
        )
    print(metrics_line(settings), flush=True)
    if "api_server" in services:
        print(kubernetes_api_line(settings), flush=True)
    try:
        stack.supervise(lambda: stopping["now"])
    finally:
        stack.stop()
        print("podway stopped")
    return 0


def api_server_env(tokens: Path | None) -> dict[str, str]:
    """The API server's environment for `--api-tokens FILE`: the file, checked first (ValueError saying why
    it cannot be used)."""
    if tokens is None:
        return {}
    from libs.kubeapi.security import Tokens

    try:
        loaded = Tokens.load(tokens)
    except OSError as error:
        raise ValueError(f"{tokens}: {error.strerror or error}") from None
    except ValueError as error:
        raise ValueError(f"{tokens}: {error}") from None
    if not loaded:
        raise ValueError(f'{tokens}: no token in it (rows token,user,uid,"groups")')
    return {"PODWAY_API_TOKENS_FILE": str(tokens.resolve())}


def metrics_line(settings: PodwaySettings) -> str:
    """Where each service serves its Prometheus metrics, as its health beat reports it."""
    import json

    from libs.runtime.health import health_file

    ports = []
    for name in (*DEFAULT_SERVICES, "llm_router"):
        try:
            port = json.loads(health_file(settings.run_dir, name).read_text()).get("metrics_port")
        except (OSError, ValueError):
            continue
        if port:
            ports.append(f"{name} http://127.0.0.1:{port}/metrics")
    return "metrics: " + (", ".join(ports) or "none reported yet")


def kubernetes_api_line(settings: PodwaySettings) -> str:
    """Where the Kubernetes API listens and the kubeconfig that reaches it."""
    import json

    from libs.runtime.health import health_file

    try:
        url = json.loads(health_file(settings.run_dir, "api_server").read_text()).get("url")
    except (OSError, ValueError):
        url = None
    kubeconfig = (settings.data_dir / "kubeconfig").resolve()
    return f"kubernetes API: {url or 'not up yet'}; kubectl --kubeconfig {kubeconfig} get podgroups -A"


def _up_detached(args: argparse.Namespace, settings: PodwaySettings) -> int:
    """Start `podway up` in its own session and wait until it has written its stack file."""
    argv = [sys.executable, "-m", "libs.client.cli", "up", "--data-dir", str(settings.data_dir)]
    for flag, value in (("--nats-url", args.nats_url), ("--database-url", args.database_url)):
        if value:
            argv += [flag, value]
    if args.services:
        argv += ["--services", args.services]
    argv += ["--agents", args.agents]
    if args.router_policy:
        argv += ["--router-policy", str(args.router_policy)]
    if args.router_http_address:
        argv += ["--router-address", args.router_http_address]
    if args.router_processes is not None:
        argv += ["--router-processes", str(args.router_processes)]
    if args.replicas is not None:
        argv += ["--replicas", str(args.replicas)]
    if args.api_tokens is not None:
        argv += ["--api-tokens", str(args.api_tokens.resolve())]
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with (settings.data_dir / "podway-up.log").open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return 0 if wait_for_stack(settings, proc.poll) else 1


def wait_for_stack(
    settings: PodwaySettings, exited: Callable[[], int | None], timeout_s: float = 180.0
) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = running_stack(settings)
        if info is not None and info.ready:
            print(
                redact_credentials(
                    f"podway up: nats {info.nats_url}, database {info.database_url}, pid {info.pid}"
                )
            )
            if info.router_url:
                print(f"router: OpenAI-compatible front at {info.router_url}/v1")
            if "api_server" in info.services:
                print(kubernetes_api_line(settings))
            return True
        if exited() is not None:
            log = settings.data_dir / "podway-up.log"
            said = [
                line for line in log.read_text(errors="replace").splitlines() if line.startswith("podway up:")
            ]
            print(said[-1] if said else f"podway up failed; see {log}", file=sys.stderr)
            return False
        time.sleep(0.1)
    print(
        f"podway up: the stack was not ready within {timeout_s:g}s; see {settings.data_dir / 'logs'}",
        file=sys.stderr,
    )
    return False


def cmd_down(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if stop_running_stack(settings):
        print("podway down: stopped")
        return 0
    print(f"no running stack in {settings.data_dir}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Upgrade (or downgrade) the database; with a NATS URL, also create or update the JetStream streams, which
    no service may do in a deployment."""
    import asyncio

    from libs.db import migrate
    from libs.messaging.broker import provision_streams

    settings = settings_from(args)
    if args.revision:
        print(f"created {migrate.revision(args.revision)}")
        return 0
    url = settings.resolved_database_url()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if args.downgrade:
        asyncio.run(migrate.downgrade(url, args.downgrade))
    else:
        asyncio.run(migrate.upgrade(url))
    print(f"database at revision {asyncio.run(migrate.current(url))}")
    if settings.nats_url and not args.downgrade:
        asyncio.run(provision_streams(settings.nats_url, replicas=args.replicas))
        copies = f" with {args.replicas} replicas" if args.replicas else ""
        print(redact_credentials(f"streams provisioned on {settings.nats_url}{copies}"))
    return 0


def parse_age(text: str) -> timedelta:
    """`30d`, `12h`, `45m`, `90s` -> a timedelta; anything else is a ValueError naming the format."""
    units = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit():
        raise ValueError(f"invalid age {text!r}: use a number and one of d, h, m, s (e.g. 30d)")
    return timedelta(**{units[text[-1]]: int(text[:-1])})


def cmd_gc(args: argparse.Namespace) -> int:
    """Prune now what the retention policy (`PODWAY_RETENTION_*`) lets go, as admission does on its schedule;
    `--older-than AGE` keeps less (or more) of each: audit events, published outbox rows and inbox marks
    older than AGE, the plumbing never less than the bus needs."""
    import asyncio
    from datetime import UTC, datetime

    from libs.core.retention import RetentionPolicy
    from libs.db.engine import create_engine, create_session_factory
    from libs.db.retention import prune
    from libs.db.uow import unit_of_work_factory
    from libs.leasing.retention import policy_from

    settings = settings_from(args)
    policy = policy_from(settings)
    if args.older_than is not None:
        try:
            age = parse_age(args.older_than)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        policy = RetentionPolicy(events=age, outbox=max(age, policy.outbox), inbox=max(age, policy.inbox))
    horizons = policy.horizons(datetime.now(UTC))
    info = running_stack(settings)
    url = settings.database_url or (info.database_url if info else settings.resolved_database_url())

    async def run() -> None:
        engine = create_engine(url)
        try:
            async with unit_of_work_factory(create_session_factory(engine))() as uow:
                report = await prune(uow, horizons)
        finally:
            await engine.dispose()
        print(
            f"deleted {report.events} events older than {horizons.events.isoformat(timespec='seconds')}, "
            f"{report.outbox} outbox rows published before {horizons.outbox.isoformat(timespec='seconds')}, "
            f"{report.inbox} inbox marks older than {horizons.inbox.isoformat(timespec='seconds')}"
        )

    asyncio.run(run())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from libs.demo.run import main as demo_main

    return demo_main(args.data_dir, args.report)


def replicas(text: str) -> int:
    """`--replicas`: JetStream keeps a stream on 1 to 5 servers."""
    if not text.isdigit() or not 1 <= int(text) <= 5:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: must be between 1 and 5")
    return int(text)


def replicas_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replicas",
        type=replicas,
        default=None,
        help="JetStream servers that hold each stream and bucket: 3 on a 3-node NATS cluster (default "
        "PODWAY_STREAM_REPLICAS; unset: 1 for a new stream, an existing one keeps its count)",
    )


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    up = sub.add_parser("up", help="start the stack (embedded NATS and SQLite unless URLs are given)")
    common(up)
    up.add_argument("--detach", action="store_true", help="run in the background")
    up.add_argument("--services", default=None, help="comma-separated services to run")
    up.add_argument(
        "--agents",
        choices=("simulated", "process"),
        default="simulated",
        help="the node agent's runtime: a simulated 64-node cluster (default), or this host running pods as "
        "processes",
    )
    up.add_argument(
        "--router-policy", type=Path, default=None, help="router policy (default: local emulators)"
    )
    up.add_argument(
        "--router-address",
        dest="router_http_address",
        default=None,
        help="HOST:PORT of the router's OpenAI-compatible front (default 127.0.0.1:8400, "
        "or PODWAY_ROUTER_HTTP_ADDRESS)",
    )
    up.add_argument(
        "--router-processes",
        type=int,
        default=None,
        help="router processes sharing that address (default one per CPU, or PODWAY_ROUTER_PROCESSES)",
    )
    up.add_argument(
        "--api-tokens",
        type=Path,
        default=None,
        help='bearer tokens of the Kubernetes API, kube-apiserver\'s token file (token,user,uid,"groups"; '
        "groups system:masters or podway:read-write may write, podway:read-only may read); the kubeconfig "
        "names the first user who may write (default: an admin and a viewer token in DATA_DIR/pki/tokens.csv)",
    )
    replicas_flag(up)
    up.set_defaults(handler=cmd_up)
    down = sub.add_parser("down", help="stop the stack started in the data dir")
    common(down)
    down.set_defaults(handler=cmd_down)
    demo = sub.add_parser(
        "demo", help="run the stack and show every capability end to end, each step checked"
    )
    demo.add_argument("--data-dir", type=Path, default=None, help="keep the demo's data here (default: temp)")
    demo.add_argument(
        "--report", type=Path, default=None, help="write the run's HTML report (podway report) here"
    )
    demo.set_defaults(handler=cmd_demo)
    gc = sub.add_parser(
        "gc", help="prune now what the retention policy lets go (audit events, outbox and inbox rows)"
    )
    common(gc)
    gc.add_argument(
        "--older-than",
        default=None,
        help="e.g. 30d, 12h: keep this much of each instead (default: PODWAY_RETENTION_*, 30d of events)",
    )
    gc.set_defaults(handler=cmd_gc)
    mig = sub.add_parser(
        "migrate",
        help="upgrade the database and provision the NATS streams (or --downgrade REV, --revision MSG)",
    )
    common(mig)
    mig.add_argument("--downgrade", default=None)
    mig.add_argument("--revision", default=None)
    replicas_flag(mig)
    mig.set_defaults(handler=cmd_migrate)
