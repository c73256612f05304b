"""Runs the services as subprocesses: restarts them when they crash or stop beating, stops them cleanly."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from libs.runtime.children import stop_with_parent
from libs.runtime.health import health_file, last_beat

log = logging.getLogger(__name__)

BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 30.0


@dataclass(frozen=True)
class ServiceSpec:
    """How to start one supervised process."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    beats: bool = True
    pass_fds: tuple[int, ...] = ()
    """Descriptors the process inherits (a listening socket the supervisor keeps open across restarts)."""


@dataclass
class SupervisedProcess:
    spec: ServiceSpec
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    next_start_at: float = 0.0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Supervisor:
    """Keeps each service alive. `poll(now)` is one supervision step; time is passed in."""

    def __init__(
        self,
        specs: list[ServiceSpec],
        run_dir: Path,
        *,
        log_dir: Path | None = None,
        health_timeout_s: float = 15.0,
        startup_grace_s: float = 45.0,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.run_dir = run_dir
        self.log_dir = log_dir or run_dir
        self.health_timeout_s = health_timeout_s
        self.startup_grace_s = startup_grace_s
        self.wall_clock = wall_clock
        self.children = {spec.name: SupervisedProcess(spec) for spec in specs}
        self.stopping = False

    def start_all(self, now: float) -> None:
        for child in self.children.values():
            self._start(child, now)

    def poll(self, now: float) -> list[str]:
        """Restart what died or went silent; returns the names restarted in this step."""
        restarted: list[str] = []
        if self.stopping:
            return restarted
        for child in self.children.values():
            if child.running() and self._silent(child, now):
                log.warning(
                    "%s stopped beating; restarting", child.spec.name, extra={"child": child.spec.name}
                )
                self._kill(child)
            if not child.running() and now >= child.next_start_at:
                self._note_crash(child, now)
                self._start(child, now)
                restarted.append(child.spec.name)
        return restarted

    def _silent(self, child: SupervisedProcess, now: float) -> bool:
        if not child.spec.beats or now - child.started_at < self.startup_grace_s:
            return False
        beat = last_beat(health_file(self.run_dir, child.spec.name))
        return beat is None or self.wall_clock() - beat > self.health_timeout_s

    def _note_crash(self, child: SupervisedProcess, now: float) -> None:
        code = child.process.returncode if child.process else None
        child.restarts += 1
        backoff = min(BACKOFF_MAX_S, BACKOFF_START_S * 2 ** min(child.restarts, 10))
        # A child that ran a while before dying starts again at once; a crash loop backs off.
        child.next_start_at = now if now - child.started_at > BACKOFF_MAX_S else now + backoff
        log.warning(
            "service exited", extra={"child": child.spec.name, "code": code, "restarts": child.restarts}
        )

    def _start(self, child: SupervisedProcess, now: float) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        out = (self.log_dir / f"{child.spec.name}.log").open("ab")
        child.process = subprocess.Popen(
            child.spec.argv,
            env={**os.environ, **child.spec.env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=child.spec.pass_fds,
            preexec_fn=stop_with_parent,
        )
        out.close()
        child.started_at = now

    def _kill(self, child: SupervisedProcess) -> None:
        if child.process and child.process.poll() is None:
            child.process.kill()
            child.process.wait()

    def stop_all(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every child, wait up to `timeout_s`, then SIGKILL what is left."""
        self.stopping = True
        for child in self.children.values():
            if child.running() and child.process:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for child in self.children.values():
            if child.process is None:
                continue
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._kill(child)

    def pids(self) -> dict[str, int | None]:
        return {name: child.pid for name, child in self.children.items()}
