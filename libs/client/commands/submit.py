"""`podway submit -f FILE|DIR [--wait]`: batch/v1 Jobs published as `job.submitted` events, each checked
before any is published, and, with --wait, followed through the event stream to their outcome."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from libs.client.commands.objects import CliError, add_validate_flag, guard, read_manifests, with_client

if TYPE_CHECKING:
    from libs.api.manifests import FieldValidation
    from libs.client.client import PodwayClient
    from libs.client.submission import Line, Submissions
    from libs.events.envelope import Envelope


def jobs_to_submit(docs: list[dict[str, Any]], validate: FieldValidation) -> list[dict[str, Any]]:
    """The batch/v1 Jobs of the files, every one checked first: CliError listing each refusal when any is
    malformed (nothing is then published). Other kinds are skipped with a warning."""
    from libs.api.manifests import validate_document

    jobs, refusals = [], []
    for doc in docs:
        if (doc.get("apiVersion"), doc.get("kind")) != ("batch/v1", "Job"):
            name = (doc.get("metadata") or {}).get("name")
            print(
                f"Warning: skipping {str(doc.get('kind')).lower()}/{name}: submit sends batch/v1 Jobs "
                "(podway apply takes every kind)",
                file=sys.stderr,
            )
            continue
        result = validate_document(doc, field_validation=validate)
        for warning in result.warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        if result.ok:
            jobs.append(doc)
        else:
            refusals.append(result.message)
    if refusals:
        raise CliError("\n".join([*refusals, "error: nothing was submitted"]))
    if not jobs:
        raise CliError("error: no objects passed to submit")
    return jobs


def cmd_submit(args: argparse.Namespace) -> int:
    from libs.client.client import with_namespace
    from libs.client.commands.stack import parse_age

    docs = [with_namespace(doc, args.namespace) for doc in read_manifests(Path(args.filename), "submit")]
    jobs = jobs_to_submit(docs, args.validate)
    try:
        timeout_s = parse_age(args.timeout).total_seconds()
    except ValueError as exc:
        raise CliError(f"error: invalid --timeout {args.timeout!r}: use e.g. 90s or 5m") from exc

    async def work(client: PodwayClient) -> int:
        from libs.client.submission import Submissions, SubmittedJob

        async with client.watching() as events:
            submitted = []
            for job in jobs:
                envelope = await client.publish_job(job)
                subject = envelope.subject
                assert subject is not None
                print(f"job.batch/{subject.name} submitted (event {envelope.event_id})", flush=True)
                submitted.append(SubmittedJob(subject.namespace or "", subject.name, envelope.correlation_id))
            if not args.wait:
                return 0
            followed = Submissions(submitted)
            try:
                await asyncio.wait_for(_follow(followed, events, _print), timeout_s or None)
            except TimeoutError:
                for waiting in followed.pending:
                    _print_error(f"error: timed out waiting for the condition on jobs/{waiting.name}")
                return 1
            return 1 if followed.failed else 0

    return with_client(args, work)


async def _follow(
    followed: Submissions, events: AsyncIterator[Envelope], show: Callable[[Line], None]
) -> None:
    async for envelope in events:
        for line in followed.heard(envelope):
            show(line)
        if followed.done:
            return


def _print(line: Line) -> None:
    print(line.text, file=sys.stderr if line.error else sys.stdout, flush=True)


def _print_error(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    submit = sub.add_parser(
        "submit", help="publish batch/v1 Jobs as job.submitted events (--wait follows them)"
    )
    common(submit)
    submit.add_argument("-f", "--filename", required=True)
    submit.add_argument("-n", "--namespace", default=None)
    submit.add_argument(
        "--wait", action="store_true", help="follow each Job to Complete or Failed (or its refusal)"
    )
    submit.add_argument("--timeout", default="30m", help="how long --wait waits, e.g. 90s, 5m (0s: no limit)")
    add_validate_flag(submit)
    submit.set_defaults(handler=guard(cmd_submit))
