"""`podway up` / `podway down`: the whole stack on one machine, and the file that tells later CLI calls
how to reach it."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from libs.runtime.health import health_file, last_beat, process_name
from libs.runtime.listener import open_listener, parse_address, url_of
from libs.runtime.nats_server import EmbeddedNatsServer
from libs.runtime.settings import PodwaySettings
from libs.runtime.stack_info import STACK_FILE, StackInfo, process_alive
from libs.runtime.supervisor import ServiceSpec, Supervisor

log = logging.getLogger(__name__)

DEFAULT_SERVICES = ("admission", "scheduler", "preemptor", "dra_allocator", "node_agent", "api_server")
ROUTER = "llm_router"
STREAMS_CHECK_S = 5.0
"""How often the supervisor makes sure the streams exist (a deleted or lost stream is created again)."""


def running_stack(settings: PodwaySettings) -> StackInfo | None:
    """The stack recorded in the data dir, if its supervisor is still alive."""
    info = StackInfo.read(settings.run_dir)
    return info if info and process_alive(info.pid) else None


def service_specs(
    settings: PodwaySettings,
    env: dict[str, str],
    names: tuple[str, ...],
    router_listener: socket.socket | None = None,
) -> list[ServiceSpec]:
    """One supervised process per service, each its own console script run by this interpreter; the router
    runs `router_processes` of them (one per CPU by default), all serving `router_listener`."""
    specs = []
    for name in names:
        argv = [sys.executable, "-m", f"services.{name}.main"]
        if name == ROUTER and router_listener is not None:
            fd = router_listener.fileno()
            for instance in range(router_process_count(settings)):
                specs.append(
                    ServiceSpec(
                        name=process_name(name, str(instance)),
                        argv=argv,
                        env={**env, "PODWAY_INSTANCE": str(instance), "PODWAY_ROUTER_HTTP_FD": str(fd)},
                        pass_fds=(fd,),
                    )
                )
            continue
        specs.append(ServiceSpec(name=name, argv=argv, env={**env, "PODWAY_INSTANCE": "0"}))
    return specs


def router_process_count(settings: PodwaySettings) -> int:
    """How many router processes serve the front: the setting, or one per CPU this process may use."""
    if settings.router_processes:
        return settings.router_processes
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Stack:
    """Starts NATS (unless given), prepares the database and streams, and supervises the services."""

    def __init__(
        self,
        settings: PodwaySettings,
        *,
        services: tuple[str, ...] = DEFAULT_SERVICES,
        prepare: Callable[[str, str], None] | None = None,
        provision: Callable[[str], None] | None = None,
        extra_specs: list[ServiceSpec] | None = None,
        service_env: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.settings = settings
        self.services = services
        self.prepare = prepare
        self.provision = provision
        self._streams_checked_at = 0.0
        self.extra_specs = extra_specs or []
        self.service_env = service_env or {}
        """Settings for one service only, by service name (e.g. the node agent's runtime)."""
        self.nats: EmbeddedNatsServer | None = None
        self.supervisor: Supervisor | None = None
        self.info: StackInfo | None = None
        self.router_listener: socket.socket | None = None

    def start(self) -> StackInfo:
        data_dir = self.settings.data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        if ROUTER in self.services:
            # Opened first (a taken address fails before anything started) and held here: the address stays
            # up while router processes die and restart.
            self.router_listener = open_listener(*parse_address(self.settings.router_http_address))
        nats_url = self.settings.nats_url or self._start_nats(data_dir)
        database_url = self.settings.resolved_database_url()
        if self.prepare is not None:
            self.prepare(database_url, nats_url)
        env = {
            "PODWAY_NATS_URL": nats_url,
            "PODWAY_DATABASE_URL": database_url,
            "PODWAY_DATA_DIR": str(data_dir),
            "PODWAY_LOG_LEVEL": self.settings.log_level,
            "PODWAY_LEASE_SECONDS": str(self.settings.lease_seconds),
            "PODWAY_TIME_COMPRESSION": str(self.settings.time_compression),
        }
        if self.settings.router_policy:
            env["PODWAY_ROUTER_POLICY"] = str(self.settings.router_policy.resolve())
        specs = service_specs(self.settings, env, self.services, self.router_listener) + self.extra_specs
        for spec in specs:
            spec.env.update(self.service_env.get(spec.name, {}))
        for spec in specs:
            health_file(self.settings.run_dir.resolve(), spec.name).unlink(missing_ok=True)
        self.supervisor = Supervisor(specs, self.settings.run_dir.resolve(), log_dir=data_dir / "logs")
        self.supervisor.start_all(time.monotonic())
        self.info = StackInfo(
            pid=os.getpid(),
            nats_url=nats_url,
            database_url=database_url,
            data_dir=str(data_dir),
            started_at=time.time(),
            services=self.supervisor.pids(),
            nats_pid=self._nats_pid(),
            router_url=url_of(self.router_listener) if self.router_listener is not None else None,
        )
        self.info.write(self.settings.run_dir)
        return self.info

    def not_ready(self) -> list[str]:
        """Services that have not beaten yet."""
        assert self.supervisor is not None
        run_dir = self.settings.run_dir.resolve()
        children = self.supervisor.children.values()
        return [
            c.spec.name for c in children if c.spec.beats and not last_beat(health_file(run_dir, c.spec.name))
        ]

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Wait until every service that beats has beaten once; then mark the stack ready."""
        assert self.supervisor is not None
        assert self.info is not None
        run_dir = self.settings.run_dir.resolve()
        names = [c.spec.name for c in self.supervisor.children.values() if c.spec.beats]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.supervisor.poll(time.monotonic())
            if all(last_beat(health_file(run_dir, name)) for name in names):
                self.info.ready = True
                self.info.services = self.supervisor.pids()
                self.info.write(self.settings.run_dir)
                return True
            time.sleep(0.05)
        return False

    def _nats_pid(self) -> int | None:
        return self.nats.process.pid if self.nats is not None and self.nats.process is not None else None

    def _start_nats(self, data_dir: Path) -> str:
        self.nats = EmbeddedNatsServer(data_dir=data_dir / "nats").start()
        return self.nats.url

    def supervise(self, should_stop: Callable[[], bool], interval_s: float = 0.5) -> None:
        """Supervise until `should_stop()` says so (the signal handlers set it): the services, the embedded
        nats-server, and the streams."""
        assert self.supervisor is not None
        assert self.info is not None
        while not should_stop():
            self.keep_bus(time.monotonic())
            if self.supervisor.poll(time.monotonic()):
                self.info.services = self.supervisor.pids()
                self.info.write(self.settings.run_dir)
            time.sleep(interval_s)

    def keep_bus(self, now: float) -> None:
        """Start the embedded nats-server again if it exited (same port, same JetStream store: the services
        reconnect on their own), and create the streams again if they are gone."""
        nats = self.nats
        restarted = False
        if nats is not None and nats.process is not None and nats.process.poll() is not None:
            log.warning("nats-server exited with %s; starting it again", nats.process.returncode)
            try:
                nats.start()
                restarted = True
            except Exception:
                log.exception("nats-server did not start again; trying on the next round")
                return
            if self.info is not None:
                self.info.nats_pid = self._nats_pid()
                self.info.write(self.settings.run_dir)
        if self.provision is None or self.info is None:
            return
        if restarted or now - self._streams_checked_at >= STREAMS_CHECK_S:
            self._streams_checked_at = now
            try:
                self.provision(self.info.nats_url)
            except Exception as exc:
                log.warning("could not check the streams: %r", exc)

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop_all()
        if self.nats is not None:
            self.nats.stop()
        if self.router_listener is not None:
            self.router_listener.close()
        (self.settings.run_dir / STACK_FILE).unlink(missing_ok=True)


def stop_running_stack(settings: PodwaySettings, timeout_s: float = 30.0) -> bool:
    """`podway down`: SIGTERM the supervisor recorded in the data dir and wait for it to finish."""
    info = running_stack(settings)
    if info is None:
        return False
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process_alive(info.pid):
        time.sleep(0.1)
    if process_alive(info.pid):
        os.kill(info.pid, signal.SIGKILL)
    return True
