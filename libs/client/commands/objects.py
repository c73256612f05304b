"""kubectl-like verbs: validate, convert (offline), apply, delete, get, describe, events (over the stack)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from libs.api.lists import DEFAULT_CHUNK_SIZE
from libs.client.output import render, resolve_kind
from libs.client.quick import ReadClient, StackNotFound, nats_url_for
from libs.client.selectors import parse_selector, select
from libs.messaging.errors import RpcError

if TYPE_CHECKING:
    from libs.client.client import PodwayClient
    from libs.events.rpc import ObjectResult


class CliError(Exception):
    """A problem the user must fix; printed without a traceback."""


def read_manifests(path: Path, verb: str) -> list[dict[str, Any]]:
    """Documents of a file, of every YAML/JSON file in a directory (sorted by kind when applied), or of
    standard input (`-f -`). A file that cannot be read as manifests is refused naming it, as kubectl does;
    so is finding no object at all (`error: no objects passed to apply`)."""
    from libs.api.manifests import ManifestError, decode_manifest, load_documents

    docs: list[dict[str, Any]] = []
    for name, data in _sources(path):
        try:
            docs += load_documents(decode_manifest(data))
        except ManifestError as exc:
            raise CliError(f"error: error parsing {name}: {exc}") from exc
    if not docs:
        raise CliError(f"error: no objects passed to {verb}")
    return docs


def _sources(path: Path) -> list[tuple[str, bytes]]:
    if str(path) == "-":
        return [("STDIN", sys.stdin.buffer.read())]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    elif path.exists():
        files = [path]
    else:
        raise CliError(f'error: the path "{path}" does not exist')
    return [(str(file), file.read_bytes()) for file in files]


def nats_url_of(args: argparse.Namespace) -> str:
    try:
        return nats_url_for(getattr(args, "nats_url", None), getattr(args, "data_dir", None))
    except StackNotFound as exc:
        raise CliError(str(exc)) from exc


def reader(args: argparse.Namespace) -> ReadClient:
    """The blocking read client the read verbs use (`with reader(args) as client:`)."""
    return ReadClient(nats_url_of(args))


def with_client(args: argparse.Namespace, work: Callable[[PodwayClient], Coroutine[Any, Any, int]]) -> int:
    import asyncio

    from libs.client.client import PodwayClient

    async def run() -> int:
        async with PodwayClient(nats_url_of(args)) as client:
            return await work(client)

    return asyncio.run(run())


def describe_result(result: ObjectResult) -> str:
    """One object's answer as kubectl prints it: `pod/x created`, `pod/x configured`, or the refusal."""
    kind = (result.kind or "object").lower()
    if result.outcome == "rejected":
        return result.message
    outcome = "configured" if result.outcome == "updated" else result.outcome
    return f"{kind}/{result.name} {outcome}" + (f" ({result.message})" if result.message else "")


def cmd_validate(args: argparse.Namespace) -> int:
    from libs.api.manifests import validate_document

    docs = read_manifests(Path(args.filename), "validate")
    failed = 0
    for doc in docs:
        result = validate_document(doc, field_validation=args.validate)
        for warning in result.warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        if result.ok:
            if args.output != "json":
                print(f"{result.kind.lower()}/{result.name} valid")
            continue
        failed += 1
        print(json.dumps(result.status(), indent=2) if args.output == "json" else result.message)
    return 1 if failed else 0


def cmd_convert(args: argparse.Namespace) -> int:
    import yaml

    from libs.api.conversion import SERVED_VERSIONS, documents_as

    target = args.to if "/" in args.to else f"scheduling.k8s.io/{args.to}"
    if target not in SERVED_VERSIONS:
        versions = ", ".join(v.split("/")[1] for v in SERVED_VERSIONS)
        raise CliError(f"error: --to {args.to}: not a scheduling.k8s.io version Podway serves ({versions})")
    shown, warnings = documents_as(read_manifests(Path(args.filename), "convert"), target)
    for warning in warnings:
        print(f"Warning: {warning}", file=sys.stderr)
    print(yaml.safe_dump_all(shown, sort_keys=False), end="")
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from libs.api.kinds import kind_rank

    docs = sorted(read_manifests(Path(args.filename), "apply"), key=lambda d: kind_rank(str(d.get("kind"))))

    async def work(client: PodwayClient) -> int:
        reply = await client.apply(
            docs, namespace=args.namespace, dry_run=args.dry_run, field_validation=args.validate
        )
        for warning in reply.warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        for result in reply.results:
            for warning in result.warnings:
                print(f"Warning: {warning}", file=sys.stderr)
            stream = sys.stderr if result.outcome == "rejected" else sys.stdout
            print(describe_result(result), file=stream)
        return 1 if any(r.outcome == "rejected" for r in reply.results) else 0

    return with_client(args, work)


