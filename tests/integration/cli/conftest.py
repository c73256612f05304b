"""The `podway` CLI run as a user runs it: the real entry point in a subprocess, pointed with `--nats-url` at
admission, scheduler and node agent running in-process on a real nats-server and database."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.integration.lifecycle.conftest import stack  # noqa: F401  (the fixture, for these tests)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "deploy" / "examples"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def podway(*args: str, stdin: str | None = None) -> Run:
    """`podway ARGS` in a subprocess, from the repository root (`stdin`: what it reads from standard input)."""
    proc = subprocess.run(
        [sys.executable, "-m", "libs.client.cli", *args],
        capture_output=True,
        input=stdin,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


async def podway_on(nats_url: str, *args: str) -> Run:
    """`podway ARGS --nats-url URL`, off the event loop the in-process services run on."""
    return await asyncio.to_thread(podway, *args, "--nats-url", nats_url)
