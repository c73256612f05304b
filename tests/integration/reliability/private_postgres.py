"""A PostgreSQL cluster of a test's own, on another port, that the test may stop, kill and start again.

`initdb` and the server run as the `postgres` user (PostgreSQL refuses to run as root); the cluster lives in
a directory that user owns and is removed afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from libs.runtime.nats_server import free_port


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@dataclass
class PrivatePostgres:
    bin_dir: Path
    data_dir: Path
    port: int
    settings: tuple[str, ...] = ()
    """Server settings given at start (`name=value`), on top of the test defaults."""

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    @classmethod
    def create(cls, settings: tuple[str, ...] = ()) -> PrivatePostgres:
        cluster = cls.unstarted(settings)
        cluster.run("initdb", "-D", str(cluster.data_dir), "-A", "trust", "-U", "postgres", "--no-sync")
        cluster.start()
        return cluster

    @classmethod
    def unstarted(cls, settings: tuple[str, ...] = ()) -> PrivatePostgres:
        """A cluster with a port and a directory the server's user owns, and no data yet."""
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL binaries under /usr/lib/postgresql")
        root = Path(tempfile.mkdtemp(prefix="podway-pg-"))
        owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        if owner is not None:
            os.chown(root, owner.pw_uid, owner.pw_gid)
        return cls(bin_dir, root / "data", free_port(), settings)

    def start(self) -> None:
        options = " ".join(
            [
                f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=off",
                *(f"-c {setting}" for setting in self.settings),
            ]
        )
        log = self.data_dir.parent / "server.log"
        # A killed server's socket lock stays behind, naming a pid that may live on as a zombie where nothing
        # reaps orphans (a container's init): the server would take it for a live one. Its own socket dir
        # holds no live socket while it is stopped (postmaster.pid guards the data dir itself).
        for stale in self.data_dir.glob(".s.PGSQL.*"):
            stale.unlink(missing_ok=True)
        for attempt in range(5):
            try:
                self.run(
                    "pg_ctl",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(log),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "60",
                    "start",
                )
                return
            except RuntimeError as error:
                said = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []
                # A port a killed server held may not be free at once: try again, a few times.
                if attempt < 4 and any("could not bind" in line or "already in use" in line for line in said):
                    time.sleep(1.0)
                    continue
                raise RuntimeError(f"{error}\nserver.log:\n" + "\n".join(said)) from None

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop", check=False)

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash would (its children go with it)."""
        pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    def run(self, tool: str, *args: str, check: bool = True) -> str:
        """Run one of the PostgreSQL tools as the server's user; returns what it printed."""
        command = [str(self.bin_dir / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout
