"""`get -w`, `get -l`, `events --follow` and `top nodes` as a user runs them against a running stack: the real
entry point in subprocesses, on a real nats-server and PostgreSQL."""

from __future__ import annotations

import asyncio
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.integration.cli.conftest import ROOT, podway_on
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang

pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


class Follower:
    """A long-running `podway` command whose output lines are collected as they come."""

    def __init__(self, nats_url: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "libs.client.cli", *args, "--nats-url", nats_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    async def until(self, done: Callable[[list[str]], bool], timeout_s: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout_s
        while not done(self.seen):
            if time.monotonic() > deadline:
                raise AssertionError(f"not seen within {timeout_s}s; output so far: {self.seen}")
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                await asyncio.sleep(0.05)
        return self.seen

    def stop(self) -> str:
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=10)
        return err


def rows(lines: list[str], status: str) -> set[str]:
    return {line.split()[0] for line in lines[1:] if line.split()[1:2] == [status]}


async def test_a_user_watches_a_gang_start_and_sees_its_gpus(stack: Stack, nats_url: str, tmp_path: Path):
    names = {f"watched-{i}" for i in range(4)}
    watch = Follower(nats_url, "get", "pods", "-n", NAMESPACE, "-w")
    follow = Follower(nats_url, "events", "--follow")
    try:
        await watch.until(lambda lines: lines == ["No resources found."] or len(lines) >= 1)
        manifests = gang("watched", 4, gpus=2, topology_key="topology.example.com/rack")
        for doc in manifests:
            doc["metadata"].setdefault("labels", {})["team"] = "vision" if doc["kind"] == "Pod" else "x"
        # The pods first: they wait for their PodGroup (Pending) until the second apply lets them run.
        pods, rest = tmp_path / "pods.yaml", tmp_path / "group.yaml"
        pods.write_text(yaml.safe_dump_all([doc for doc in manifests if doc["kind"] == "Pod"]))
        rest.write_text(yaml.safe_dump_all([doc for doc in manifests if doc["kind"] != "Pod"]))
        applied = await podway_on(nats_url, "apply", "-f", str(pods))
        assert applied.code == 0, applied.err
        await watch.until(lambda lines: rows(lines, "Pending") == names)
        applied = await podway_on(nats_url, "apply", "-f", str(rest))
        assert applied.code == 0, applied.err

        lines = await watch.until(lambda lines: rows(lines, "Running") == names)
        assert rows(lines, "Pending") == names  # each pod printed again when it changed
        story = await follow.until(lambda lines: sum("pods.running" in line for line in lines) >= 1)
        assert any("pods.bound" in line and "PodGroup/ml/watched" in line for line in story)
    finally:
        watch.stop()
        follow.stop()

    selected = await podway_on(nats_url, "get", "pods", "-n", NAMESPACE, "-l", "team=vision")
    assert {line.split()[0] for line in selected.out.splitlines()[1:]} == names
    none = await podway_on(nats_url, "get", "pods", "-n", NAMESPACE, "-l", "team notin (vision)")
    assert none.out.strip() == "No resources found."

    top = await podway_on(nats_url, "top", "nodes", "-o", "json")
    assert top.code == 0, top.err
    report = yaml.safe_load(top.out)
    assert sum(n["allocated"] for n in report["nodes"]) == 8
    assert sum(n["gpus"] for n in report["nodes"]) == 64 * 8
    (rack,) = [r for r in report["racks"] if r["allocated"]]
    assert rack["allocated"] == 8  # the whole gang in one rack, as it asked
    busy = next(n for n in report["nodes"] if n["allocated"])
    described = await podway_on(nats_url, "describe", "node", busy["name"])
    allocated = described.out.split("Allocated resources:")[1].split("Events:")[0]
    gpus = next(line.split() for line in allocated.splitlines() if line.strip().startswith("GPUs"))
    assert gpus[1] == str(busy["allocated"])
    assert gpus[-1] == "8"
    assert f"Non-terminated Pods: ({busy['pods']} in total)" in allocated
    assert allocated.count("ml/watched-") == busy["pods"]
    table = await podway_on(nats_url, "top", "nodes", "--by", "rack")
    assert table.out.splitlines()[0].split()[:4] == ["RACK", "NODES", "GPUS", "USED"]
