"""The Kubernetes probes read the health beats: liveness wants a fresh beat (a hung event loop stops beating),
readiness a fresher one that says NATS is connected and the database answered."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from libs.runtime import probe
from libs.runtime.health import beat, beat_forever, health_file, last_beat

NOW = 1_000_000.0


def test_no_beat_is_neither_live_nor_ready(tmp_path: Path):
    assert probe.live(tmp_path, NOW) == [f"no health beat in {tmp_path}"]
    assert probe.ready(tmp_path, NOW)


def test_a_fresh_beat_with_its_connections_up_is_live_and_ready(tmp_path: Path):
    beat(health_file(tmp_path, "admission"), now=NOW - 2, detail={"nats": "connected", "database": "ok"})
    assert probe.live(tmp_path, NOW) == []
    assert probe.ready(tmp_path, NOW) == []


def test_a_beat_older_than_the_limit_means_a_hung_loop_and_fails_liveness(tmp_path: Path):
    beat(health_file(tmp_path, "scheduler"), now=NOW - 31, detail={"nats": "connected", "database": "ok"})
    assert probe.live(tmp_path, NOW) == ["scheduler.health: last beat 31.0s ago"]
    assert probe.live(tmp_path, NOW, max_age_s=60) == []
    assert probe.ready(tmp_path, NOW, max_age_s=60) == []


@pytest.mark.parametrize(
    ("detail", "problem"),
    [
        ({"nats": "reconnecting", "database": "ok"}, "admission.health: NATS is reconnecting"),
        ({"nats": "connected", "database": "unreachable"}, "admission.health: the database is unreachable"),
    ],
)
def test_a_live_service_with_a_connection_down_is_not_ready(tmp_path: Path, detail, problem):
    beat(health_file(tmp_path, "admission"), now=NOW - 1, detail=detail)
    assert probe.live(tmp_path, NOW) == []
    assert probe.ready(tmp_path, NOW) == [problem]


def test_a_service_without_a_database_is_ready_on_nats_alone(tmp_path: Path):
    beat(health_file(tmp_path, "api_server"), now=NOW - 1, detail={"nats": "connected"})
    assert probe.ready(tmp_path, NOW) == []


def test_every_beat_of_the_container_counts_and_a_torn_file_is_no_beat(tmp_path: Path):
    beat(health_file(tmp_path, "node_agent"), now=NOW - 1, detail={"nats": "connected", "database": "ok"})
    health_file(tmp_path, "other").write_text("{not json")
    assert probe.live(tmp_path, NOW) == []
    beat(health_file(tmp_path, "node_agent-1"), now=NOW - 100)
    assert probe.live(tmp_path, NOW) == ["node_agent-1.health: last beat 100.0s ago"]


def test_the_command_exits_zero_when_ready_and_one_when_not(tmp_path: Path, capsys):
    beat(health_file(tmp_path, "admission"), detail={"nats": "connected", "database": "ok"})
    assert probe.main(["ready", "--run-dir", str(tmp_path)]) == 0
    beat(health_file(tmp_path, "admission"), detail={"nats": "closed", "database": "ok"})
    assert probe.main(["live", "--run-dir", str(tmp_path)]) == 0
    assert probe.main(["ready", "--run-dir", str(tmp_path)]) == 1
    assert "NATS is closed" in capsys.readouterr().err


def test_the_probe_imports_the_standard_library_only():
    # The kubelet starts it every few seconds: importing the project's dependencies would cost a CPU second.
    code = "import sys, libs.runtime.probe; print(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "('pydantic', 'sqlalchemy', 'nats', 'faststream', 'prometheus_client', 'yaml')))"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_each_beat_carries_what_the_connections_say(tmp_path: Path):
    path = tmp_path / "svc.health"
    states = iter([{"nats": "connected", "database": "ok"}, {"nats": "reconnecting", "database": "ok"}])
    seen: list[str] = []

    async def connections() -> dict[str, object]:
        return next(states)

    async def next_round(_: float) -> None:
        seen.append(probe.beats(tmp_path)["svc.health"]["nats"])  # type: ignore[arg-type]
        if len(seen) == 2:
            raise asyncio.CancelledError

    await beat_forever(path, connections=connections, sleep=next_round)
    assert seen == ["connected", "reconnecting"]
    assert last_beat(path) is not None
