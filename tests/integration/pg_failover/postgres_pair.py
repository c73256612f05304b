"""A PostgreSQL primary and its streaming standby, a test's own, on this machine's loopback.

The primary crashes as when its host dies (SIGKILL to every one of its processes), the standby is promoted
(`pg_ctl promote`, the step a failover manager such as Patroni takes), and the dead primary's place can be
taken by a new standby of the new primary (a fresh base backup on the same port), so that a long run fails
over again and again while the URL stays the same. With `synchronous=True` the primary commits only once the
standby has flushed the commit (`synchronous_standby_names = '*'`): nothing acknowledged is lost when it
dies. A promoted standby runs alone, asynchronously, until `rejoin()` gives it a standby of its own.

Both servers run as the `postgres` user when the tests run as root (see `PrivatePostgres`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from tests.integration.reliability.private_postgres import PrivatePostgres

REPLICATION = (
    "wal_level=replica",
    "max_wal_senders=4",
    "max_replication_slots=4",
    "hot_standby=on",
    "wal_receiver_status_interval=1s",
    "wal_retrieve_retry_interval=1s",
)
"""A standby whose primary restarted streams again within a second (the default waits 5 s, and the
primary's commits wait for it meanwhile)."""
SLOT = "podway_standby"


@dataclass(frozen=True)
class Failover:
    """How long a failover took, seconds on the monotonic clock (`killed_at` is when the kill was sent)."""

    killed_at: float
    primary_gone_s: float
    """From the kill until no process of the old primary was left and its port refused connections."""
    promoted_s: float
    """From the kill until the promoted standby accepted writes (the promotion itself is most of it)."""
    old_port: int
    new_port: int


@dataclass
class PostgresPair:
    primary: PrivatePostgres
    standby: PrivatePostgres
    synchronous: bool
    _killed_at: float = 0.0
    _gone_s: float = 0.0

    @classmethod
    def create(cls, *, synchronous: bool = True) -> PostgresPair:
        primary = PrivatePostgres.create(REPLICATION)
        pair = cls(primary, PrivatePostgres.unstarted(REPLICATION), synchronous)
        try:
            pair._follow(pair.standby, primary)
        except BaseException:
            pair.remove()
            raise
        return pair

    @property
    def url(self) -> str:
        """Both servers, the writable one chosen at connect time (libpq's multi-host form, which
        `libs.db.engine.parse_database_url` accepts). The order stays the same across failovers."""
        first, second = sorted((self.primary.port, self.standby.port))
        return (
            f"postgresql+asyncpg://postgres@127.0.0.1:{first},127.0.0.1:{second}/postgres"
            "?target_session_attrs=read-write"
        )

    def fail_over(self) -> Failover:
        """`crash_primary()`, then at once `promote_standby()`."""
        self.crash_primary()
        return self.promote_standby()

    def crash_primary(self) -> None:
        """SIGKILL every process of the primary (see `kill_cluster`)."""
        self._killed_at = time.monotonic()
        kill_cluster(self.primary)
        self._gone_s = time.monotonic() - self._killed_at

    def promote_standby(self) -> Failover:
        """Promote the standby of the crashed primary; the roles swap (the old primary, dead, is `standby`
        until `rejoin()`)."""
        old, new = self.primary, self.standby
        new.run("pg_ctl", "-D", str(new.data_dir), "-w", "-t", "60", "promote")
        promoted_at = time.monotonic()
        self.primary, self.standby = new, old
        return Failover(
            killed_at=self._killed_at,
            primary_gone_s=round(self._gone_s, 3),
            promoted_s=round(promoted_at - self._killed_at, 3),
            old_port=old.port,
            new_port=new.port,
        )

    def rejoin(self) -> None:
        """Make the dead old primary a standby of the new one: a fresh base backup on its old port (what
        `pg_rewind` would save is copying the data; these clusters are small)."""
        shutil.rmtree(self.standby.data_dir, ignore_errors=True)
        self._follow(self.standby, self.primary)

    def standby_streaming(self) -> bool:
        return streaming(self.primary)

    def remove(self) -> None:
        for node in (self.primary, self.standby):
            node.remove()

    def _follow(self, standby: PrivatePostgres, primary: PrivatePostgres) -> None:
        """Base-backup `primary` into `standby` (with a replication slot, so the primary keeps the WAL the
        standby has not received) and start it streaming; once it streams, make it synchronous if asked."""
        with contextlib.suppress(RuntimeError):
            query(primary, f"SELECT pg_drop_replication_slot('{SLOT}')")
        standby.run(
            "pg_basebackup",
            *("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"),
            *("-D", str(standby.data_dir), "-R", "-X", "stream", "-C", "-S", SLOT),
            *("--checkpoint=fast", "--no-sync"),
        )
        standby.start()
        deadline = time.monotonic() + 60
        while not streaming(primary):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby on port {standby.port} never streamed from {primary.port}")
            time.sleep(0.05)
        names = "*" if self.synchronous else ""
        query(primary, f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        query(primary, "SELECT pg_reload_conf()")
        # A reload is a signal: the WAL sender takes the new setting some time after pg_reload_conf returns.
        wanted = "sync" if self.synchronous else "async"
        while query(primary, "SELECT string_agg(sync_state, ',') FROM pg_stat_replication") != wanted:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby on port {standby.port} never became {wanted}")
            time.sleep(0.05)


def streaming(primary: PrivatePostgres) -> bool:
    return query(primary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == "1"


def query(node: PrivatePostgres, sql: str) -> str:
    """One statement through `psql`, its single value as text."""
    psql = ("psql", "-h", "127.0.0.1", "-p", str(node.port), "-U", "postgres", "-d", "postgres")
    return node.run(*psql, "-X", "-A", "-t", "-c", sql).strip()


def kill_cluster(node: PrivatePostgres) -> None:
    """SIGKILL the postmaster and every process it started, at once, and wait until they are gone and the
    port refuses connections: the host went away (killing the postmaster alone lets its backends finish
    what they were doing)."""
    pid = int((node.data_dir / "postmaster.pid").read_text().splitlines()[0])
    os.kill(pid, signal.SIGSTOP)  # it forks no backend while its children are listed
    victims = [pid, *_children(pid)]
    for victim in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (any(_alive(v) for v in victims) or _listening(node.port)):
        time.sleep(0.01)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # The command name is in parentheses and may hold spaces: the fields after it are fixed.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of another process stays a zombie until reaped: gone for our purpose.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0