def cmd_delete(args: argparse.Namespace) -> int:
    from libs.client.commands.stack import parse_age
    from libs.client.deletion import Target, delete_all

    if args.filename:
        targets = [
            Target(
                str(d.get("kind")),
                str((d.get("metadata") or {}).get("name")),
                (d.get("metadata") or {}).get("namespace") or args.namespace,
            )
            for d in reversed(read_manifests(Path(args.filename), "delete"))
        ]
    elif args.kind and args.name:
        targets = [Target(resolve_kind(args.kind), args.name, args.namespace)]
    else:
        raise CliError("error: give -f FILE or KIND NAME")
    try:
        timeout_s = parse_age(args.timeout).total_seconds()
    except ValueError as exc:
        raise CliError(f"error: invalid --timeout {args.timeout!r}: use e.g. 90s or 5m") from exc

    async def work(client: PodwayClient) -> int:
        return await delete_all(
            client,
            targets,
            wait=args.wait,
            timeout_s=timeout_s,
            grace_seconds=None if args.grace_period < 0 else args.grace_period,
            out=print,
            err=lambda line: print(line, file=sys.stderr),
        )

    return with_client(args, work)


def field_validation(text: str) -> str:
    """`--validate=strict|warn|ignore` (or kubectl's true/false) as the API server's fieldValidation."""
    spelled = {"strict": "Strict", "true": "Strict", "warn": "Warn", "ignore": "Ignore", "false": "Ignore"}
    value = spelled.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(
            f'invalid - validate option "{text}"; must be one of: strict (or true), warn, ignore (or false)'
        )
    return value


def add_validate_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--validate",
        type=field_validation,
        default="Strict",
        help="unknown fields: strict refuses the object (default), warn takes it with a warning, "
        "ignore takes it silently (true/false as kubectl: strict/ignore)",
    )


def _flag(text: str) -> bool:
    """`--wait=true|false`, as kubectl spells boolean flags."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value: {text!r}")


def cmd_get(args: argparse.Namespace) -> int:
    kind = resolve_kind(args.kind)
    selector = parse_selector(args.selector) if args.selector else None
    with reader(args) as client:

        def read() -> list[dict[str, Any]]:
            items = client.get(
                kind,
                args.name,
                args.namespace,
                all_namespaces=args.all_namespaces,
                chunk_size=args.chunk_size,
            )
            return select(items, selector) if selector else items

        items = read()
        if args.name and not items:
            raise CliError(f'Error from server (NotFound): {args.kind} "{args.name}" not found')
        if not args.watch:
            print(render(kind, items, args.output, all_namespaces=args.all_namespaces))
            return 0
        watch(client, kind, items, read, args)
    return 0


def watch(
    client: ReadClient,
    kind: str,
    items: list[dict[str, Any]],
    read: Callable[[], list[dict[str, Any]]],
    args: argparse.Namespace,
) -> None:
    """`get -w`: the list, then each object again whenever it changed (as kubectl, one row per change; in
    JSON or YAML one document per change), until interrupted."""
    from libs.client.output import WatchPrinter

    printer = WatchPrinter(kind, args.output, all_namespaces=args.all_namespaces)
    printer.first(items)
    for _ in client.changes():
        printer.changed(read())


def cmd_describe(args: argparse.Namespace) -> int:
    from libs.client.describe import describe, node_device_lines

    kind = resolve_kind(args.kind)
    with reader(args) as client:
        items = client.get(kind, args.name, args.namespace)
        if not items:
            raise CliError(f'Error from server (NotFound): {args.kind} "{args.name}" not found')
        events, _ = client.events(correlation_id=items[0]["metadata"]["uid"])
        extra = None
        if kind == "Node":
            slices = client.get("ResourceSlice")
            claims = client.get("ResourceClaim", all_namespaces=True)
            extra = node_device_lines(items[0], slices, claims)
        page = describe(items[0], events, extra)
        if kind == "Node":
            page = _with_allocation(page, client, items[0])
        print(page)
    return 0


def _with_allocation(page: str, client: ReadClient, node: dict[str, Any]) -> str:
    """A node's page with what is allocated on it and its pods, before its events."""
    from libs.client.usage import fleet_usage, node_allocation

    slices = [
        s
        for s in client.get("ResourceSlice")
        if (s.get("spec") or {}).get("nodeName") == node["metadata"]["name"]
    ]
    pods = client.get("Pod", all_namespaces=True)
    (usage,) = fleet_usage([node], slices, pods, client.get("ResourceClaim", all_namespaces=True)).nodes
    head, sep, tail = page.partition("\nEvents:")
    return "\n".join([head, *node_allocation(node, usage)]) + sep + tail


