"""`podway delete`: delete objects and, as kubectl does by default (`--wait=true`), wait until they are gone,
in kubectl's words."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from libs.api.kinds import group_of_kind
from libs.client.client import PodwayClient

POLL_S = 0.2


@dataclass(frozen=True)
class Target:
    """One object to delete."""

    kind: str
    name: str
    namespace: str | None


def qualified(kind: str, *, plural: bool = False) -> str:
    """How kubectl names a kind in its messages: `job.batch`, `pods`, `podgroups.scheduling.k8s.io`."""
    group = group_of_kind(kind)
    resource = f"{kind.lower()}s" if plural else kind.lower()
    return f"{resource}.{group}" if group else resource


async def delete_all(
    client: PodwayClient,
    targets: list[Target],
    *,
    wait: bool,
    timeout_s: float,
    out: Callable[[str], None],
    err: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    grace_seconds: int | None = None,
) -> int:
    """Delete each target, print what kubectl prints, and with `wait` wait up to `timeout_s` until the
    objects being deleted are gone (0: look once). Exit code 1 when one was not found or outlived the wait.
    `grace_seconds`: how long a running pod deleted has to stop (else its own)."""
    code = 0
    terminating: list[Target] = []
    for target in targets:
        reply = await client.delete(target.kind, target.name, target.namespace, grace_seconds=grace_seconds)
        result = reply.results[0]
        if result.outcome == "not_found":
            err(
                f'Error from server (NotFound): {qualified(target.kind, plural=True)} "{target.name}" not found'
            )
            code = 1
            continue
        if result.outcome == "rejected":
            reason = (result.status or {}).get("reason") or "BadRequest"
            err(f"Error from server ({reason}): {result.message}")
            code = 1
            continue
        out(f'{qualified(target.kind)} "{target.name}" deleted')
        if result.outcome == "pending":
            terminating.append(target)
    if wait and terminating:
        for target in await _wait_gone(client, terminating, timeout_s, clock, sleep):
            err(f"error: timed out waiting for the condition on {target.kind.lower()}s/{target.name}")
            code = 1
    return code


async def _wait_gone(
    client: PodwayClient,
    targets: list[Target],
    timeout_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
) -> list[Target]:
    """The targets still there when the time is up."""
    deadline = clock() + timeout_s
    left = list(targets)
    while True:
        left = [t for t in left if await client.get(t.kind, t.name, t.namespace)]
        if not left or clock() >= deadline:
            return left
        await sleep(min(POLL_S, max(0.0, deadline - clock())))
