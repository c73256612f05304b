"""What the benches that run services as processes stand on: a fresh, migrated database (a throwaway
PostgreSQL database, or a SQLite file) and an embedded nats-server with the streams provisioned."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from libs.messaging.broker import provision_streams
from libs.runtime.nats_server import EmbeddedNatsServer


@dataclass(frozen=True)
class Backends:
    database_url: str
    nats_url: str
    nats_pid: int | None


@contextlib.asynccontextmanager
async def backends(database: str, postgres_url: str, tmp: Path) -> AsyncIterator[Backends]:
    """A migrated database (`database` is "postgres": a new database beside `postgres_url`'s, dropped after;
    else a SQLite file in `tmp`) and a nats-server in `tmp`, both gone when the block ends."""
    from libs.db.migrate import upgrade

    dropped: str | None = None
    if database == "postgres":
        database_url, dropped = await fresh_postgres(postgres_url)
    else:
        database_url = f"sqlite+aiosqlite:///{tmp / 'bench.db'}"
    await upgrade(database_url)
    nats = EmbeddedNatsServer(data_dir=tmp / "nats").start()
    try:
        await provision_streams(nats.url)
        yield Backends(database_url, nats.url, nats.process.pid if nats.process else None)
    finally:
        nats.stop()
        if dropped:
            await drop_postgres(postgres_url, dropped)


async def fresh_postgres(base_url: str) -> tuple[str, str]:
    """A new, empty database on `base_url`'s server: its URL and its name."""
    import asyncpg
    from sqlalchemy.engine import make_url

    name = f"podway_bench_{uuid.uuid4().hex[:8]}"
    admin = make_url(base_url).set(database="postgres").render_as_string(hide_password=False)
    conn = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    await conn.execute(f"CREATE DATABASE {name}")
    await conn.close()
    return make_url(base_url).set(database=name).render_as_string(hide_password=False), name


async def drop_postgres(base_url: str, name: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    admin = make_url(base_url).set(database="postgres").render_as_string(hide_password=False)
    conn = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await conn.close()