def cmd_events(args: argparse.Namespace) -> int:
    from libs.client.describe import event_line

    correlation = args.correlation or args.request

    def show(event: dict[str, Any]) -> None:
        print(json.dumps(event) if args.output == "json" else event_line(event), flush=args.follow)

    with reader(args) as client:
        if args.follow:
            for event in client.follow(correlation_id=correlation, podgroup=args.podgroup):
                show(event)
            return 0
        events, _ = client.events(correlation_id=correlation, podgroup=args.podgroup)
        if args.output == "json":
            print(json.dumps(events, indent=2))
        else:
            for event in events:
                show(event)
    return 0


def guard(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (CliError, ValueError, RpcError) as exc:
            print(exc, file=sys.stderr)
            return 1

    return run


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    validate = sub.add_parser("validate", help="validate manifests offline (exit 1 when invalid)")
    validate.add_argument("-f", "--filename", required=True)
    validate.add_argument("-o", "--output", choices=["text", "json"], default="text")
    add_validate_flag(validate)
    validate.set_defaults(handler=guard(cmd_validate))

    convert = sub.add_parser(
        "convert", help="print manifests with their Workloads and PodGroups in another scheduling version"
    )
    convert.add_argument("-f", "--filename", required=True)
    convert.add_argument(
        "--to",
        default="v1alpha2",
        help="v1beta1 or v1alpha3 (Kubernetes v1.37), v1alpha2 (v1.36, the default) or v1alpha1 (v1.35, "
        "Workloads only)",
    )
    convert.set_defaults(handler=guard(cmd_convert))

    apply = sub.add_parser("apply", help="apply manifests from a file or a directory")
    common(apply)
    apply.add_argument("-f", "--filename", required=True)
    apply.add_argument("-n", "--namespace", default=None)
    apply.add_argument("--dry-run", action="store_true")
    add_validate_flag(apply)
    apply.set_defaults(handler=guard(cmd_apply))

    delete = sub.add_parser("delete", help="delete objects: -f FILE or KIND NAME")
    common(delete)
    delete.add_argument("kind", nargs="?")
    delete.add_argument("name", nargs="?")
    delete.add_argument("-f", "--filename", default=None)
    delete.add_argument("-n", "--namespace", default=None)
    delete.add_argument(
        "--wait",
        type=_flag,
        nargs="?",
        const=True,
        default=True,
        help="wait until the objects are gone (default true; --wait=false returns at once)",
    )
    delete.add_argument(
        "--timeout", default="60s", help="how long --wait waits, e.g. 90s, 5m (0s: look once)"
    )
    delete.add_argument(
        "--grace-period",
        type=int,
        default=-1,
        help="seconds a running pod has to stop before it is killed (default -1: its own "
        "terminationGracePeriodSeconds; 0: at once), as kubectl's",
    )
    delete.set_defaults(handler=guard(cmd_delete))

    get = sub.add_parser("get", help="list objects of a kind (-w watches, -l selects by label)")
    common(get)
    get.add_argument("kind")
    get.add_argument("name", nargs="?")
    get.add_argument("-n", "--namespace", default=None)
    get.add_argument("-A", "--all-namespaces", action="store_true")
    get.add_argument("-o", "--output", choices=["table", "wide", "yaml", "json"], default="table")
    get.add_argument(
        "-l", "--selector", default=None, help="label selector, e.g. app=x,tier!=gpu,env in (a,b)"
    )
    get.add_argument("-w", "--watch", action="store_true", help="after listing, print each change")
    get.add_argument(
        "--chunk-size",
        type=_non_negative,
        default=DEFAULT_CHUNK_SIZE,
        help=f"read a list in pages of this many items (default {DEFAULT_CHUNK_SIZE}; 0: in one answer)",
    )
    get.set_defaults(handler=guard(cmd_get), reads_only=True)

    desc = sub.add_parser("describe", help="show one object with its conditions and story")
    common(desc)
    desc.add_argument("kind")
    desc.add_argument("name")
    desc.add_argument("-n", "--namespace", default=None)
    desc.set_defaults(handler=guard(cmd_describe), reads_only=True)

    events = sub.add_parser("events", help="print a story from the audit log (--follow keeps printing)")
    common(events)
    group = events.add_mutually_exclusive_group()
    group.add_argument("--podgroup", default=None, help="NAMESPACE/NAME")
    group.add_argument("--request", default=None, help="request id")
    group.add_argument("--correlation", default=None, help="correlation id")
    events.add_argument("-o", "--output", choices=["table", "json"], default="table")
    events.add_argument(
        "-f", "--follow", action="store_true", help="keep printing events as they are committed"
    )
    events.set_defaults(handler=guard(cmd_events), reads_only=True)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value
