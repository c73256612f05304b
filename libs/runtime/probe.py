"""Kubernetes probes read from a service's health beats (`python -m libs.runtime.probe live|ready`).

A service beats from its event loop (`libs.runtime.health`), so a beat file that stops getting fresher means a
hung loop or connections gone for good: the liveness probe fails and the kubelet restarts the container. The
readiness probe also wants the last beat to say NATS is connected and the database answered
(`libs.messaging.readiness`). The probe imports the standard library only: the kubelet runs it every few
seconds in the service's container.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

LIVE_MAX_AGE_S = 30.0
READY_MAX_AGE_S = 10.0


def beats(run_dir: Path) -> dict[str, dict[str, object]]:
    """Every readable beat in `run_dir`, by file name (one per process of the container)."""
    found = {}
    for path in sorted(run_dir.glob("*.health")):
        try:
            beat = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(beat, dict) and isinstance(beat.get("at"), int | float):
            found[path.name] = beat
    return found


def live(run_dir: Path, now: float, max_age_s: float = LIVE_MAX_AGE_S) -> list[str]:
    """Why the container is not live (empty: it is): no beat, or one older than `max_age_s`."""
    found = beats(run_dir)
    if not found:
        return [f"no health beat in {run_dir}"]
    return [_stale(name, beat, now) for name, beat in found.items() if now - _at(beat) > max_age_s]


def ready(run_dir: Path, now: float, max_age_s: float = READY_MAX_AGE_S) -> list[str]:
    """Why the container is not ready (empty: it is): a stale beat, NATS not connected, the database not
    answering (a beat without a `database` entry is from a service without one)."""
    problems = live(run_dir, now, max_age_s)
    for name, beat in beats(run_dir).items():
        if beat.get("nats", "connected") != "connected":
            problems.append(f"{name}: NATS is {beat['nats']}")
        if beat.get("database", "ok") != "ok":
            problems.append(f"{name}: the database is {beat['database']}")
    return problems


def _at(beat: dict[str, object]) -> float:
    at = beat["at"]
    assert isinstance(at, int | float)
    return float(at)


def _stale(name: str, beat: dict[str, object], now: float) -> str:
    return f"{name}: last beat {now - _at(beat):.1f}s ago"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m libs.runtime.probe", description=__doc__)
    parser.add_argument("probe", choices=("live", "ready"))
    parser.add_argument("--run-dir", type=Path, default=Path("/data/run"), help="PODWAY_DATA_DIR/run")
    parser.add_argument("--max-age", type=float, help="seconds a beat stays fresh (live 30, ready 10)")
    args = parser.parse_args(argv)
    check = live if args.probe == "live" else ready
    default = LIVE_MAX_AGE_S if args.probe == "live" else READY_MAX_AGE_S
    problems = check(args.run_dir, time.time(), args.max_age or default)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
