"""A JetStream cluster of nats-server processes on loopback ports: what tests, the chaos harness and the
benchmarks run Podway on to see it survive the loss of a server.

Each server has its own client, route and monitoring port and its own store dir; the routes join all of
them into one cluster. `start` returns once JetStream's meta group has a leader and every server reports
itself healthy; `kill` (SIGKILL) and `restart` (same ports, same store) are the faults."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from libs.runtime.children import stop_with_parent
from libs.runtime.nats_server import NatsServerError, free_port, nats_server_binary, port_was_taken


@dataclass
class ClusterNode:
    """One server of the cluster: its name (`server_name`, as JetStream reports leaders), ports and store."""

    name: str
    root: Path
    port: int = field(default_factory=free_port)
    route_port: int = field(default_factory=free_port)
    monitor_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def store_dir(self) -> Path:
        return self.root / "jetstream"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def config(self, cluster: str, routes: list[int]) -> str:
        route_urls = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in routes)
        return (
            f'server_name: "{self.name}"\n'
            f"listen: 127.0.0.1:{self.port}\n"
            f"http: 127.0.0.1:{self.monitor_port}\n"
            f'jetstream {{ store_dir: "{self.store_dir}" }}\n'
            f'cluster {{ name: "{cluster}", listen: 127.0.0.1:{self.route_port}, routes: [{route_urls}] }}\n'
        )

    def monitor(self, path: str) -> tuple[int, Any]:
        """(HTTP status, JSON body) of the server's monitoring endpoint `path`; (0, None) when unreachable."""
        url = f"http://127.0.0.1:{self.monitor_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=1.0) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, None
        except (OSError, ValueError):
            return 0, None


class NatsCluster:
    """`with NatsCluster(tmp, size=3) as cluster:` then `cluster.url` (every server, comma-separated)."""

    def __init__(self, root: Path, *, size: int = 3, name: str = "podway") -> None:
        self.root = root
        self.name = name
        self.nodes = [ClusterNode(f"n{i}", root / f"n{i}") for i in range(size)]
        self.down: set[str] = set()
        """Servers killed on purpose (and not restarted since)."""

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """What `--nats-url` / PODWAY_NATS_URL take: every server of the cluster."""
        return ",".join(self.urls)

    def pids(self) -> list[int]:
        return [node.process.pid for node in self.nodes if node.process is not None and node.running]

    def start(self, timeout_s: float = 60.0, attempts: int = 3) -> NatsCluster:
        """Launch every server and wait until the cluster is ready. A server that found one of its ports
        taken (another process bound it after it was chosen) makes every server start again on new ports."""
        for attempt in range(attempts):
            for index in range(len(self.nodes)):
                self._launch(index)
            try:
                self.wait_ready(timeout_s)
                return self
            except NatsServerError:
                if attempt + 1 == attempts or not self._a_port_was_taken():
                    raise
                self.stop()
                self.nodes = [ClusterNode(node.name, node.root) for node in self.nodes]
        return self

    def _a_port_was_taken(self) -> bool:
        return any(
            port_was_taken(node.root / "nats-server.log") or port_was_taken(node.root / "nats-server.stderr")
            for node in self.nodes
            if not node.running
        )

    def _launch(self, index: int) -> None:
        node = self.nodes[index]
        node.root.mkdir(parents=True, exist_ok=True)
        routes = [other.route_port for other in self.nodes if other is not node]
        config = node.root / "nats-server.conf"
        config.write_text(node.config(self.name, routes))
        log_file, errors = node.root / "nats-server.log", node.root / "nats-server.stderr"
        command = [nats_server_binary(), "-c", str(config), "-l", str(log_file)]
        with errors.open("ab") as stderr:
            node.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=stop_with_parent
            )

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until the meta group's leader sees every running server as current and each of them answers
        `/healthz?js-enabled-only=true`. Raises NatsServerError at the deadline."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node in self.nodes:
                if (
                    node.name not in self.down
                    and node.process is not None
                    and node.process.poll() is not None
                ):
                    raise NatsServerError(
                        f"{node.name} exited with {node.process.returncode}; see {node.root}"
                    )
            running = [node for node in self.nodes if node.running]
            if self._meta_current(running) and all(
                node.monitor("/healthz?js-enabled-only=true")[0] == 200 for node in running
            ):
                return
            time.sleep(0.1)
        raise NatsServerError(f"the NATS cluster in {self.root} was not ready within {timeout_s:g}s")

    def meta_leader(self) -> str | None:
        """The server leading JetStream's meta group, as the first running server that knows one reports."""
        for node in self.nodes:
            if not node.running:
                continue
            status, body = node.monitor("/jsz")
            leader = (body or {}).get("meta_cluster", {}).get("leader") if status == 200 else None
            if leader:
                return str(leader)
        return None

    def _meta_current(self, running: list[ClusterNode]) -> bool:
        """Whether the meta group's leader runs and sees every other running server as current: before
        that, a new replicated stream may find no peers to be placed on."""
        leader = self.meta_leader()
        node = next((n for n in running if n.name == leader), None)
        if node is None:
            return False
        status, body = node.monitor("/jsz")
        replicas = (body or {}).get("meta_cluster", {}).get("replicas") or [] if status == 200 else []
        current = {peer.get("name") for peer in replicas if peer.get("current")}
        return all(other.name in current for other in running if other is not node)

    def index_of(self, name: str) -> int:
        """The position of the server called `name` (a stream's `cluster.leader`)."""
        return next(i for i, node in enumerate(self.nodes) if node.name == name)

    def kill(self, index: int) -> None:
        """SIGKILL server `index`: no goodbye to its routes or clients, its store left as it was."""
        node = self.nodes[index]
        self.down.add(node.name)
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait()

    def restart(self, index: int, timeout_s: float = 60.0) -> None:
        """Start server `index` again on its ports and store; returns once the cluster is ready again."""
        self.kill(index)
        self._launch(index)
        self.down.discard(self.nodes[index].name)
        self.wait_ready(timeout_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        for node in self.nodes:
            if node.running:
                assert node.process is not None
                node.process.terminate()
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
