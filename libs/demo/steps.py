"""What every demo step uses: the `Demo` that numbers and times steps, `check`, the examples and `wait_for`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from libs.api.manifests import load_documents
from libs.client.client import PodwayClient

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


class StepFailed(AssertionError):
    """A demo check did not hold."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


@dataclass
class Demo:
    client: PodwayClient
    out: Callable[[str], None] = print
    passed: list[str] = field(default_factory=list)

    async def step(self, title: str, run: Callable[[], Awaitable[None]]) -> None:
        self.out(f"\n== {len(self.passed) + 1}. {title}")
        started = time.perf_counter()
        await run()
        self.passed.append(title)
        self.out(f"   ok ({(time.perf_counter() - started) * 1000:.0f} ms)")


def example(name: str) -> list[dict[str, Any]]:
    return load_documents((EXAMPLES / name).read_text())


async def wait_for(
    probe: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], timeout_s: float = 20
) -> Any:
    deadline = time.monotonic() + timeout_s
    value = await probe()
    while not done(value) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        value = await probe()
    return value


async def clear_namespace(client: PodwayClient, namespace: str) -> None:
    """Delete every gang of a namespace, pods and all, so that the steps after find the fleet idle."""
    for kind in ("Workload", "PodGroup", "Pod"):
        for obj in await client.get(kind, namespace=namespace):
            await client.delete(kind, obj["metadata"]["name"], namespace)
